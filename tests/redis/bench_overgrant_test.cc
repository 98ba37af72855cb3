// `tollgate bench overgrant` end to end: the built CLI against a real
// redis-server, several processes on one key. The bench measures the span the
// grants really took in Redis' clock (first decision to last grant), so the
// check holds however late a loaded machine starts a process: the tokens
// granted stay within burst + rate * span, and a racy store exceeds it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "testing/redis_server.h"
#include "testing/test_paths.h"

namespace tollgate::testing {
namespace {

// Runs `cmd` through the shell; its stdout, and its exit status in *status.
std::string RunShell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

// The bench's JSON line for `args` against `server` (fails the test on errors).
nlohmann::json RunOvergrant(const RedisServer& server, const std::string& args) {
  const std::string cmd = tollgate::testing::ProgramPath("TOLLGATE_CLI_PATH") +
                          " bench overgrant --redis-url " + server.url() + " " + args + " --json";
  int status = 0;
  const std::string out = RunShell(cmd, &status);
  EXPECT_EQ(status, 0) << cmd << "\n" << out;
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << cmd << "\n" << out;
  if (j.is_discarded() || !j.contains("bound") || !j.contains("span_s")) return nlohmann::json();
  EXPECT_EQ(j.at("errors"), 0) << out;
  return j;
}

constexpr double kSeconds = 2;
constexpr double kRate = 2;
constexpr int64_t kBurst = 10;

TEST(BenchOvergrant, FourProcessesOnOneRedisStayWithinTheMeasuredBound) {
  TOLLGATE_START_REDIS(server);
  const auto j =
      RunOvergrant(server, "--processes 4 --strategy lua --seconds 2 --rate 2 --burst 10");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("strategy"), "lua");
  EXPECT_EQ(j.at("processes"), 4);
  // The callers did race: they kept asking long after the bucket was empty
  // (by count, not by speed: a slow machine asks less often, not less).
  EXPECT_GT(j.at("decisions").get<int64_t>(), 10 * j.at("allowed").get<int64_t>()) << j;
  EXPECT_EQ(j.at("nominal_max").get<double>(), kBurst + kRate * kSeconds) << j;
  const double span = j.at("span_s").get<double>();
  const int64_t bound = j.at("bound").get<int64_t>();
  const int64_t allowed = j.at("allowed").get<int64_t>();
  // Each process decides for --seconds from when it is ready: a loaded machine
  // spreads their starts, so the span may exceed --seconds, within reason.
  EXPECT_GT(span, 0) << j;
  EXPECT_LE(span, 3 * kSeconds + 2) << j;
  // bound = burst + floor(span * rate) (rate 2/s: the interval is exact).
  EXPECT_EQ(bound, kBurst + static_cast<int64_t>(std::floor(span * kRate + 1e-9))) << j;
  EXPECT_GE(allowed, kBurst) << j;  // the full bucket at least
  EXPECT_LE(allowed, bound) << j;   // the store never over-grants
  EXPECT_LE(j.at("over_grant_pct").get<double>(), 0.0) << j;
}

// The same check catches a store that over-grants: multicmd (GET, decide on
// the client, SET) races, and its grants exceed the bound of its own clock.
TEST(BenchOvergrant, TheBoundCatchesARacyStore) {
  TOLLGATE_START_REDIS(server);
  const auto j = RunOvergrant(server,
                              "--processes 2 --concurrency 32 --strategy multicmd --seconds 1 "
                              "--rate 2 --burst 10");
  ASSERT_FALSE(j.is_null());
  EXPECT_GT(j.at("span_s").get<double>(), 0) << j;
  EXPECT_GT(j.at("allowed").get<int64_t>(), j.at("bound").get<int64_t>()) << j;
}

}  // namespace
}  // namespace tollgate::testing
