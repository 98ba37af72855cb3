// Test helpers: a blocking HTTP/1.1 client over real sockets, and a tiny
// upstream server (Beast, thread per connection) for gateway and nginx tests.
//
// Every socket has a receive/send timeout, so a broken server fails a test
// instead of hanging it; timeouts and waits are scaled for a loaded machine
// (testing/timing.h). Not for production use.
#ifndef TOLLGATE_TESTS_SERVER_TEST_HTTP_H_
#define TOLLGATE_TESTS_SERVER_TEST_HTTP_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/timing.h"  // WaitFor, Scaled

namespace tollgate::testing {

struct HttpResponse {
  bool ok = false;    // a complete response was read
  std::string error;  // why not
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; repeated fields joined by ", "
  std::string body;
  bool keep_alive = false;
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
  bool Has(const std::string& lower_name) const { return headers.count(lower_name) > 0; }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// One keep-alive connection; `timeout` (scaled) bounds connect, each send and each read.
class HttpConnection {
 public:
  explicit HttpConnection(int port, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // From the loopback address `source_ip` (e.g. "127.0.0.2": another peer for the server).
  HttpConnection(int port, const std::string& source_ip,
                 std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~HttpConnection();
  bool connected() const { return fd_ >= 0; }

  // Sends Host: localhost unless `headers` has a Host field, and Content-Length
  // for a body (and for every POST and PUT) unless `headers` frames it.
  HttpResponse Request(const std::string& method, const std::string& target,
                       const Headers& headers = {}, const std::string& body = "");
  // Raw bytes; returns false if the send failed.
  bool SendRaw(const std::string& bytes);
  // Reads one response (after SendRaw).
  HttpResponse ReadResponse(bool head = false);
  // Reads until at least `n` bytes of the next response are buffered (EOF or
  // timeout stop earlier); returns them without consuming: ReadResponse still
  // parses the whole response afterwards.
  std::string ReadAtLeast(size_t n);
  // True when the server closed the connection (reads EOF within `within`, scaled).
  bool WaitClosed(std::chrono::milliseconds within);
  void Close();

 private:
  int fd_ = -1;
  std::string buffer_;
};

// A blocking TCP socket connected to 127.0.0.1:port with `timeout` on each
// send and receive (not scaled), or -1. `source_ip`: the local address to
// bind first (any 127.0.0.0/8 address works on Linux), null for the kernel's.
int ConnectLoopback(int port, std::chrono::milliseconds timeout, const char* source_ip = nullptr);

// One request on a fresh connection.
HttpResponse Fetch(int port, const std::string& method, const std::string& target,
                   const Headers& headers = {}, const std::string& body = "");

// A small upstream: GET/POST anything -> 200 JSON describing what it received.
//   /slow?ms=N      answer after N ms (at once when the upstream is destroyed)
//   /chunked        a chunked response ("part0".."part4")
//   /status?code=N  answer with status N
//   /close          answer with Connection: close
//   /bytes?n=N      N bytes of PatternBytes with Content-Length, plus hop-by-hop
//                   fields (Connection: X-Up-Hop, X-Up-Hop) and a RateLimit field
//   /truncate?n=N   Content-Length N, then N/2 bytes, then the connection closes
//   /hold?n=N       Content-Length N, N/2 bytes, then waits for ReleaseHeld()
//                   (or 10 s), then the rest
//   /drop           answer (keep-alive), then close the connection at once
//   /bighead?n=N    200 "ok" with an N-byte X-Pad field in its head (&dup=1: and
//                   a second Content-Length before it)
class TestUpstream {
 public:
  TestUpstream();  // listens on 127.0.0.1, a free port
  ~TestUpstream();
  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  // Lets one /hold response send its second half.
  void ReleaseHeld();
  // /gate: the request counts as in flight here until the gate is open, then
  // is answered like any path (the count drops before the answer is sent).
  void SetGateOpen(bool open);
  int in_flight() const;
  int peak_in_flight() const;
  void ResetPeak();
  // Waits (bounded by `deadline`) until exactly `n` requests wait at the gate.
  bool WaitInFlight(int n, std::chrono::milliseconds deadline) const;

 private:
  void AcceptLoop();
  void Serve(int fd, int id);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  int holds_released_ = 0;
  mutable std::mutex gate_mu_;
  mutable std::condition_variable gate_cv_;
  bool gate_open_ = true;  // guarded by gate_mu_, as the two counts
  int in_flight_ = 0;
  int peak_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::vector<int> fds_;
};

// `n` bytes of a fixed pattern covering every byte value (NUL, CR, LF included).
std::string PatternBytes(size_t n);

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_SERVER_TEST_HTTP_H_
