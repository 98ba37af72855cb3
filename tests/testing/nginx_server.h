// NginxServer: a real nginx (Debian package) for integration tests.
//
// Runs `nginx -p DIR -c DIR/nginx.conf -g 'daemon off;'` as a child process
// in a fresh temp directory, with every path (pid, logs, temp files) inside
// DIR, so no root and no system path is touched. The caller supplies what goes
// inside `http { }`; the fixture wraps it with worker/pid/log/temp settings
// and waits (bounded) until nginx accepts connections on `port`.
//
// Usage in a GoogleTest:
//   int port = tollgate::testing::NginxServer::FreePort();
//   auto nginx = tollgate::testing::NginxServer::Start(http_block, port);
//   if (nginx.missing) GTEST_SKIP() << nginx.error;
//   ASSERT_TRUE(nginx) << nginx.error;
//
// Thread safety: not thread safe; drive it from the test thread.
// Ownership: owns the child and the directory; the destructor stops nginx
// (SIGQUIT, then SIGKILL after a bounded wait) and removes the directory.
// Errors: Start reports failures as text (including nginx's error log).
#ifndef TOLLGATE_TESTS_TESTING_NGINX_SERVER_H_
#define TOLLGATE_TESTS_TESTING_NGINX_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "testing/scoped_temp_dir.h"

namespace tollgate::testing {

class NginxServer {
 public:
  struct StartResult {
    std::unique_ptr<NginxServer> server;
    std::string error;
    bool missing = false;  // nginx is not installed
    explicit operator bool() const { return server != nullptr; }
    NginxServer* operator->() const { return server.get(); }
  };

  // `http_block` goes inside http { }; it must listen on 127.0.0.1:`port`
  // within `deadline` (scaled, testing/timing.h).
  static StartResult Start(const std::string& http_block, int port,
                           std::chrono::milliseconds deadline = std::chrono::seconds(10));
  static std::string BinaryPath();  // "" when not installed
  // A free loopback TCP port (bind to port 0, read it back, close).
  static int FreePort();

  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_.path(); }
  std::string ErrorLog() const;  // contents of DIR/logs/error.log
  void Stop();

 private:
  NginxServer(int port, ScopedTempDir dir) : port_(port), dir_(std::move(dir)) {}
  int port_;
  ScopedTempDir dir_;  // config, logs, temp files; removed after the process is gone
  pid_t pid_ = -1;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_NGINX_SERVER_H_
