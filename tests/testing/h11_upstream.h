// H11Upstream: a strict, independent HTTP/1.1 upstream for gateway tests.
//
// Runs tests/testing/h11_upstream.py (Python's h11, Debian python3-h11, under
// /usr/bin/python3) as a child process on a free loopback port. The script
// logs every connection open/close, every complete request it parsed and
// every protocol error to a JSON-lines file; Events() reads them back. A
// request the gateway forwards must arrive here as exactly one message: h11
// shares no code with Beast, so a framing disagreement shows up as a second
// message or an error.
//
// Usage in a GoogleTest:
//   auto up = tollgate::testing::H11Upstream::Start();
//   if (up.missing) GTEST_SKIP() << up.error;
//   ASSERT_TRUE(up) << up.error;
//
// Thread safety: not thread safe; drive it from the test thread.
// Ownership: owns the child and its temp directory; the destructor kills the
// child (SIGKILL; it holds no state) and removes the directory.
// Errors: Start reports failures as text.
#ifndef TOLLGATE_TESTS_TESTING_H11_UPSTREAM_H_
#define TOLLGATE_TESTS_TESTING_H11_UPSTREAM_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "testing/scoped_temp_dir.h"

namespace tollgate::testing {

class H11Upstream {
 public:
  struct StartResult {
    std::unique_ptr<H11Upstream> server;
    std::string error;
    bool missing = false;  // /usr/bin/python3 or its h11 module is not installed
    explicit operator bool() const { return server != nullptr; }
    H11Upstream* operator->() const { return server.get(); }
  };

  struct Event {
    std::string kind;  // "open", "message", "error", "close", "endless"
    int conn = 0;
    std::string method, target, body, detail;
    std::vector<std::pair<std::string, std::string>> headers;  // names as sent
    // The value of every field named `lower_name` (h11 lower-cases names).
    std::vector<std::string> Values(const std::string& lower_name) const;
  };

  // Waits (bounded by `deadline`, scaled) until the child prints its port.
  static StartResult Start(std::chrono::milliseconds deadline = std::chrono::seconds(10));

  ~H11Upstream();
  H11Upstream(const H11Upstream&) = delete;
  H11Upstream& operator=(const H11Upstream&) = delete;

  int port() const { return port_; }
  // Every event logged so far, in order.
  std::vector<Event> Events() const;
  // True when every connection it accepted has been closed again.
  bool Quiet() const;

 private:
  explicit H11Upstream(ScopedTempDir dir) : dir_(std::move(dir)) {}
  ScopedTempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_H11_UPSTREAM_H_
