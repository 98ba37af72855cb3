// Internal: the state shared by tollgated's listeners, sessions and handlers.
//
// Shared is built once by Server::Create and is read-only afterwards except
// for its atomics and the thread-safe objects it points to. Worker is one I/O
// thread: its io_context, the connections it owns (for timeouts and drain),
// its idle upstream connections and its metrics shard. Everything in a Worker
// is touched only from that worker's thread.
#ifndef TOLLGATE_SERVER_CONTEXT_H_
#define TOLLGATE_SERVER_CONTEXT_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "server/config.h"
#include "server/connection_limits.h"
#include "server/grpc_frontend.h"
#include "server/identities.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/proxy_wire.h"
#include "server/route.h"
#include "server/store_factory.h"
#include "server/top_rejected.h"
#include "tollgate/policy.h"

namespace tollgate::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A socket with a deadline, linked into its worker's list so the sweeper can
// close it when the deadline passes (cheaper than a timer per operation).
struct Connection {
  explicit Connection(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;
  int64_t deadline_ns = 0;  // 0: none
  bool idle = false;        // between requests: may be closed at once on drain
  bool timed_out = false;   // closed by the sweeper
  bool upstream = false;    // an upstream connection of the gateway
  Connection* prev = nullptr;
  Connection* next = nullptr;

  void SetDeadline(std::chrono::nanoseconds d) { deadline_ns = SteadyNowNs() + d.count(); }
  void ClearDeadline() { deadline_ns = 0; }
};

struct Worker {
  explicit Worker(size_t i) : index(i), ioc(1), sweep_timer(ioc) {}
  size_t index;
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

struct Shared {
  ServerConfig config;
  std::shared_ptr<Logger> log;
  const Clock* clock = &SystemClock::Instance();
  std::shared_ptr<PolicyStore> policies;
  StoreBundle store;
  std::unique_ptr<Enforcer> enforcer;
  bool async_store = false;  // use CheckAsync (remote stores)
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<TopRejected> top;
  std::unique_ptr<RejectionGate> reject_gate;
  std::unique_ptr<RejectionGate> upstream_error_gate;  // gateway failures: every one, N a second
  bool gateway = false;
  Exposure exposure;  // what the main listener serves (server/route.h)
  std::unique_ptr<ConnectionLimits> connection_limits;
  UpstreamUrl upstream;
  std::vector<tcp::endpoint> upstream_endpoints;  // resolved at startup
  std::atomic<bool> draining{false};
  std::atomic<int64_t> drain_deadline_ns{0};  // set when draining starts; 0 forces
  std::atomic<uint64_t> reloads_ok{0};
  std::atomic<uint64_t> reloads_failed{0};
  IdentityRedactor identities;         // how keys and addresses are shown (top, explain, logs)
  std::string bearer;                  // "Bearer <token>" or ""
  std::unique_ptr<GrpcFrontend> grpc;  // Envoy RLS, when grpc_listen is set
  int64_t start_wall_ns = 0;

  // Runs a reload (admin, SIGHUP, file change) and logs and counts it.
  std::vector<ConfigError> Reload(std::string_view trigger);
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_CONTEXT_H_
