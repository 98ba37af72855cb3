// The client helpers against real servers on loopback:
//  - a plain server that sends Retry-After as an HTTP-date, driven by a
//    ManualClock that the retry loop's waiter advances (deterministic);
//  - the libcurl example (examples/client) against the same kind of server in
//    real time, and against a tollgate-limited server, where it must pace itself
//    so that it never sees a 429;
//  - tollgated's decision API, when the build has tollgated.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "testing/test_paths.h"
#include "tollgate/client.h"
#include "tollgate/local_store.h"
#include "tollgate/middleware/httplib.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

constexpr int64_t kSec = 1'000'000'000;

// Serves /limited: the first request gets 429 with Retry-After = an HTTP-date
// `delay_s` whole seconds after the next full second of `clock`'s wall time;
// requests before that date get 429 again (counted as early), later ones 200.
class HttpDateServer {
 public:
  HttpDateServer(const Clock& clock, int delay_s) : clock_(clock), delay_s_(delay_s) {
    server_.Get("/limited", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t now = clock_.WallNow();
      ++requests_;
      if (retry_at_s_ == 0) {
        retry_at_s_ = now / kSec + 1 + delay_s_;
      } else if (now >= retry_at_s_ * kSec) {
        res.set_content("ok", "text/plain");
        return;
      } else {
        ++early_;
      }
      res.status = 429;
      res.set_header("Retry-After", FormatHttpDate(retry_at_s_));
      res.set_content("slow down", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~HttpDateServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int early() {
    std::lock_guard<std::mutex> lock(mu_);
    return early_;
  }
  int64_t retry_at_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return retry_at_s_;
  }

 private:
  const Clock& clock_;
  const int delay_s_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  int requests_ = 0;
  int early_ = 0;
  int64_t retry_at_s_ = 0;
};

TEST(ClientServerTest, RetryHonoursAnHttpDateRetryAfter) {
  // Wall time in the middle of a second, so the date is 2.5 s away.
  ManualClock clock(1'000'000'000'000LL, 1'700'000'000'500'000'000LL - 1'000'000'000'000LL);
  HttpDateServer server(clock, 2);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5);
  RetryPolicy policy({.max_attempts = 5, .base_delay = std::chrono::milliseconds(100)}, clock, 42);
  std::vector<Nanos> waits;
  int status = 0;
  while (true) {
    auto res = client.Get("/limited");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    status = res->status;
    std::vector<HeaderPair> pairs;
    for (const auto& [n, v] : res->headers) pairs.emplace_back(n, v);
    const RateLimitInfo info = ParseRateLimitHeaders(pairs, clock.WallNow());
    const RetryDecision d = policy.OnResponse(status, info);
    if (!d.retry) break;
    waits.push_back(d.delay);
    clock.Advance(d.delay);  // the waiter: moves the server's clock too
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(server.early(), 0) << "a retry arrived before the Retry-After date";
  EXPECT_EQ(server.requests(), 2);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_GE(waits[0], Nanos(2'500'000'000));
}

// Runs the example binary, returning its exit code and output.
std::pair<int, std::string> RunExample(const std::string& args) {
  // Appended piece by piece: GCC 12 with the tests' PCH reported a -Warray-bounds false positive
  // in the operator+ chain this was.
  std::string command = tollgate::testing::ProgramPath("CURL_RETRY_EXAMPLE");
  command += ' ';
  command += args;
  command += " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  const int rc = pclose(pipe);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, output};
}

TEST(ClientServerTest, CurlExampleWaitsForTheHttpDate) {
  HttpDateServer server(SystemClock::Instance(), 0);  // 0-1 s of real waiting
  const auto [rc, output] = RunExample("http://127.0.0.1:" + std::to_string(server.port()) +
                                       "/limited --max-attempts 4 --max-total-ms 10000");
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("retry-after="), std::string::npos) << output;
  EXPECT_EQ(server.early(), 0) << output;
  EXPECT_EQ(server.requests(), 2) << output;
}

TEST(ClientServerTest, CurlExamplePacesItselfAgainstATollgateServer) {
  // 2/s, bursts of 2, real clock: five requests back to back would get 429s;
  // paced by RateLimit remaining they never do.
  auto policies = PolicyStore::FromText(R"({"rules": [{
      "name": "per-key", "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 2, "burst": 2}}]})");
  ASSERT_TRUE(policies.ok()) << policies.status().ToString();
  auto store = LocalStore::Create({.max_keys = 1024});
  ASSERT_TRUE(store.ok());
  auto enforcer = Enforcer::Create(*policies, store->get(), &SystemClock::Instance());
  ASSERT_TRUE(enforcer.ok());
  std::atomic<int> rejected{0};
  httplib::Server server;
  middleware::HttplibOptions options;
  options.observe = [&](const httplib::Request&, const CheckOutcome& o) {
    if (!o.allowed()) ++rejected;
  };
  middleware::InstallHttplib(server, **enforcer, options);
  server.Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  const auto [rc, output] = RunExample("http://127.0.0.1:" + std::to_string(port) +
                                       "/api --requests 5 --header 'X-Api-Key: pace' "
                                       "--max-total-ms 10000");
  server.stop();
  thread.join();
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(rejected.load(), 0) << output;
  EXPECT_NE(output.find("pacing"), std::string::npos) << output;
  EXPECT_NE(output.find("5 of 5 requests succeeded"), std::string::npos) << output;
}

}  // namespace
}  // namespace tollgate
