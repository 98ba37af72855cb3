// `tollgate bench overgrant` end to end: the built CLI against a real
// redis-server, 4 processes on one key, the lua strategy. Whatever the
// processes race, the tokens granted stay within burst + rate * seconds.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "testing/redis_server.h"

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

TEST(BenchOvergrant, FourProcessesOnOneRedisNeverOverGrant) {
  TOLLGATE_START_REDIS(server);
  // Rate 2/s: a process that starts its run up to 500 ms after the others
  // still cannot see a token the theoretical maximum does not count.
  const std::string cmd = std::string(TOLLGATE_CLI_PATH) + " bench overgrant --redis-url " +
                          server.url() +
                          " --processes 4 --strategy lua --seconds 2 --rate 2 --burst 10 --json";
  int status = 0;
  const std::string out = RunShell(cmd, &status);
  ASSERT_EQ(status, 0) << cmd << "\n" << out;
  const auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j.at("strategy"), "lua");
  EXPECT_EQ(j.at("processes"), 4);
  EXPECT_EQ(j.at("errors"), 0) << out;
  EXPECT_GT(j.at("decisions").get<int64_t>(), 1000) << out;  // the callers did race
  const int64_t allowed = j.at("allowed").get<int64_t>();
  const double theoretical = j.at("theoretical_max").get<double>();
  EXPECT_EQ(theoretical, 14.0) << out;
  EXPECT_LE(static_cast<double>(allowed), theoretical) << out;
  EXPECT_LE(j.at("over_grant_pct").get<double>(), 0.0) << out;  // <= 0: no over-grant
  EXPECT_GE(allowed, 12) << out;                                // burst + the refills of a full run
}

}  // namespace
}  // namespace tollgate::testing
