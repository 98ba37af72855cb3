// The client helpers against a real tollgated in gateway mode (in front of a
// small httplib upstream): the 429's Retry-After and RateLimit fields parse,
// the retry policy waits at least as long as asked and the retry then passes;
// the libcurl example paces itself through tollgated without a single 429.
//
// tollgated is taken from $TOLLGATED or <build>/server/tollgated; the test is
// skipped when the build has no server (TOLLGATE_BUILD_SERVER=OFF).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"
#include "testing/timing.h"
#include "tollgate/client.h"

extern char** environ;

namespace tollgate {
namespace {

namespace fs = std::filesystem;

std::string TollgatedPath() {
  if (const char* p = std::getenv("TOLLGATED"); p != nullptr && *p) return p;
  if (const char* b = std::getenv("TOLLGATE_BINARY_DIR"); b != nullptr) {
    const fs::path p = fs::path(b) / "server" / "tollgated";
    if (fs::exists(p)) return p.string();
  }
  return "";
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::vector<HeaderPair> Pairs(const httplib::Headers& headers) {
  std::vector<HeaderPair> out;
  for (const auto& [n, v] : headers) out.emplace_back(n, v);
  return out;
}

class TollgatedClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tollgated = TollgatedPath();
    if (tollgated.empty()) GTEST_SKIP() << "no tollgated in this build";

    upstream_.Get("/api/items", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("items", "text/plain");
    });
    const int upstream_port = upstream_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(upstream_port, 0);
    upstream_thread_ = std::thread([this] { upstream_.listen_after_bind(); });

    const std::string policy = dir_.File("policy.json");
    std::ofstream(policy) << R"({"rules": [{"name": "per-key", "limit_keys": ["header:x-api-key"],
        "algorithm": "token_bucket", "algorithm_config": {"rps": 2, "burst": 2}}]})";

    port_ = FreePort();
    ASSERT_GT(port_, 0);
    const std::string listen = "127.0.0.1:" + std::to_string(port_);
    const std::string upstream = "http://127.0.0.1:" + std::to_string(upstream_port);
    std::vector<std::string> args = {tollgated, "--policy",    policy, "--listen",
                                     listen,    "--admin",     "",     "--upstream",
                                     upstream,  "--log-level", "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, tollgated.c_str(), nullptr, nullptr, argv.data(), environ), 0);

    // Ready when /healthz answers; bounded.
    bool exited = false;
    const bool ready = testing::WaitFor(
        [&] {
          httplib::Client c("127.0.0.1", port_);
          c.set_connection_timeout(1);
          if (auto r = c.Get("/healthz"); r && r->status == 200) return true;
          int status = 0;
          exited = waitpid(pid_, &status, WNOHANG) != 0;
          return exited;
        },
        std::chrono::seconds(20), std::chrono::milliseconds(20));
    ASSERT_FALSE(exited) << "tollgated exited early";
    ASSERT_TRUE(ready) << "tollgated did not become ready on " << listen;
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    upstream_.stop();
    if (upstream_thread_.joinable()) upstream_thread_.join();
  }

  httplib::Server upstream_;
  std::thread upstream_thread_;
  testing::ScopedTempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(TollgatedClientTest, RetryAfterFromTollgatedIsHonoured) {
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(5);
  const httplib::Headers h = {{"X-Api-Key", "retry"}};
  ASSERT_EQ(client.Get("/api/items", h)->status, 200);
  ASSERT_EQ(client.Get("/api/items", h)->status, 200);
  auto rejected = client.Get("/api/items", h);
  ASSERT_TRUE(rejected);
  ASSERT_EQ(rejected->status, 429) << rejected->body;
  const auto pairs = Pairs(rejected->headers);
  const RateLimitInfo info = ParseRateLimitHeaders(pairs, SystemClock::Instance().WallNow());
  EXPECT_EQ(info.source, RateLimitSource::kDraft11);
  ASSERT_TRUE(info.retry_after.has_value());
  EXPECT_GE(*info.retry_after, std::chrono::seconds(1));
  ASSERT_NE(info.Tightest(), nullptr);
  EXPECT_EQ(info.Tightest()->remaining, 0);

  RetryPolicy policy({.max_attempts = 3, .max_total = std::chrono::seconds(10)},
                     SystemClock::Instance(), 7);
  const RetryDecision d = policy.OnResponse(rejected->status, info);
  ASSERT_TRUE(d.retry);
  EXPECT_GE(d.delay, *info.retry_after);
  std::this_thread::sleep_for(d.delay);  // the retry policy's wait is what is under test
  auto retried = client.Get("/api/items", h);
  ASSERT_TRUE(retried);
  EXPECT_EQ(retried->status, 200);
  EXPECT_EQ(retried->body, "items");
}

TEST_F(TollgatedClientTest, CurlExamplePacesThroughTollgated) {
  const std::string command = tollgate::testing::ProgramPath("CURL_RETRY_EXAMPLE") +
                              " http://127.0.0.1:" + std::to_string(port_) +
                              "/api/items --requests 4 --header 'X-Api-Key: pace' "
                              "--max-total-ms 10000 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  const int rc = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << output;
  EXPECT_EQ(output.find(": 429"), std::string::npos) << "pacing should avoid every 429\n" << output;
  EXPECT_NE(output.find("4 of 4 requests succeeded"), std::string::npos) << output;
}

}  // namespace
}  // namespace tollgate
