// Internal: the I/O side of tollgated's threads and connections.
//
// Worker is one I/O thread: its io_context, the connections it owns (for
// timeouts and drain), its idle upstream connections. Everything in a Worker
// is touched only from that worker's thread. What requests are handled with
// is not here: it is a Runtime snapshot (server/runtime.h).
#ifndef TOLLGATE_SERVER_CONTEXT_H_
#define TOLLGATE_SERVER_CONTEXT_H_

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <ctime>
#include <memory>
#include <utility>
#include <vector>

#include "server/proxy_wire.h"
#include "server/runtime.h"
#include "tollgate/clock.h"

namespace tollgate::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct TlsStream;  // server/tls_listener.h
// Destroys a TlsStream where its type is complete (server/tls_listener.cc).
struct TlsStreamDelete {
  void operator()(TlsStream* stream) const;
};

// A socket with a deadline, linked into its worker's list so the sweeper can
// close it when the deadline passes (cheaper than a timer per operation).
// Deadlines are on `clock`'s monotonic time (the server's clock).
struct Connection {
  Connection(tcp::socket s, const Clock& c) : socket(std::move(s)), clock(c) {}
  tcp::socket socket;
  const Clock& clock;
  int64_t deadline_ns = 0;  // 0: none
  bool idle = false;        // between requests: may be closed at once on drain
  bool timed_out = false;   // closed by the sweeper
  bool upstream = false;    // an upstream connection of the gateway
  // The TLS stream over `socket`, or null (plain): a client's (owned by its
  // session; the gateway writes a TLS client's answers through it), or an
  // upstream connection's to an https:// upstream (owned by `upstream_tls`).
  TlsStream* tls = nullptr;
  // An https:// upstream connection's TLS stream (declared after `socket`: it
  // goes first); null for clients and plain upstreams.
  std::unique_ptr<TlsStream, TlsStreamDelete> upstream_tls;
  Connection* prev = nullptr;
  Connection* next = nullptr;

  void SetDeadline(std::chrono::nanoseconds d) { deadline_ns = clock.Now() + d.count(); }
  void ClearDeadline() { deadline_ns = 0; }
};

// Starts `op` on what a connection (a client's, or the gateway's to its
// upstream) reads and writes through: its TLS stream when it has one, else its
// socket. `op` takes the stream (auto&) and returns the same awaitable type
// for both; the caller includes server/tls_listener.h. The one place a front
// end picks a connection's stream: a plain connection pays one predictable
// branch on a pointer it already holds, no allocation.
template <class Op>
auto OnStream(Connection& conn, Op&& op) {
  if (conn.tls != nullptr) return op(*conn.tls);
  return op(conn.socket);
}
template <class Op>
auto OnClientStream(Connection& conn, Op&& op) {
  return OnStream(conn, std::forward<Op>(op));
}

struct Worker {
  Worker(size_t i, const Clock& c) : index(i), clock(c), ioc(1), sweep_timer(ioc) {}
  size_t index;
  const Clock& clock;  // the server's: deadlines, the Date header
  net::io_context ioc;
  net::steady_timer sweep_timer;
  Connection* connections = nullptr;  // intrusive list head
  size_t connection_count = 0;
  std::vector<std::unique_ptr<Connection>> idle_upstream;    // keep-alive pool
  std::vector<std::unique_ptr<RelayScratch>> relay_scratch;  // gateway buffers, reused
  // Cached IMF-fixdate for the Date header.
  std::time_t date_second = 0;
  char date[40] = {0};

  void Link(Connection* c) {
    c->next = connections;
    if (connections) connections->prev = c;
    connections = c;
    ++connection_count;
  }
  void Unlink(Connection* c) {
    if (c->prev) c->prev->next = c->next;
    if (c->next) c->next->prev = c->prev;
    if (connections == c) connections = c->next;
    c->prev = c->next = nullptr;
    --connection_count;
  }
  const char* Date();
};

// Links a connection into its worker for the lifetime of this object.
class ConnectionGuard {
 public:
  ConnectionGuard(Worker& w, Connection& c) : w_(w), c_(c) { w_.Link(&c_); }
  ~ConnectionGuard() { w_.Unlink(&c_); }
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

 private:
  Worker& w_;
  Connection& c_;
};

// Writes the interim "100 Continue" (RFC 9110 15.2.1) for a request that
// expects it, before its body is read; the caller sets the deadline.
net::awaitable<boost::system::error_code> WriteContinue(Connection& conn);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_CONTEXT_H_
