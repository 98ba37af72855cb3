// CaddyServer: a real Caddy (Debian package) for integration tests.
//
// Runs `caddy run --config CONFIG --adapter caddyfile` as a child process in
// the config's own folder, with the given environment variables added and its
// data and config directories (XDG_*) in a fresh temp directory, and waits
// (bounded) until it accepts connections on `port`. Its output goes to a
// file in that directory (Output()).
//
// Usage in a GoogleTest:
//   int port = tollgate::testing::NginxServer::FreePort();
//   auto caddy = CaddyServer::Start(dir + "/Caddyfile", {{"CADDY_PORT", ...}}, port);
//   if (caddy.missing) GTEST_SKIP() << caddy.error;
//   ASSERT_TRUE(caddy) << caddy.error;
//
// Thread safety: not thread safe; drive it from the test thread.
// Ownership: owns the child and the directory; the destructor stops Caddy
// (SIGTERM, then SIGKILL after a bounded wait) and removes the directory.
// Errors: Start reports failures as text (including Caddy's output).
#ifndef TOLLGATE_TESTS_TESTING_CADDY_SERVER_H_
#define TOLLGATE_TESTS_TESTING_CADDY_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "testing/scoped_temp_dir.h"

namespace tollgate::testing {

class CaddyServer {
 public:
  struct StartResult {
    std::unique_ptr<CaddyServer> server;
    std::string error;
    bool missing = false;  // caddy is not installed
    explicit operator bool() const { return server != nullptr; }
    CaddyServer* operator->() const { return server.get(); }
  };
  using Env = std::vector<std::pair<std::string, std::string>>;

  // `config` is a path; `env` is added to this process's environment.
  static StartResult Start(const std::string& config, const Env& env, int port,
                           std::chrono::milliseconds deadline = std::chrono::seconds(10));
  static std::string BinaryPath();  // "" when not installed

  ~CaddyServer();
  CaddyServer(const CaddyServer&) = delete;
  CaddyServer& operator=(const CaddyServer&) = delete;

  int port() const { return port_; }
  std::string Output() const;  // what Caddy wrote to stdout and stderr
  void Stop();

 private:
  CaddyServer(int port, ScopedTempDir dir) : port_(port), dir_(std::move(dir)) {}
  int port_;
  ScopedTempDir dir_;
  pid_t pid_ = -1;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_CADDY_SERVER_H_
