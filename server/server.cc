#include "server/server.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <mutex>
#include <thread>

#include "server/admin_guard.h"
#include "server/context.h"
#include "server/handlers.h"
#include "server/listen_socket.h"
#include "server/runtime.h"
#include "server/session.h"
#include "server/spoe_session.h"
#include "server/startup_check.h"
#include "server/tls_listener.h"
#include "server/upstream_tls.h"
#include "tollgate/ip_address.h"
#include "tollgate/runtime.h"

namespace tollgate::server {

using net::redirect_error;
using net::use_awaitable;

const char* Worker::Date() {
  const std::time_t now = std::time_t(clock.WallNow() / 1'000'000'000);
  if (now != date_second) {
    date_second = now;
    std::tm tm;
    gmtime_r(&now, &tm);
    std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }
  return date;
}

namespace {

// On drain, how long an idle keep-alive connection may still send a request
// (a client that sent one as the drain began must get its answer, not a
// reset) before it is closed.
constexpr Millis kDrainIdleGrace{250};
// At most this many queued connections are accepted when a listener closes.
constexpr size_t kMaxQueuedAtClose = 4096;

}  // namespace

class Server::Impl {
 public:
  // What the config asks for, owned here for the server's life; each Runtime
  // snapshot points to these (server/runtime.h).
  std::shared_ptr<const ServerConfig> config;
  std::shared_ptr<Logger> log;
  const Clock* clock = nullptr;
  const Clock* io_clock = nullptr;         // the store's I/O timers
  std::unique_ptr<DecisionTracer> tracer;  // null without tracing.endpoint
  // The engine: policy source, store, Enforcer, rollback fleet, reloads.
  // Wait stops its etcd watch and fleet thread.
  std::unique_ptr<tollgate::Runtime> engine;
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<TopRejected> top;
  std::unique_ptr<RejectionGate> reject_gate;
  std::unique_ptr<RejectionGate> shadow_gate;
  std::unique_ptr<RejectionGate> upstream_error_gate;
  std::unique_ptr<ConnectionLimits> connection_limits;
  std::unique_ptr<GrpcFrontend> grpc;  // Envoy RLS, when grpc_listen is set
  ServerState state;
  std::optional<RuntimeHolder> runtimes;
  // Reloads and policy writes from SIGHUP, the file watch and the admin API
  // run here, not on a worker: an etcd read or write waits up to io_timeout per
  // member. Joined in Wait once the workers (which await its answers) are done.
  net::thread_pool source_pool{1};
  // Key and rollback administration wait here on the store (a Redis round
  // trip, up to its call timeout), never on a worker deciding requests.
  // Joined in Wait with source_pool.
  net::thread_pool admin_pool{1};

  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<tcp::acceptor> main_acceptor;
  std::optional<tcp::acceptor> admin_acceptor;
  std::unique_ptr<TlsListener> main_tls;   // null: plain HTTP
  std::unique_ptr<TlsListener> admin_tls;  // null: plain HTTP
  // HAProxy's SPOE agent (spoe.listen): its listener, its peers, its cap.
  std::optional<tcp::acceptor> spoe_acceptor;
  bool spoe_passed = false;  // spoe_acceptor came from systemd
  uint16_t spoe_port = 0;
  std::vector<Cidr> spoe_peers;
  std::unique_ptr<SpoeConnections> spoe_connections;
  std::optional<net::signal_set> signals;
  std::optional<net::steady_timer> reload_timer;
  std::vector<std::thread> threads;
  std::atomic<bool> shutdown_started{false};
  bool started = false;
  bool waited = false;
  bool main_passed = false;   // main_acceptor came from systemd (LISTEN_FDS)
  bool admin_passed = false;  // admin_acceptor came from systemd
  size_t next_worker = 0;     // worker 0 only: where the next connection goes
  std::atomic<int64_t> drain_started_ns{0};
  uint16_t port = 0;
  uint16_t admin_port = 0;
  std::chrono::milliseconds sweep_interval{250};
  int64_t start_wall_ns = 0;

  net::awaitable<void> AcceptLoop(tcp::acceptor& acceptor, ListenerKind kind) {
    boost::system::error_code ec;
    net::steady_timer backoff(acceptor.get_executor());
    for (;;) {
      Worker& w = NextWorker();
      tcp::socket socket = co_await acceptor.async_accept(w.ioc, redirect_error(use_awaitable, ec));
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
        // Out of descriptors or memory: back off instead of spinning.
        log->Warn("accept_failed", {{"error", ec.message()}});
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(redirect_error(use_awaitable, ec));
        continue;
      }
      Admit(w, kind, std::move(socket));
    }
  }

  Worker& NextWorker() { return *workers[next_worker++ % workers.size()]; }

  // The SPOE listener's loop: as AcceptLoop, each connection a SpoeSession.
  net::awaitable<void> SpoeAcceptLoop(tcp::acceptor& acceptor) {
    boost::system::error_code ec;
    net::steady_timer backoff(acceptor.get_executor());
    for (;;) {
      Worker& w = NextWorker();
      tcp::socket socket = co_await acceptor.async_accept(w.ioc, redirect_error(use_awaitable, ec));
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
        log->Warn("accept_failed", {{"listener", "spoe"}, {"error", ec.message()}});
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(redirect_error(use_awaitable, ec));
        continue;
      }
      AdmitSpoe(w, std::move(socket));
    }
  }

