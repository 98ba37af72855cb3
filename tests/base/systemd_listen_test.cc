// ParseSystemdListenEnv (tollgate/systemd_listen.h): sd_listen_fds(3)'s rules
// over hostile values, as a pure function (no descriptor or variable touched).
// tests/server/restart_test.cc runs the same rules through a real tollgated
// with real descriptors.
#include "tollgate/systemd_listen.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate {
namespace {

constexpr long long kPid = 4242;

SystemdListenPlan Parse(std::optional<std::string> pid, std::optional<std::string> fds,
                        std::optional<std::string> names = std::nullopt) {
  return ParseSystemdListenEnv({std::move(pid), std::move(fds), std::move(names)}, kPid,
                               {"listen", "admin"});
}

std::string Fds(const SystemdListenPlan& plan) {
  std::string out;
  for (const auto& f : plan.fds) out += std::to_string(f.fd) + "=" + f.name + " ";
  return out;
}

TEST(SystemdListenEnv, NothingPassedWithoutListenFds) {
  SystemdListenPlan plan = Parse("4242", std::nullopt, "listen");
  EXPECT_FALSE(plan.for_this_process);
  EXPECT_TRUE(plan.fds.empty());
  EXPECT_EQ(plan.error, "");
  EXPECT_EQ(plan.ignored, "");
}

TEST(SystemdListenEnv, NamedAndUnnamedDescriptorsFromThree) {
  SystemdListenPlan plan = Parse("4242", "2", "admin:listen");
  EXPECT_TRUE(plan.for_this_process);
  EXPECT_EQ(plan.error, "");
  EXPECT_EQ(Fds(plan), "3=admin 4=listen ");
  EXPECT_EQ(plan.fds[0].Describe(), "systemd socket 3 (\"admin\")");

  // Without names: the accepted names in the order of the socket unit's lines.
  EXPECT_EQ(Fds(Parse("4242", "2")), "3=listen 4=admin ");
  EXPECT_EQ(Fds(Parse("4242", "1")), "3=listen ");
  plan = Parse("4242", "0");
  EXPECT_TRUE(plan.for_this_process);
  EXPECT_EQ(plan.error, "");
  EXPECT_TRUE(plan.fds.empty());
}

TEST(SystemdListenEnv, VariablesForAnotherProcessAreIgnored) {
  SystemdListenPlan plan = Parse("1", "1");
  EXPECT_FALSE(plan.for_this_process);
  EXPECT_EQ(plan.error, "");
  EXPECT_EQ(plan.ignored, "LISTEN_PID 1 is not this process (4242)");
  EXPECT_TRUE(plan.fds.empty());

  plan = Parse(std::nullopt, "1");
  EXPECT_EQ(plan.ignored, "LISTEN_FDS is set without LISTEN_PID");
  EXPECT_TRUE(plan.fds.empty());
}

TEST(SystemdListenEnv, HostileNumbersAreRefusedNamingTheVariable) {
  struct Case {
    std::string pid, fds, error;
  };
  for (const Case& c : std::vector<Case>{
           {"x1", "1", "LISTEN_PID: \"x1\" is not a process id"},
           {"-4242", "1", "LISTEN_PID: \"-4242\" is not a process id"},
           {" 4242", "1", "LISTEN_PID: \" 4242\" is not a process id"},
           {"99999999999999999999999", "1",
            "LISTEN_PID: \"99999999999999999999999\" is not a process id"},
           {"4242", "17", "LISTEN_FDS: \"17\" must be a number from 0 to 16"},
           {"4242", "-1", "LISTEN_FDS: \"-1\" must be a number from 0 to 16"},
           // from_chars reads "-0" as 0 (found by the systemd_listen fuzz target).
           {"4242", "-0", "LISTEN_FDS: \"-0\" must be a number from 0 to 16"},
           {"-0", "1", "LISTEN_PID: \"-0\" is not a process id"},
           {"4242", "1 ", "LISTEN_FDS: \"1 \" must be a number from 0 to 16"},
           {"4242", "", "LISTEN_FDS: \"\" must be a number from 0 to 16"},
           {"4242", "0x1", "LISTEN_FDS: \"0x1\" must be a number from 0 to 16"},
           {"4242", std::string(100, '9'),
            "LISTEN_FDS: \"" + std::string(32, '9') + "\" must be a number from 0 to 16"},
           {"4242", "1\n\x1b", "LISTEN_FDS: \"1\\x0a\\x1b\" must be a number from 0 to 16"},
       }) {
    SystemdListenPlan plan = Parse(c.pid, c.fds);
    EXPECT_EQ(plan.error, c.error) << c.pid << " " << c.fds;
    EXPECT_TRUE(plan.fds.empty()) << c.error;
  }
  // A refused count was still meant for this process: the caller unsets the variables.
  EXPECT_TRUE(Parse("4242", "17").for_this_process);
  EXPECT_FALSE(Parse("x1", "1").for_this_process);
}

TEST(SystemdListenEnv, HostileNamesAreRefusedNamingTheDescriptor) {
  struct Case {
    std::string fds, names, error;
  };
  for (const Case& c : std::vector<Case>{
           {"1", "listen:admin", "LISTEN_FDNAMES: 2 names for LISTEN_FDS=1"},
           {"2", "listen", "LISTEN_FDNAMES: 1 names for LISTEN_FDS=2"},
           {"1", std::string(100000, ':'), "LISTEN_FDNAMES: 100001 names for LISTEN_FDS=1"},
           {"1", "tollgated.socket",
            "systemd socket 3 (\"tollgated.socket\"): name it FileDescriptorName=listen or "
            "FileDescriptorName=admin"},
           {"1", "",
            "systemd socket 3 (\"\"): name it FileDescriptorName=listen or "
            "FileDescriptorName=admin"},
           {"2", "listen:listen", "systemd socket 4 (\"listen\"): the name is passed twice"},
           {"2", "listen:LISTEN",
            "systemd socket 4 (\"LISTEN\"): name it FileDescriptorName=listen or "
            "FileDescriptorName=admin"},
           {"1", "a\nb",
            "systemd socket 3 (\"a\\x0ab\"): name it FileDescriptorName=listen or "
            "FileDescriptorName=admin"},
       }) {
    SystemdListenPlan plan = Parse("4242", c.fds, c.names);
    EXPECT_EQ(plan.error, c.error) << c.names.substr(0, 40);
    EXPECT_TRUE(plan.fds.empty()) << c.error;
    EXPECT_TRUE(plan.for_this_process);
  }
  // More descriptors than names to give them in order.
  EXPECT_EQ(Parse("4242", "3").error, "LISTEN_FDS: more than 2 sockets without LISTEN_FDNAMES");
  // A long name is cut in the message.
  SystemdListenPlan plan = Parse("4242", "1", std::string(1000, 'n'));
  EXPECT_EQ(plan.error, "systemd socket 3 (\"" + std::string(64, 'n') +
                            "\"): name it FileDescriptorName=listen or FileDescriptorName=admin");
}

TEST(SystemdListenEnv, SixteenDescriptorsAtMost) {
  std::string names;
  for (int i = 0; i < 16; ++i) names += (i ? ":" : "") + std::string("listen");
  // Sixteen are counted (then refused for the repeated name, not for the count).
  EXPECT_EQ(Parse("4242", "16", names).error,
            "systemd socket 4 (\"listen\"): the name is passed twice");
  SystemdListenPlan plan = ParseSystemdListenEnv(
      {"4242", "16", std::nullopt}, kPid,
      {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"});
  EXPECT_EQ(plan.error, "");
  ASSERT_EQ(plan.fds.size(), 16u);
  EXPECT_EQ(plan.fds.back().fd, 18);
  EXPECT_EQ(plan.fds.back().name, "p");
}

}  // namespace
}  // namespace tollgate
