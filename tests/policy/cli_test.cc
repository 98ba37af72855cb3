// `tollgate check-config` and `tollgate explain` as a user runs them: exit
// codes and one error a line. Skipped when the CLI is not built (TSan builds).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "policy_test_util.h"
#include "testing/scoped_temp_dir.h"

namespace tollgate {
namespace {

std::string Cli() {
  const char* dir = std::getenv("TOLLGATE_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/tools/tollgate";
}

// Runs `tollgate <args>`; returns the exit status and fills *out with stdout.
int RunCli(const std::string& args, std::string* out) {
  FILE* p = popen((Cli() + " " + args + " 2>/dev/null").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(Cli()).good()) GTEST_SKIP() << "tollgate CLI not built";
  }
};

TEST_F(CliTest, CheckConfigValidExitsZero) {
  std::string out;
  EXPECT_EQ(RunCli("check-config " + testing::SourcePath("examples/policy.json"), &out), 0);
  EXPECT_NE(out.find("ok (4 rules)"), std::string::npos) << out;
}

// A rule that can never apply is a warning, one line with its path: the file
// stays valid (exit 0) unless --strict.
TEST_F(CliTest, CheckConfigWarnsOfARuleThatNeverApplies) {
  const testing::ScopedTempDir dir;
  const std::string file = dir.File("policy.json");
  std::ofstream(file) << R"({"rules": [
    {"name": "burst", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "daily", "limit_keys": ["header:x-api-key"], "algorithm_config": {"count": 1000, "period": "1d"}}]})";
  std::string out;
  EXPECT_EQ(RunCli("check-config " + file, &out), 0);
  EXPECT_NE(out.find("warning: rules[1]: never applies: rules[0] (\"burst\")"), std::string::npos)
      << out;
  EXPECT_NE(out.find("ok (2 rules)"), std::string::npos) << out;
  std::string strict;
  EXPECT_EQ(RunCli("check-config --strict " + file, &strict), 2);
  EXPECT_NE(strict.find("warning: rules[1]"), std::string::npos) << strict;
  EXPECT_EQ(strict.find("ok ("), std::string::npos) << strict;
}

TEST_F(CliTest, PolicyDiffPrintsOneLineARuleChange) {
  const testing::ScopedTempDir dir;
  const std::string before = dir.File("old.json"), after = dir.File("new.json");
  std::ofstream(before) << R"({"rules": [
    {"name": "a", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "gone", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 1}}]})";
  std::ofstream(after) << R"({"rules": [
    {"name": "a", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 10, "burst": 20}}]})";
  std::string out;
  EXPECT_EQ(RunCli("policy diff " + before + " " + after, &out), 0);
  EXPECT_NE(out.find("raised  a: "), std::string::npos) << out;
  EXPECT_NE(out.find("removed gone: "), std::string::npos) << out;
  std::string same;
  EXPECT_EQ(RunCli("policy diff " + before + " " + before, &same), 0);
  EXPECT_EQ(same, "no changes\n");
  std::string bad;
  std::ofstream(dir.File("bad.json")) << "{";
  EXPECT_EQ(RunCli("policy diff " + before + " " + dir.File("bad.json"), &bad), 1);
  EXPECT_EQ(RunCli("policy diff " + before, &bad), 2);
}

TEST_F(CliTest, CheckConfigInvalidPrintsEveryErrorOneALineAndExitsTwo) {
  const testing::ScopedTempDir dir;
  const std::string path = dir.File("bad.json");
  std::ofstream(path) << R"({"rules": [
    {"name": "a", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "b", "limit_keys": ["ip"], "algorithm_config": {"tokens_per_second": 100, "burst": 50}},
    {"name": "c d", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1}}]})";
  std::string out;
  EXPECT_EQ(RunCli("check-config " + path, &out), 2);
  EXPECT_EQ(out,
            "rules[1].algorithm_config.burst: must be >= tokens_per_second (100)\n"
            "rules[2].name: must be 1 to 64 characters of A-Z a-z 0-9 - _ . :\n");
  std::string missing;
  EXPECT_EQ(RunCli("check-config /nonexistent.json", &missing), 2);
  std::string usage;
  EXPECT_EQ(RunCli("check-config", &usage), 2);
}

TEST_F(CliTest, ExplainShowsRulesAndTheRejection) {
  std::string out;
  ASSERT_EQ(RunCli("explain --policy " + testing::SourcePath("examples/policy.json") +
                       " --method GET --path /api/items --header 'x-api-key: k1' --ip 1.2.3.4"
                       " --repeat 11",
                   &out),
            0);
  EXPECT_NE(out.find("global-rps: applies, key 1.2.3.4, cost 1"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: reject (HTTP 429)"), std::string::npos) << out;
  EXPECT_NE(out.find("Retry-After: "), std::string::npos) << out;
  std::string bad;
  EXPECT_EQ(RunCli("explain --nope", &bad), 2);
}

// Issue 29: the example policy keys an IPv6 client by its /64, and explain says so.
TEST_F(CliTest, ExplainShowsTheIpv6PrefixKey) {
  std::string out;
  ASSERT_EQ(RunCli("explain --policy " + testing::SourcePath("examples/policy.json") +
                       " --ip 2001:db8:1:2::7",
                   &out),
            0);
  EXPECT_NE(out.find("global-rps: applies, key 2001:db8:1:2::/64, cost 1"), std::string::npos)
      << out;
}

// Issue 18: explain on a request from an allow-listed CIDR shows it exempt and
// the rules it skipped; from the deny list, the 403.
TEST_F(CliTest, ExplainShowsExemptionsAndDenials) {
  const std::string policy = testing::SourcePath("examples/policies/exemptions.json");
  std::string out;
  ASSERT_EQ(RunCli("explain --policy " + policy + " --ip 10.1.2.3", &out), 0);
  EXPECT_NE(out.find("denylist: no match"), std::string::npos) << out;
  EXPECT_NE(out.find("office-and-vpn: matches, key \\missing, action allow: exempt"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("per-ip: not evaluated (allow rule 'office-and-vpn' matched first)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("next decision would be: allow (HTTP 200)"), std::string::npos) << out;
  std::string denied;
  ASSERT_EQ(RunCli("explain --policy " + policy + " --ip 192.0.2.9", &denied), 0);
  EXPECT_NE(denied.find("denylist: matches, key \\missing, action deny: refused (403)"),
            std::string::npos)
      << denied;
  EXPECT_NE(denied.find("next decision would be: reject (HTTP 403)"), std::string::npos) << denied;
}

}  // namespace
}  // namespace tollgate
