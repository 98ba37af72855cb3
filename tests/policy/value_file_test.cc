// Issue 29, finding 4: a policy's value files and tenant tables are read only
// from inside its directory. Every escape (an absolute path elsewhere, "..",
// a symbolic link to a file or a directory, /proc/self/environ, a FIFO, an
// oversized file) is refused with an error that names the file and never holds
// its bytes; a bad line is reported by number, not quoted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "policy/value_file.h"
#include "testing/scoped_temp_dir.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

using testing::ScopedTempDir;

constexpr char kSecret[] = "s3cret-sauce-8d1f";

void WriteValueFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string AllErrors(const ParsedPolicy& p) {
  std::string out;
  for (const ConfigError& e : p.errors) out += e.ToString() + "\n";
  return out;
}

std::string CidrRule(const std::string& file) {
  return R"({"rules": [{"name": "r", "limit_keys": ["ip:address"],
      "algorithm_config": {"rps": 1, "burst": 1},
      "match": {"cidr": {"file": ")" +
         file + R"("}}}]})";
}

std::string TenantRule(const std::string& file) {
  return R"({"rules": [{"name": "r", "limit_keys": ["header:x-api-key"],
      "algorithm_config": {"rps": 1, "burst": 1}, "tenants": {"file": ")" +
         file + R"("}}]})";
}

class ValueFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkdir(policy_dir_.c_str(), 0700), 0);
    // Outside the policy's directory: a secret a policy must not read.
    WriteValueFile(outside_.File("secret.txt"), std::string(kSecret) + "\n");
    WriteValueFile(outside_.File("secret.csv"), std::string("identity,count,period\n") + kSecret +
                                                    ",x,1h\n" + kSecret + ",1,1h\n");
    WriteValueFile(policy_dir_ + "/nets.txt", "10.0.0.0/8\n");
  }

  ParsedPolicy Parse(const std::string& json) {
    return ParsePolicy(json, PolicyParseOptions{.base_dir = policy_dir_});
  }

  // The file is refused, named, and none of the secret shows.
  void ExpectRefused(const std::string& file, const std::string& why) {
    for (const std::string& json : {CidrRule(file), TenantRule(file)}) {
      const ParsedPolicy p = Parse(json);
      const std::string errors = AllErrors(p);
      EXPECT_EQ(p.policy, nullptr) << file;
      EXPECT_NE(errors.find("cannot read " + file + ": " + why), std::string::npos)
          << file << " -> " << errors;
      EXPECT_EQ(errors.find(kSecret), std::string::npos) << file << " -> " << errors;
      EXPECT_EQ(errors.find("TOLLGATE_VALUE_FILE_TEST"), std::string::npos) << errors;
    }
  }

  ScopedTempDir outside_;
  const std::string policy_dir_ = outside_.File("policy");
};

TEST_F(ValueFiles, FilesBesideThePolicyAreRead) {
  ASSERT_EQ(::mkdir((policy_dir_ + "/lists").c_str(), 0700), 0);
  WriteValueFile(policy_dir_ + "/lists/more.txt", "192.0.2.0/24\n");
  for (const std::string& file :
       {std::string("nets.txt"), std::string("lists/more.txt"), policy_dir_ + "/nets.txt"}) {
    const ParsedPolicy p = Parse(CidrRule(file));
    EXPECT_NE(p.policy, nullptr) << file << " -> " << AllErrors(p);
  }
}

TEST_F(ValueFiles, AnAbsolutePathElsewhereIsRefused) {
  ExpectRefused(outside_.File("secret.txt"), "is outside the policy's directory");
  ExpectRefused("/etc/passwd", "is outside the policy's directory");
}

TEST_F(ValueFiles, DotDotIsRefused) {
  ExpectRefused("../secret.txt", "must be a relative path below the policy's directory");
  ExpectRefused("../secret.csv", "must be a relative path below the policy's directory");
  ExpectRefused(policy_dir_ + "/../secret.txt", "must be a relative path");
}

TEST_F(ValueFiles, SymbolicLinksAreNotFollowed) {
  ASSERT_EQ(::symlink(outside_.File("secret.txt").c_str(), (policy_dir_ + "/link.txt").c_str()), 0);
  ASSERT_EQ(::symlink(outside_.path().c_str(), (policy_dir_ + "/up").c_str()), 0);
  ASSERT_EQ(::symlink("/proc/self", (policy_dir_ + "/self").c_str()), 0);
  ExpectRefused("link.txt", "is a symbolic link (not followed)");
  ExpectRefused("up/secret.txt", "a directory on its path is a symbolic link");
  ExpectRefused("self/environ", "a directory on its path is a symbolic link");
}

TEST_F(ValueFiles, ProcAndSysAreNeverRead) {
  ASSERT_EQ(::setenv("TOLLGATE_VALUE_FILE_TEST", kSecret, 1), 0);
  ExpectRefused("/proc/self/environ", "is outside the policy's directory");
  ExpectRefused("/proc/self/cmdline", "is outside the policy's directory");
  // A policy directory under /proc is refused whatever the name.
  std::string text, why;
  EXPECT_FALSE(ReadConfinedFile("/proc/self", "environ", &text, &why));
  EXPECT_NE(why.find("is under /proc or /sys"), std::string::npos) << why;
  EXPECT_TRUE(text.empty());
  EXPECT_FALSE(ReadConfinedFile("/sys", "kernel/hostname", &text, &why));
  EXPECT_NE(why.find("is under /proc or /sys"), std::string::npos) << why;
}

TEST_F(ValueFiles, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((policy_dir_ + "/pipe.txt").c_str(), 0600), 0);
  ExpectRefused("pipe.txt", "is not a regular file");
  ASSERT_EQ(::mkdir((policy_dir_ + "/adir").c_str(), 0700), 0);
  ExpectRefused("adir", "is not a regular file");
}

TEST_F(ValueFiles, AnOversizedFileIsRefused) {
  // Sparse: 64 MiB + 1 byte of size, no disk.
  const std::string big = policy_dir_ + "/big.txt";
  const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, (off_t{64} << 20) + 1), 0);
  ::close(fd);
  ExpectRefused("big.txt", "is larger than 64 MiB");
}

TEST_F(ValueFiles, BadLinesAreNamedByNumberNotQuoted) {
  WriteValueFile(policy_dir_ + "/bad.txt", std::string("10.0.0.0/8\n") + kSecret + "\n");
  WriteValueFile(policy_dir_ + "/bad.csv", std::string("identity,") + kSecret + "\n");
  WriteValueFile(policy_dir_ + "/rows.csv", std::string("identity,count,period\n") + kSecret + "," +
                                                kSecret + ",1h\n" + "a," + "1," + kSecret +
                                                "\nb,1,1h\nb,2,1h\n");
  struct Case {
    std::string json, error;
  } cases[] = {
      {CidrRule("bad.txt"), "bad.txt line 2: not a CIDR or IP address"},
      {TenantRule("bad.csv"), "bad.csv line 1: header: unknown column 2"},
      {TenantRule("rows.csv"), "rows.csv line 2: count must be a whole number"},
      {TenantRule("rows.csv"), "rows.csv line 3: period: must be a period"},
      {TenantRule("rows.csv"), "rows.csv line 5: duplicate identity"},
  };
  for (const Case& c : cases) {
    const std::string errors = AllErrors(Parse(c.json));
    EXPECT_NE(errors.find(c.error), std::string::npos) << c.error << " -> " << errors;
    EXPECT_EQ(errors.find(kSecret), std::string::npos) << errors;
  }
}

}  // namespace
}  // namespace tollgate
