// Internal: what tollgated handles a request with, as one immutable snapshot.
//
// A Runtime is built by Server::Create from the ServerConfig and the objects
// the config asks for (the engine, tollgate::Runtime of tollgate/runtime.h:
// policy, store, Enforcer, fleet; the Envoy RLS front end). It holds no
// policy of its own: the policy, the Enforcer's view of it and the Envoy
// configuration are the engine's, published by the engine's ONE swap on a
// reload (Runtime::view(), PolicyStore), so HTTP and Envoy never decide with
// different generations. What a reload changes here is the server's own: the
// admin tokens read again (RuntimeHolder::Swap, from the engine's
// on_reloaded, under its reload lock). A session refreshes its snapshot before each
// request and keeps it for that request. Handlers
// (server/endpoints.h) take a request and a `const Runtime&` and return a response; they never see
// sockets or the server's own bookkeeping.
//
// What is immutable: every field of a Runtime once it is published. What is
// shared: the objects it points to (the engine, metrics, the
// /v1/top sketch, the log gates, ServerState) are thread-safe and owned by the
// server, which outlives every session and so every snapshot in use.
//
// Thread safety: RuntimeHolder::Refresh/Load/Swap may be called from any thread.
#ifndef TOLLGATE_SERVER_RUNTIME_H_
#define TOLLGATE_SERVER_RUNTIME_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/config.h"
#include "server/grpc_frontend.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/proxy_wire.h"
#include "server/route.h"
#include "server/secrets.h"
#include "server/tracing.h"
#include "tollgate/clock.h"
#include "tollgate/identity_redactor.h"
#include "tollgate/policy.h"
#include "tollgate/rollback_fleet.h"
#include "tollgate/runtime.h"
#include "tollgate/top_rejected.h"

namespace tollgate::server {

class UpstreamTls;  // server/upstream_tls.h

// Gateway mode's upstream, resolved once at startup.
struct Gateway {
  UpstreamUrl upstream;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
  // An https:// upstream's TLS (its context, sessions, handshake counters); null: plain.
  std::shared_ptr<UpstreamTls> tls;
};

// What changes while the server runs and handlers read: drain state and the
// reload action itself (the server's, which rebuilds the snapshot; the engine
// counts reloads). Owned by the server.
struct ServerState {
  std::atomic<bool> draining{false};
  std::atomic<int64_t> drain_deadline_ns{0};  // set when draining starts; 0 forces
  // Runs a reload (admin, SIGHUP, file change), logs and counts it; on success
  // the next snapshot is live when it returns.
  std::function<std::vector<ConfigError>(std::string_view trigger)> reload;
  // Installs the policy `text` (the admin API's PUT; already validated by the
  // caller, validated again here): writes it back to the policy file, then
  // reloads as `reload` does, audit-logged with `actor`. Empty when it is live.
  std::function<std::vector<ConfigError>(std::string_view text, std::string_view actor)> put_policy;
  // Where the admin API runs `reload` and `put_policy`: a thread of their own,
  // never a worker (they may wait on etcd for seconds). Empty: the caller's.
  std::optional<boost::asio::any_io_executor> source_executor;
  // Where key and rollback administration call the store (Redis round trips):
  // a thread of their own, so a slow store never stalls a worker's decisions.
  // Empty: the caller's.
  std::optional<boost::asio::any_io_executor> admin_executor;

  bool Draining() const { return draining.load(std::memory_order_relaxed); }
};

struct Runtime {
  // Settings, derived from the config once.
  std::shared_ptr<const ServerConfig> config;  // never null
  Exposure exposure;                           // what the main listener serves
  // The admin tokens (server/secrets.h); never null, empty without a token. A
  // reload reads their files again (a rotation), so a snapshot has its own.
  std::shared_ptr<const AdminTokens> admin_tokens = std::make_shared<const AdminTokens>();
  std::vector<std::string> admin_hosts;    // AdminHostNames (server/admin_guard.h)
  IdentityRedactor identities;             // how keys and addresses are shown
  std::shared_ptr<const Gateway> gateway;  // null unless gateway mode

  // The decision engine (the engine's own parts, borrowed). The live policy
  // is the engine's (policies->Current(), the one the Enforcer decides with).
  std::string policy_source;  // "file:<path>" or "etcd://host:port[,...]/key"
  Enforcer* enforcer = nullptr;
  // The rollback guards shared across the fleet; null: per instance.
  RollbackFleet* rollback_fleet = nullptr;
  PolicyStore* policies = nullptr;
  // Store health and metrics, key administration; never null.
  const tollgate::Runtime* engine = nullptr;
  // Enforcer::CheckAsync rather than Check: the store is natively asynchronous
  // (Store::AsyncNative), so an I/O thread never waits on the network.
  bool async_decisions = false;
  GrpcFrontend* grpc = nullptr;  // null without grpc_listen

  // Observers: where decisions are counted and logged.
  const Clock* clock = nullptr;
  Logger* log = nullptr;
  ServerMetrics* metrics = nullptr;
  TopRejected* top = nullptr;
  RejectionGate* reject_gate = nullptr;
  RejectionGate* shadow_gate = nullptr;          // shadow rejections' log lines
  RejectionGate* upstream_error_gate = nullptr;  // gateway failures: every one, N a second
  DecisionTracer* tracer = nullptr;              // null: tracing off

  ServerState* state = nullptr;
  int64_t start_wall_ns = 0;  // when the server was created (its clock's WallNow)

  const ServerConfig& cfg() const { return *config; }
};

// The live snapshot. A reader keeps a pointer and a version and refreshes
// both before each request: one atomic load when nothing changed.
class RuntimeHolder {
 public:
  explicit RuntimeHolder(std::shared_ptr<const Runtime> first) : current_(std::move(first)) {}

  std::shared_ptr<const Runtime> Load() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  // Brings (`*rt`, `*version`) up to date; cheap when they already are.
  void Refresh(std::shared_ptr<const Runtime>* rt, uint64_t* version) const {
    const uint64_t now = version_.load(std::memory_order_acquire);
    if (*rt && *version == now) return;
    std::lock_guard<std::mutex> lock(mu_);
    *rt = current_;
    *version = version_.load(std::memory_order_relaxed);
  }
  void Swap(std::shared_ptr<const Runtime> next) {
    std::shared_ptr<const Runtime> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::exchange(current_, std::move(next));
      version_.fetch_add(1, std::memory_order_release);
    }
  }  // `old` is released outside the lock

 private:
  // A mutex rather than std::atomic<shared_ptr>, as in PolicyStore: visible to
  // ThreadSanitizer, and uncontended (taken only after a reload).
  mutable std::mutex mu_;
  std::shared_ptr<const Runtime> current_;  // guarded by mu_
  std::atomic<uint64_t> version_{0};
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_RUNTIME_H_