  // SPOP has no authentication: only spoe.allowed_peers may connect, and at
  // most spoe.max_connections at once.
  void AdmitSpoe(Worker& w, tcp::socket socket) {
    boost::system::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    std::optional<IpAddress> peer =
        ec ? std::nullopt : IpAddress::Parse(remote.address().to_string());
    const bool allowed = peer && std::any_of(spoe_peers.begin(), spoe_peers.end(),
                                             [&](const Cidr& c) { return c.Contains(*peer); });
    std::optional<SpoeConnections::Slot> slot =
        allowed ? spoe_connections->TryAcquire() : std::nullopt;
    if (!slot) {
      metrics->connections_refused.fetch_add(1, std::memory_order_relaxed);
      metrics->shard(w.index).spoe.Count(allowed ? SpoeError::kOverCapacity
                                                 : SpoeError::kPeerRefused);
      if (!allowed) {
        log->Warn("spoe_peer_refused", {{"peer", ec ? "?" : remote.address().to_string()}});
      }
      socket.close(ec);
      return;
    }
    metrics->connections_total.fetch_add(1, std::memory_order_relaxed);
    socket.set_option(tcp::no_delay(true), ec);
    net::co_spawn(w.ioc, RunSpoeSession(*runtimes, w, std::move(socket), std::move(*slot)),
                  net::detached);
  }

