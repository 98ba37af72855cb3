// HaproxyServer: a real HAProxy (Debian package) for integration tests.
//
// Runs `haproxy -f CONFIG -db` as a child process in the config's own folder
// (relative paths in the config, such as an SPOE config file, resolve there,
// as they do when an operator runs the shipped example from its folder),
// with the given environment variables added, and waits (bounded) until it
// accepts connections on `port`. Its output goes to a file in a fresh temp
// directory (Output()).
//
// Usage in a GoogleTest:
//   int port = tollgate::testing::NginxServer::FreePort();
//   auto haproxy = HaproxyServer::Start(dir + "/haproxy.cfg", {{"HAPROXY_BIND", ...}}, port);
//   if (haproxy.missing) GTEST_SKIP() << haproxy.error;
//   ASSERT_TRUE(haproxy) << haproxy.error;
//
// Thread safety: not thread safe; drive it from the test thread.
// Ownership: owns the child and the directory; the destructor stops HAProxy
// (SIGTERM, then SIGKILL after a bounded wait) and removes the directory.
// Errors: Start reports failures as text (including HAProxy's output).
#ifndef TOLLGATE_TESTS_TESTING_HAPROXY_SERVER_H_
#define TOLLGATE_TESTS_TESTING_HAPROXY_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "testing/scoped_temp_dir.h"

namespace tollgate::testing {

class HaproxyServer {
 public:
  struct StartResult {
    std::unique_ptr<HaproxyServer> server;
    std::string error;
    bool missing = false;  // haproxy is not installed
    explicit operator bool() const { return server != nullptr; }
    HaproxyServer* operator->() const { return server.get(); }
  };
  using Env = std::vector<std::pair<std::string, std::string>>;

  // `config` is a path; `env` is added to this process's environment.
  static StartResult Start(const std::string& config, const Env& env, int port,
                           std::chrono::milliseconds deadline = std::chrono::seconds(10));
  static std::string BinaryPath();  // "" when not installed

  ~HaproxyServer();
  HaproxyServer(const HaproxyServer&) = delete;
  HaproxyServer& operator=(const HaproxyServer&) = delete;

  int port() const { return port_; }
  std::string Output() const;  // what HAProxy wrote to stdout and stderr
  void Stop();

 private:
  HaproxyServer(int port, ScopedTempDir dir) : port_(port), dir_(std::move(dir)) {}
  int port_;
  ScopedTempDir dir_;
  pid_t pid_ = -1;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_HAPROXY_SERVER_H_
