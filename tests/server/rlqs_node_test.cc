// The Rate Limit Quota Service through the real tollgated binary, asked by simulated Envoy data
// planes written with Node's @grpc/grpc-js over the repository's rlqs.proto
// (tests/node/rlqs_data_planes.mjs, installed by tools/deps.sh with npm ci): several streams at
// once with different demands, each enforcing its assignment as Envoy's rate_limit_quota filter
// does. On the local store with one tollgated, and on one real redis-server with two tollgated
// instances (streams on both: the store bounds their sum). The script asserts and prints its
// figures as one JSON line; this test starts the peers, runs it and shows its output.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "server/server_fixture.h"
#include "server/tollgated_process.h"
#include "testing/child_process.h"
#if !TOLLGATE_RLQS_NODE_NO_REDIS
#include "testing/redis_server.h"
#endif
#include "testing/test_paths.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

// 100 requests a second (burst 100) for each user under name=api: every plane reports the
// same bucket {name: api, user: alice}, so they share one store bucket.
constexpr int kRate = 100;
constexpr const char* kRules = R"(domain: edge
descriptors:
  - key: name
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 100}
)";

std::string NodeBinary() {
  for (const char* candidate : {"/usr/bin/node", "/usr/local/bin/node", "/usr/bin/nodejs"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

class RlqsNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    node_ = NodeBinary();
    if (node_.empty()) GTEST_SKIP() << "node is not installed (tools/deps.sh installs nodejs)";
    // Installed by tools/deps.sh (npm ci in tests/node): missing means deps did not run.
    ASSERT_TRUE(std::filesystem::exists(SourcePathOf("tests/node/node_modules/@grpc/grpc-js")))
        << "tests/node/node_modules is missing: run tools/deps.sh (npm ci in tests/node)";
    rules_dir_ = dir_ + "/ratelimit";
    std::filesystem::create_directory(rules_dir_);
    WriteFile(rules_dir_ + "/edge.yaml", kRules);
    WriteFile(dir_ + "/policy.json", GenerousPolicy(1000000));
  }

  // A tollgated with its gRPC and admin listeners on free ports, over `store`.
  std::unique_ptr<Tollgated> StartTollgated(const std::string& name, const std::string& store) {
    const std::string home = dir_ + "/" + name;
    std::filesystem::create_directory(home);
    WriteFile(home + "/tollgated.json", R"({"policy": ")" + dir_ + R"(/policy.json",
        "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 1, "store": ")" +
                                            store + R"(",
        "grpc": {"listen": "127.0.0.1:0", "rls_config": [")" +
                                            rules_dir_ + R"("]}})");
    auto t = std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", home + "/tollgated.json"}, home);
    EXPECT_TRUE(t->WaitStarted()) << name << ": " << t->Log();
    EXPECT_GT(t->grpc_port(), 0) << t->Log();
    return t;
  }

  // Runs the data planes: `planes` is [name, demand, index of the tollgated] per stream.
  // Returns the script's summary (its last output line), after asserting it exited 0.
  nlohmann::json RunDataPlanes(const std::vector<Tollgated*>& servers,
                               const std::vector<std::tuple<std::string, int, size_t>>& planes,
                               bool check_shares) {
    nlohmann::json args = {
        {"proto_root", SourcePathOf("proto")},
        {"domain", "edge"},
        {"bucket", {{"name", "api"}, {"user", "alice"}}},
        {"rate", kRate},
        {"burst", kRate},
        {"report_ms", 1000},
        {"warmup_ms", 4000},
        {"measure_ms", 5000},
        {"check_shares", check_shares},
    };
    for (const auto& [name, demand, server] : planes) {
      args["planes"].push_back(
          {{"name", name},
           {"demand", demand},
           {"target", "127.0.0.1:" + std::to_string(servers[server]->grpc_port())}});
    }
    for (Tollgated* s : servers) {
      args["admins"].push_back("127.0.0.1:" + std::to_string(s->admin_port()));
    }
    const std::string output = dir_ + "/node.log";
    ChildSpec spec;
    spec.argv = {node_, SourcePathOf("tests/node/rlqs_data_planes.mjs"), args.dump()};
    spec.cwd = SourcePathOf("tests/node");
    spec.output = output;
    const pid_t pid = SpawnChild(spec);
    EXPECT_GT(pid, 0);
    int status = -1;
    // The script runs about 9 s of traffic; the deadline is for a loaded machine.
    const bool exited = WaitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 60s, 20ms);
    if (!exited) StopChild(pid, SIGKILL);
    const std::string log = ReadWholeFile(output);
    EXPECT_TRUE(exited) << "node did not finish: " << log;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "node: " << log;
    std::printf("data planes: %s", log.c_str());  // the figures, in ctest's output
    const std::string last = log.substr(log.rfind('\n', log.size() - 2) + 1);
    nlohmann::json summary = nlohmann::json::parse(last, nullptr, false);
    EXPECT_FALSE(summary.is_discarded()) << log;
    return summary;
  }

  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  std::string rules_dir_;
  std::string node_;
};

// One tollgated on the local store; three data planes wanting 10, 40 and 200 requests a second
// of a 100/s rule (max-min fair shares 10, 40, 50).
TEST_F(RlqsNodeTest, ThreeDataPlanesShareOneRuleByDemand) {
  auto t = StartTollgated("one", "local");
  ASSERT_FALSE(HasFailure());
  const nlohmann::json summary =
      RunDataPlanes({t.get()}, {{"light", 10, 0}, {"medium", 40, 0}, {"heavy", 200, 0}}, true);
  EXPECT_TRUE(summary.value("failure", nlohmann::json()).is_null()) << summary.dump();
}

#if !TOLLGATE_RLQS_NODE_NO_REDIS
// Two tollgated on one redis-server, two streams on each: what all four admit stays within
// the rule's limit plus one assignment per stream, as the store bounds what both assign.
TEST_F(RlqsNodeTest, TwoTollgatedOnOneRedisStayWithinTheLimit) {
  auto redis = RedisServer::Start();
  if (redis.missing) GTEST_SKIP() << redis.error;
  ASSERT_TRUE(redis) << redis.error;
  auto a = StartTollgated("a", redis->url());
  auto b = StartTollgated("b", redis->url());
  ASSERT_FALSE(HasFailure());
  const nlohmann::json summary = RunDataPlanes(
      {a.get(), b.get()},
      {{"a-light", 10, 0}, {"a-heavy", 200, 0}, {"b-medium", 60, 1}, {"b-heavy", 200, 1}}, false);
  EXPECT_TRUE(summary.value("failure", nlohmann::json()).is_null()) << summary.dump();
}
#endif

}  // namespace
}  // namespace tollgate::testing