  // An accepted connection: counted, limited, then a session on worker `w`
  // (`socket` is bound to w.ioc).
  void Admit(Worker& w, ListenerKind kind, tcp::socket socket) {
    boost::system::error_code ec;
    metrics->connections_total.fetch_add(1, std::memory_order_relaxed);
    tcp::endpoint remote = socket.remote_endpoint(ec);
    std::optional<ConnectionLimits::Slot> slot =
        ec ? std::nullopt : connection_limits->TryAcquire(kind, remote.address());
    if (!slot) {
      metrics->connections_refused.fetch_add(1, std::memory_order_relaxed);
      socket.close(ec);
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    TlsListener* tls = kind == ListenerKind::kMain ? main_tls.get() : admin_tls.get();
    net::co_spawn(w.ioc, RunSession(*runtimes, w, kind, std::move(socket), std::move(*slot), tls),
                  net::detached);
  }

  // On worker 0, at the start of a drain. A socket of our own is closed for
  // good, after what its queue holds was accepted (closing a listener resets
  // its queue, and with reuse_port the new process has a queue of its own);
  // a socket systemd passed keeps its queue in systemd for the next process.
  void CloseListener(std::optional<tcp::acceptor>& acceptor, bool passed, ListenerKind kind) {
    if (!acceptor) return;
    if (!passed) {
      // A few connections at most: they stay on worker 0.
      Worker& w0 = *workers[0];
      for (tcp::socket& s : AcceptQueued(*acceptor, w0.ioc, kMaxQueuedAtClose)) {
        Admit(w0, kind, std::move(s));
      }
    }
    boost::system::error_code ec;
    acceptor->close(ec);
  }

  void Sweep(Worker& w) {
    int64_t now = clock->Now();
    bool draining = state.draining.load(std::memory_order_acquire);
    bool force = draining && now > state.drain_deadline_ns.load(std::memory_order_relaxed);
    // An idle keep-alive connection may be sending its next request right now:
    // it has kDrainIdleGrace to do so (answered with Connection: close) before
    // it is closed.
    bool idle_done = draining && now > drain_started_ns.load(std::memory_order_relaxed) +
                                           Nanos(kDrainIdleGrace).count();
    for (Connection* c = w.connections; c != nullptr; c = c->next) {
      bool expired = c->deadline_ns != 0 && now > c->deadline_ns;
      if (expired || (idle_done && c->idle) || force) {
        if (expired) c->timed_out = true;
        c->deadline_ns = 0;
        boost::system::error_code ec;
        c->socket.close(ec);
      }
    }
    if (draining) w.idle_upstream.clear();
  }

  // A worker with nothing left to drain: once no work remains its run() returns.
  // Worker 0 also holds the signal set, which would otherwise keep it alive.
  void Drained(Worker& w) {
    if (&w == workers[0].get() && signals) signals->cancel();
  }

  void ScheduleSweep(Worker& w) {
    auto interval = state.draining.load(std::memory_order_relaxed)
                        ? std::min(sweep_interval, std::chrono::milliseconds(10))
                        : sweep_interval;
    w.sweep_timer.expires_after(interval);
    w.sweep_timer.async_wait([this, &w](boost::system::error_code ec) {
      if (ec) return;
      Sweep(w);
      if (state.draining.load(std::memory_order_acquire) && w.connection_count == 0) {
        Drained(w);
        return;
      }
      ScheduleSweep(w);
    });
  }

  void ScheduleReloadPoll() {
    if (config->policy_poll_interval.count() == 0) return;
    reload_timer->expires_after(config->policy_poll_interval);
    reload_timer->async_wait([this](boost::system::error_code ec) {
      if (ec || state.draining.load(std::memory_order_relaxed)) return;
      // The listeners' certificate files, each reloaded when one of its files changed.
      std::vector<TlsReloadable*> changed;
      for (TlsReloadable* tls : TlsListeners()) {
        if (tls->FilesChanged()) changed.push_back(tls);
      }
      if (!changed.empty()) {
        net::post(source_pool, [this, changed] { ReloadTls(changed, "file_changed"); });
      }
      // The policy file and the Envoy rule files (RuntimeOptions watch_files).
      if (engine->SourceChanged()) {
        net::post(source_pool, [this] { Reload("file_changed"); });
      } else if (engine->TenantRefreshDue()) {
        // Redis tenant tables are read again and the new policy swapped in whole.
        net::post(source_pool, [this] { Reload("tenant_refresh"); });
      }
      ScheduleReloadPoll();
    });
  }

  void WaitSignal() {
    signals->async_wait([this](boost::system::error_code ec, int signo) {
      if (ec) return;
      if (signo == SIGHUP) {
        engine->MarkSourceSeen();
        net::post(source_pool, [this] {
          ReloadTls(TlsListeners(), "sighup");
          Reload("sighup");
        });
      } else if (shutdown_started.load()) {
        log->Warn("shutdown_forced", {{"signal", signo}});
        state.drain_deadline_ns.store(0);
        state.draining.store(true, std::memory_order_release);
      } else {
        log->Info("signal", {{"signal", signo == SIGTERM ? "SIGTERM" : "SIGINT"}});
        Shutdown();
      }
      WaitSignal();
    });
  }

  // The listeners' TLS contexts from config, or the errors (each a path).
  std::vector<ConfigError> MakeTlsListeners() {
    std::vector<ConfigError> errors, warnings;
    const int64_t now_unix = clock->WallNow() / 1'000'000'000;
    if (config->tls.enabled()) {
      main_tls = TlsListener::Create(config->tls, "tls", now_unix, &errors, &warnings);
    }
    if (config->admin_tls.enabled() && !config->admin_listen.empty()) {
      admin_tls = TlsListener::Create(config->admin_tls, "admin.tls", now_unix, &errors, &warnings);
    }
    for (const auto& w : warnings) log->Warn("tls_certificate", {{"warning", w.ToString()}});
    return errors;
  }

  // Every listener with TLS (main, admin, gRPC).
  std::vector<TlsReloadable*> TlsListeners() const {
    std::vector<TlsReloadable*> out;
    for (TlsReloadable* tls :
         {static_cast<TlsReloadable*>(main_tls.get()), static_cast<TlsReloadable*>(admin_tls.get()),
          grpc ? grpc->tls() : nullptr}) {
      if (tls != nullptr) out.push_back(tls);
    }
    return out;
  }

  // SIGHUP and the file watch: the certificates read again for new
  // connections; one that cannot be loaded keeps the listener's current one
  // (logged and counted).
  void ReloadTls(const std::vector<TlsReloadable*>& listeners, std::string_view trigger) {
    const int64_t now_unix = clock->WallNow() / 1'000'000'000;
    for (TlsReloadable* tls : listeners) {
      std::vector<ConfigError> warnings;
      std::vector<ConfigError> errors = tls->Reload(now_unix, &warnings);
      for (const auto& w : warnings) log->Warn("tls_certificate", {{"warning", w.ToString()}});
      metrics->CountTlsReload(ServerMetrics::TlsListenerIndex(tls->path()), errors.empty());
      if (errors.empty()) {
        log->Info("tls_reloaded", {{"listener", tls->path()}, {"trigger", trigger}});
        continue;
      }
      std::string why;
      for (const auto& e : errors) why += (why.empty() ? "" : "; ") + e.ToString();
      log->Warn("tls_not_reloaded",
                {{"listener", tls->path()}, {"trigger", trigger}, {"error", why}});
    }
  }

  // Runs a reload (admin, SIGHUP, file change, the API); the engine logs it
  // and OnReloaded counts it and swaps the next snapshot in before it returns.
  std::vector<ConfigError> Reload(std::string_view trigger) { return engine->Reload(trigger); }

  // The admin API's PUT (tollgate::Runtime::PutPolicy: checked, written back,
  // applied, or put back; the file watch then takes the written file as seen).
  std::vector<ConfigError> PutPolicy(std::string_view text, std::string_view actor) {
    return engine->PutPolicy(text, actor);
  }

  // Every reload of the engine (any trigger), under its reload lock (the
  // engine counts it). The policy, the Enforcer's view and the Envoy
  // configuration are already live (the engine's one swap); the server's own
  // snapshot changes only by its admin tokens, read again.
  void OnReloaded(const std::vector<ConfigError>& errors) {
    if (!errors.empty() || !runtimes) return;  // no snapshot yet: Create builds it
    auto next = std::make_shared<Runtime>(*runtimes->Load());
    next->admin_tokens = RotateAdminTokens(next->admin_tokens);
    runtimes->Swap(std::move(next));
  }

  // The admin tokens after a reload: their files read again (a rotation), or
  // `current` when a file cannot be read or the set is not valid (logged).
  std::shared_ptr<const AdminTokens> RotateAdminTokens(std::shared_ptr<const AdminTokens> current) {
    std::vector<AdminToken> tokens = current->tokens();
    std::string why;
    if (!RereadAdminTokens(&tokens, &why)) {
      log->Warn("admin_tokens_not_reloaded", {{"error", why}});
      return current;
    }
    return std::make_shared<const AdminTokens>(std::move(tokens));
  }

  // The first snapshot, from the config and what Create built for it.
  std::shared_ptr<const Runtime> BuildRuntime(std::shared_ptr<const Gateway> gateway) {
    auto rt = std::make_shared<Runtime>();
    rt->config = config;
    rt->exposure = ExposureOf(*config);
    rt->admin_tokens = std::make_shared<const AdminTokens>(AdminTokensOf(*config));
    rt->admin_hosts = AdminHostNames(*config);
    rt->identities = IdentityRedactor(config->identity_hash_key, config->raw_identities);
    rt->gateway = std::move(gateway);
    rt->policy_source = engine->policy_source();
    rt->enforcer = &engine->enforcer();
    rt->rollback_fleet = engine->rollback_fleet();
    rt->policies = &engine->policies();
    rt->engine = engine.get();
    rt->async_decisions = engine->store().AsyncNative();
    rt->grpc = grpc.get();
    rt->clock = clock;
    rt->tracer = tracer.get();
    rt->log = log.get();
    rt->metrics = metrics.get();
    rt->top = top.get();
    rt->reject_gate = reject_gate.get();
    rt->shadow_gate = shadow_gate.get();
    rt->upstream_error_gate = upstream_error_gate.get();
    rt->state = &state;
    rt->start_wall_ns = start_wall_ns;
    return rt;
  }

  // The engine (policy, store, Enforcer, fleet) from the config, then tracing.
  // An invalid policy is kInvalidArgument (tollgated exits 2); a Redis tenant
  // table that could not be read because Redis is down is not (exit 1: a
  // restart may succeed).
  Status OpenEngine() {
    auto options = RuntimeOptionsOf(*config);
    if (!options.ok()) return options.status();
    options->enforcer.time_store_calls = !config->trace_endpoint.empty();  // the store span's times
    // The Envoy front end (GrpcFrontend::Start) decides on the same Enforcer.
    options->envoy = !config->grpc_listen.empty();
    if (options->envoy) options->policy.watch_files = config->rls_config;
    RuntimeEnv env;
    env.clock = clock;
    env.io_clock = io_clock;
    env.on_event = [weak_log = std::weak_ptr<Logger>(log)](const RuntimeEvent& e) {
      auto l = weak_log.lock();
      if (!l) return;
      l->Log(LevelOf(e.level), e.name, nlohmann::json::parse(e.fields, nullptr, false));
    };
    env.on_reloaded = [this](const std::vector<ConfigError>& errors) { OnReloaded(errors); };
    auto made = tollgate::Runtime::Create(std::move(options).value(), std::move(env));
    if (!made.ok()) return made.status();
    engine = std::move(made).value();
    auto tracing = MakeDecisionTracer(*config, clock);
    if (!tracing.ok()) return InvalidArgument("tracing: " + tracing.status().message());
    tracer = std::move(tracing).value();
    return Status::Ok();
  }

  static LogLevel LevelOf(RuntimeEvent::Level level) {
    switch (level) {
      case RuntimeEvent::Level::kDebug:
        return LogLevel::kDebug;
      case RuntimeEvent::Level::kInfo:
        return LogLevel::kInfo;
      case RuntimeEvent::Level::kWarn:
        return LogLevel::kWarn;
      case RuntimeEvent::Level::kError:
        return LogLevel::kError;
    }
    return LogLevel::kError;
  }

  // Workers, metrics and the other observers, sized by the config.
  void CreateWorkers() {
    const ServerConfig& c = *config;
    size_t threads =
        c.threads > 0 ? size_t(c.threads) : std::max(1u, std::thread::hardware_concurrency());
    for (size_t i = 0; i < threads; ++i) workers.push_back(std::make_unique<Worker>(i, *clock));
    metrics = std::make_unique<ServerMetrics>(threads);
    top = std::make_unique<TopRejected>(c.top_capacity, Nanos(c.top_window).count());
    reject_gate = std::make_unique<RejectionGate>(c.reject_log_sample, c.reject_logs_per_second);
    shadow_gate = std::make_unique<RejectionGate>(c.shadow_log_sample, c.shadow_logs_per_second);
    upstream_error_gate = std::make_unique<RejectionGate>(1, c.reject_logs_per_second);
    connection_limits = std::make_unique<ConnectionLimits>(
        c.max_connections, c.admin_max_connections, c.max_connections_per_ip);
    auto shortest = std::min({c.read_timeout, c.idle_timeout, c.write_timeout, c.upstream_timeout,
                              c.upstream_connect_timeout});
    sweep_interval = std::clamp(shortest / 4, Millis(5), Millis(250));
  }

  // Gateway mode's upstream, resolved now; null without a gateway.
  Result<std::shared_ptr<const Gateway>> ResolveGateway() {
    if (config->upstream.empty()) return std::shared_ptr<const Gateway>();
    auto gw = std::make_shared<Gateway>();
    std::string why;
    ParseUpstreamUrl(config->upstream, &gw->upstream, &why);
    boost::system::error_code ec;
    tcp::resolver resolver(workers[0]->ioc);
    const HostPort& at = gw->upstream.address;
    auto results = resolver.resolve(at.host, std::to_string(at.port), ec);
    if (ec || results.empty()) {
      return UnavailableError("gateway.upstream: cannot resolve " + at.host + ": " + ec.message());
    }
    for (const auto& r : results) gw->endpoints.push_back(r.endpoint());
    if (gw->upstream.tls) {
      std::vector<ConfigError> errors, warnings;
      SslCtxPtr ctx =
          MakeUpstreamTlsContext(*config, clock->WallNow() / 1'000'000'000, &errors, &warnings);
      for (const auto& w : warnings) log->Warn("upstream_tls", {{"warning", w.ToString()}});
      if (!ctx) {
        std::string text = "invalid server config:";
        for (const auto& e : errors) text += "\n  " + e.ToString();
        return InvalidArgument(text);
      }
      gw->tls =
          std::make_shared<UpstreamTls>(std::move(ctx), *config, gw->upstream, workers.size());
    }
    return std::shared_ptr<const Gateway>(std::move(gw));
  }

  // The main and admin listeners: the sockets systemd passed (socket
  // activation), else bound here (SO_REUSEPORT with `reuse_port`).
  Status BindListeners() {
    auto& ioc0 = workers[0]->ioc;
    auto passed = TakeSystemdListeners(SystemdListenEnv::FromProcess(), ::getpid());
    if (!passed.ok()) return passed.status();
    if (!passed->ignored().empty()) {
      log->Warn("systemd_sockets_ignored", {{"reason", passed->ignored()}});
    }
    const ListenOptions options{.reuse_port = config->reuse_port};
    auto open = [&](const char* name, const std::string& address, std::optional<tcp::acceptor>& out,
                    bool& from_systemd) -> Status {
      if (auto fd = passed->Take(name, ioc0)) {
        out.emplace(std::move(*fd));
        from_systemd = true;
        return Status::Ok();
      }
      auto bound = OpenListener(ioc0, address, name, options);
      if (!bound.ok()) return bound.status();
      out.emplace(std::move(bound).value());
      return Status::Ok();
    };
    if (Status st = open("listen", config->listen, main_acceptor, main_passed); !st.ok()) return st;
    if (!config->admin_listen.empty()) {
      if (Status st = open("admin", config->admin_listen, admin_acceptor, admin_passed); !st.ok()) {
        return st;
      }
    }
    if (!config->spoe_listen.empty()) {
      if (Status st = open("spoe", config->spoe_listen, spoe_acceptor, spoe_passed); !st.ok()) {
        return st;
      }
      spoe_port = spoe_acceptor->local_endpoint().port();
      for (const std::string& c : config->spoe_allowed_peers) {
        if (auto cidr = Cidr::Parse(c))
          spoe_peers.push_back(*cidr);  // checked by ValidateServerConfig
      }
      spoe_connections = std::make_unique<SpoeConnections>(config->spoe_max_connections);
    }
    if (std::vector<std::string> unused = passed->Untaken(); !unused.empty()) {
      return InvalidArgument("systemd passed a socket named \"" + unused[0] +
                             "\" but the config has no such listener (admin is off)");
    }
    reload_timer.emplace(ioc0);
    port = main_acceptor->local_endpoint().port();
    if (admin_acceptor) admin_port = admin_acceptor->local_endpoint().port();
    nlohmann::json info = {{"listen", Address(*main_acceptor)},
                           {"reuse_port", config->reuse_port},
                           {"systemd", main_passed}};
    if (admin_acceptor) info["admin"] = Address(*admin_acceptor);
    if (spoe_acceptor) info["spoe"] = Address(*spoe_acceptor);
    log->Info("listening", std::move(info));
    return Status::Ok();
  }

  static std::string Address(const tcp::acceptor& a) {
    boost::system::error_code ec;
    tcp::endpoint e = a.local_endpoint(ec);
    return e.address().to_string() + ":" + std::to_string(e.port());
  }

  void Shutdown() {
    bool expected = false;
    if (!shutdown_started.compare_exchange_strong(expected, true)) return;
    log->Info("draining", {{"drain_timeout_ms", config->drain_timeout.count()}});
    // gRPC health checkers (Envoy, Kubernetes) see NOT_SERVING while the
    // listener still answers, as /readyz says 503.
    if (grpc) grpc->Drain();
    // The listeners close before any answer says Connection: close, so that
    // a client reconnecting after one reaches the next process's queue.
    net::post(workers[0]->ioc, [this] {
      CloseListener(main_acceptor, main_passed, ListenerKind::kMain);
      CloseListener(admin_acceptor, admin_passed, ListenerKind::kAdmin);
      // HAProxy retries a refused SPOE connection on its own: nothing queued is taken.
      if (spoe_acceptor) {
        boost::system::error_code ec;
        spoe_acceptor->close(ec);
      }
      if (reload_timer) reload_timer->cancel();
      const int64_t now = clock->Now();
      drain_started_ns.store(now, std::memory_order_relaxed);
      state.drain_deadline_ns.store(now + Nanos(config->drain_timeout).count());
      state.draining.store(true, std::memory_order_release);
      // The signal set stays armed (a second signal forces the close) until worker 0 drained.
      for (auto& w : workers) {
        Worker* wp = w.get();
        net::post(wp->ioc, [this, wp] {
          Sweep(*wp);
          if (wp->connection_count == 0) {
            wp->sweep_timer.cancel();
            Drained(*wp);
          }
        });
      }
    });
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Shutdown();
  Wait();
}

Result<std::unique_ptr<Server>> Server::Create(ServerConfig config, std::shared_ptr<Logger> log,
                                               const Clock* clock, const Clock* io_clock) {
  // The same checks as `tollgated --check` (server/startup_check.h).
  std::vector<ConfigError> errors = CheckServerConfig(config);
  if (!errors.empty()) {
    std::string text = "invalid server config:";
    for (const auto& e : errors) text += "\n  " + e.ToString();
    return InvalidArgument(text);
  }
  if (clock == nullptr || io_clock == nullptr) {
    return InvalidArgument("Server::Create: clock and io_clock must not be null");
  }
  if (!log) {
    auto created = Logger::Create(config.log_level, config.log_file);
    if (!created.ok()) return created.status();
    log = std::move(created).value();
  }
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.config = std::make_shared<const ServerConfig>(std::move(config));
  m.log = std::move(log);
  m.clock = clock;
  m.io_clock = io_clock;
  m.start_wall_ns = clock->WallNow();
  m.CreateWorkers();
  // Listening before the engine opens: with a state file, the engine waits
  // for the process being replaced to save and exit, and meanwhile new
  // connections queue here instead of being refused.
  if (auto tls_errors = m.MakeTlsListeners(); !tls_errors.empty()) {
    std::string text = "invalid server config:";
    for (const auto& e : tls_errors) text += "\n  " + e.ToString();
    return InvalidArgument(text);
  }
  if (Status st = m.BindListeners(); !st.ok()) return st;
  if (Status st = m.OpenEngine(); !st.ok()) return st;
  // Before serving: the trips the fleet already has apply to the first request.
  m.engine->SyncRollbackFleet();
  auto gateway = m.ResolveGateway();
  if (!gateway.ok()) return gateway.status();
  if (!m.config->grpc_listen.empty()) {
    // The Envoy rule files become the engine's companion: checked with a PUT,
    // reloaded and published with the policy in one swap.
    auto grpc = GrpcFrontend::Start(*m.config, *m.engine, clock, m.tracer.get());
    if (!grpc.ok()) return grpc.status();
    m.grpc = std::move(grpc).value();
  }
  m.state.reload = [&m](std::string_view trigger) { return m.Reload(trigger); };
  m.state.source_executor = m.source_pool.get_executor();
  m.state.admin_executor = m.admin_pool.get_executor();
  m.state.put_policy = [&m](std::string_view text, std::string_view actor) {
    return m.PutPolicy(text, actor);
  };
  m.runtimes.emplace(m.BuildRuntime(std::move(gateway).value()));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::HandleSignals() {
  impl_->signals.emplace(impl_->workers[0]->ioc, SIGTERM, SIGINT, SIGHUP);
  impl_->WaitSignal();
}

void Server::Start() {
  Impl& m = *impl_;
  if (m.started) return;
  m.started = true;
  net::co_spawn(m.workers[0]->ioc, m.AcceptLoop(*m.main_acceptor, ListenerKind::kMain),
                net::detached);
  if (m.admin_acceptor) {
    net::co_spawn(m.workers[0]->ioc, m.AcceptLoop(*m.admin_acceptor, ListenerKind::kAdmin),
                  net::detached);
  }
  if (m.spoe_acceptor) {
    net::co_spawn(m.workers[0]->ioc, m.SpoeAcceptLoop(*m.spoe_acceptor), net::detached);
  }
  for (auto& w : m.workers) m.ScheduleSweep(*w);
  m.ScheduleReloadPoll();
  m.engine->Start();
  nlohmann::json info = {{"listen", m.main_acceptor->local_endpoint().address().to_string() + ":" +
                                        std::to_string(port())},
                         {"tls", m.main_tls != nullptr},
                         {"threads", m.workers.size()},
                         {"store", m.engine->store_description()},
                         {"failure_mode", FailureModeName(m.config->failure_mode)},
                         {"policy", m.config->policy_path},
                         {"policy_generation", m.engine->view().generation},
                         {"headers", HeaderStylesName(m.config->header_styles)},
                         {"rollback_scope", m.engine->rollback_fleet() ? "fleet" : "instance"}};
  if (m.admin_acceptor) {
    info["admin"] = m.admin_acceptor->local_endpoint().address().to_string() + ":" +
                    std::to_string(admin_port());
  }
  if (!m.config->upstream.empty()) info["upstream"] = m.config->upstream;
  if (m.grpc) info["grpc"] = m.grpc->address();
  if (m.spoe_acceptor) info["spoe"] = m.spoe_acceptor->local_endpoint().port();
  m.log->Info("started", std::move(info));
  for (auto& w : m.workers) {
    Worker* wp = w.get();
    m.threads.emplace_back([wp] { wp->ioc.run(); });
  }
}

void Server::Shutdown() {
  if (!impl_->started) return;
  impl_->Shutdown();
}

void Server::Wait() {
  Impl& m = *impl_;
  if (!m.started || m.waited) return;
  m.waited = true;
  for (auto& t : m.threads) {
    if (t.joinable()) t.join();
  }
  m.engine->Stop();
  m.source_pool.join();
  m.admin_pool.join();
  if (m.grpc) m.grpc->Shutdown();
  // Every request has finished: the local store's state as it ends (a
  // failure is logged by the engine).
  (void)m.engine->SaveState("drain");
  m.log->Info("stopped", {{"connections_total", m.metrics->connections_total.load()}});
  m.log->Flush();
}

std::vector<ConfigError> Server::Reload() { return impl_->Reload("api"); }

uint16_t Server::port() const { return impl_->port; }
uint16_t Server::admin_port() const { return impl_->admin_port; }
uint16_t Server::spoe_port() const { return impl_->spoe_port; }
Enforcer& Server::enforcer() { return impl_->engine->enforcer(); }
const ServerConfig& Server::config() const { return *impl_->config; }

}  // namespace tollgate::server
