#include "server/server.h"

#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <filesystem>
#include <thread>

#include "server/context.h"
#include "server/session.h"
#include "server/startup_check.h"

namespace tollgate::server {

using net::redirect_error;
using net::use_awaitable;

const char* Worker::Date() {
  std::time_t now = std::time(nullptr);
  if (now != date_second) {
    date_second = now;
    std::tm tm;
    gmtime_r(&now, &tm);
    std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }
  return date;
}

std::vector<ConfigError> Shared::Reload(std::string_view trigger) {
  std::vector<ConfigError> errors = policies->Reload();
  if (grpc) {
    for (auto& e : grpc->Reload()) {
      e.path = "rls_config: " + e.path;
      errors.push_back(std::move(e));
    }
  }
  if (errors.empty()) {
    reloads_ok.fetch_add(1, std::memory_order_relaxed);
    log->Info("policy_reloaded", {{"trigger", std::string(trigger)},
                                  {"path", policies->path()},
                                  {"generation", policies->generation()}});
  } else {
    reloads_failed.fetch_add(1, std::memory_order_relaxed);
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : errors) list.push_back(e.ToString());
    log->Error("policy_reload_failed", {{"trigger", std::string(trigger)},
                                        {"path", policies->path()},
                                        {"errors", std::move(list)},
                                        {"generation", policies->generation()}});
  }
  return errors;
}

namespace {

struct FileStamp {
  int64_t mtime_ns = 0;
  int64_t size = -1;
  uint64_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp Stamp(const std::string& path) {
  struct stat st;
  FileStamp f;
  if (::stat(path.c_str(), &st) != 0) return f;
  f.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  f.size = st.st_size;
  f.inode = st.st_ino;
  return f;
}

// The envoyproxy/ratelimit YAML files behind `rls_config`: each listed file,
// and each *.yaml / *.yml in a listed directory (by name, so an added or
// removed file is a change too). Polled beside the policy file.
using RlsStamps = std::vector<std::pair<std::string, FileStamp>>;
RlsStamps StampRls(const std::vector<std::string>& paths) {
  RlsStamps out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
      out.emplace_back(p, Stamp(p));
      continue;
    }
    std::vector<std::string> names;
    for (std::filesystem::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      std::string ext = it->path().extension().string();
      if (ext == ".yaml" || ext == ".yml") names.push_back(it->path().string());
    }
    std::sort(names.begin(), names.end());
    for (auto& n : names) {
      FileStamp st = Stamp(n);
      out.emplace_back(std::move(n), st);
    }
  }
  return out;
}

Result<tcp::acceptor> Bind(net::io_context& ioc, const std::string& address,
                           std::string_view what) {
  HostPort hp;
  std::string why;
  if (!ParseHostPort(address, &hp, &why)) return InvalidArgument(std::string(what) + ": " + why);
  boost::system::error_code ec;
  net::ip::address ip = net::ip::make_address(hp.host, ec);
  tcp::endpoint endpoint;
  if (ec) {
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
    if (ec || results.empty()) {
      return InvalidArgument(std::string(what) + ": cannot resolve " + hp.host);
    }
    endpoint = results.begin()->endpoint();
  } else {
    endpoint = tcp::endpoint(ip, hp.port);
  }
  tcp::acceptor acceptor(ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return ConnectionError(std::string(what) + ": cannot listen on " + address + ": " +
                           ec.message());
  }
  return acceptor;
}

}  // namespace

class Server::Impl {
 public:
  Shared shared;
  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<tcp::acceptor> main_acceptor;
  std::optional<tcp::acceptor> admin_acceptor;
  std::optional<net::signal_set> signals;
  std::optional<net::steady_timer> reload_timer;
  FileStamp policy_stamp;
  RlsStamps rls_stamps;  // empty without the gRPC frontend
  std::vector<std::thread> threads;
  std::atomic<bool> shutdown_started{false};
  bool started = false;
  bool waited = false;
  uint16_t port = 0;
  uint16_t admin_port = 0;
  std::chrono::milliseconds sweep_interval{250};

  net::awaitable<void> AcceptLoop(tcp::acceptor& acceptor, ListenerKind kind) {
    size_t next = 0;
    boost::system::error_code ec;
    net::steady_timer backoff(acceptor.get_executor());
    for (;;) {
      Worker& w = *workers[next++ % workers.size()];
      tcp::socket socket = co_await acceptor.async_accept(w.ioc, redirect_error(use_awaitable, ec));
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
        // Out of descriptors or memory: back off instead of spinning.
        shared.log->Warn("accept_failed", {{"error", ec.message()}});
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(redirect_error(use_awaitable, ec));
        continue;
      }
      shared.metrics->connections_total.fetch_add(1, std::memory_order_relaxed);
      tcp::endpoint remote = socket.remote_endpoint(ec);
      std::optional<ConnectionLimits::Slot> slot =
          ec ? std::nullopt : shared.connection_limits->TryAcquire(kind, remote.address());
      if (!slot) {
        shared.metrics->connections_refused.fetch_add(1, std::memory_order_relaxed);
        socket.close(ec);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      net::co_spawn(w.ioc, RunSession(shared, w, kind, std::move(socket), std::move(*slot)),
                    net::detached);
    }
  }

  void Sweep(Worker& w) {
    int64_t now = SteadyNowNs();
    bool draining = shared.draining.load(std::memory_order_acquire);
    bool force = draining && now > shared.drain_deadline_ns.load(std::memory_order_relaxed);
    for (Connection* c = w.connections; c != nullptr; c = c->next) {
      bool expired = c->deadline_ns != 0 && now > c->deadline_ns;
      if (expired || (draining && c->idle) || force) {
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
    auto interval = shared.draining.load(std::memory_order_relaxed)
                        ? std::min(sweep_interval, std::chrono::milliseconds(10))
                        : sweep_interval;
    w.sweep_timer.expires_after(interval);
    w.sweep_timer.async_wait([this, &w](boost::system::error_code ec) {
      if (ec) return;
      Sweep(w);
      if (shared.draining.load(std::memory_order_acquire) && w.connection_count == 0) {
        Drained(w);
        return;
      }
      ScheduleSweep(w);
    });
  }

  void ScheduleReloadPoll() {
    if (shared.config.policy_poll_interval.count() == 0) return;
    reload_timer->expires_after(shared.config.policy_poll_interval);
    reload_timer->async_wait([this](boost::system::error_code ec) {
      if (ec || shared.draining.load(std::memory_order_relaxed)) return;
      FileStamp now = Stamp(shared.config.policy_path);
      bool changed = now.size >= 0 && !(now == policy_stamp);
      if (changed) policy_stamp = now;  // a broken file is reported once, not on every poll
      if (shared.grpc) {
        RlsStamps rls_now = StampRls(shared.config.rls_config);
        if (rls_now != rls_stamps) {
          rls_stamps = std::move(rls_now);
          changed = true;
        }
      }
      if (changed) shared.Reload("file_changed");
      ScheduleReloadPoll();
    });
  }

  void WaitSignal() {
    signals->async_wait([this](boost::system::error_code ec, int signo) {
      if (ec) return;
      if (signo == SIGHUP) {
        policy_stamp = Stamp(shared.config.policy_path);
        if (shared.grpc) rls_stamps = StampRls(shared.config.rls_config);
        shared.Reload("sighup");
      } else if (shutdown_started.load()) {
        shared.log->Warn("shutdown_forced", {{"signal", signo}});
        shared.drain_deadline_ns.store(0);
        shared.draining.store(true, std::memory_order_release);
      } else {
        shared.log->Info("signal", {{"signal", signo == SIGTERM ? "SIGTERM" : "SIGINT"}});
        Shutdown();
      }
      WaitSignal();
    });
  }

  void Shutdown() {
    bool expected = false;
    if (!shutdown_started.compare_exchange_strong(expected, true)) return;
    shared.drain_deadline_ns.store(SteadyNowNs() + Nanos(shared.config.drain_timeout).count());
    shared.draining.store(true, std::memory_order_release);
    shared.log->Info("draining", {{"drain_timeout_ms", shared.config.drain_timeout.count()}});
    net::post(workers[0]->ioc, [this] {
      boost::system::error_code ec;
      if (main_acceptor) main_acceptor->close(ec);
      if (admin_acceptor) admin_acceptor->close(ec);
      if (reload_timer) reload_timer->cancel();
      // The signal set stays armed (a second signal forces the close) until worker 0 drained.
    });
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
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Shutdown();
  Wait();
}

Result<std::unique_ptr<Server>> Server::Create(ServerConfig config, std::shared_ptr<Logger> log) {
  // The same checks as `tollgated --check` (server/startup_check.h).
  std::vector<ConfigError> errors = CheckServerConfig(config);
  if (!errors.empty()) {
    std::string text = "invalid server config:";
    for (const auto& e : errors) text += "\n  " + e.ToString();
    return InvalidArgument(text);
  }
  if (!log) {
    LogLevel level = LogLevel::kInfo;
    ParseLogLevel(config.log_level, &level);
    auto created = Logger::Create(level, config.log_file);
    if (!created.ok()) return created.status();
    log = std::move(created).value();
  }
  auto impl = std::make_unique<Impl>();
  Shared& s = impl->shared;
  s.config = config;
  s.log = log;
  s.start_wall_ns = SystemClock::Instance().WallNow();

  auto policies = PolicyStore::Open(config.policy_path);
  if (!policies.ok()) {
    return InvalidArgument("invalid policy " + policies.status().message());
  }
  s.policies = std::move(policies).value();
  impl->policy_stamp = Stamp(config.policy_path);

  auto store = CreateStore(config, s.clock, log, s.policies);
  if (!store.ok()) return store.status();
  s.store = std::move(store).value();
  s.async_store = s.store.store->Name() != "local";

  EnforcerOptions options = MakeEnforcerOptions(config);
  std::weak_ptr<Logger> weak_log = log;
  options.log = [weak_log](std::string_view message) {
    if (auto l = weak_log.lock()) l->Warn("policy_event", {{"message", std::string(message)}});
  };
  auto enforcer = Enforcer::Create(s.policies, s.store.store.get(), s.clock, std::move(options));
  if (!enforcer.ok()) return enforcer.status();
  s.enforcer = std::move(enforcer).value();

  size_t threads = config.threads > 0 ? size_t(config.threads)
                                      : std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < threads; ++i) impl->workers.push_back(std::make_unique<Worker>(i));
  s.metrics = std::make_unique<ServerMetrics>(threads);
  s.top = std::make_unique<TopRejected>(config.top_capacity, Nanos(config.top_window).count());
  s.reject_gate =
      std::make_unique<RejectionGate>(config.reject_log_sample, config.reject_logs_per_second);
  s.upstream_error_gate = std::make_unique<RejectionGate>(1, config.reject_logs_per_second);
  s.exposure = ExposureOf(config);
  s.connection_limits = std::make_unique<ConnectionLimits>(
      config.max_connections, config.admin_max_connections, config.max_connections_per_ip);
  if (!config.admin_token.empty()) s.bearer = "Bearer " + config.admin_token;
  s.identities = IdentityRedactor(config.identity_hash_key, config.raw_identities);

  if (!config.upstream.empty()) {
    std::string why;
    ParseUpstreamUrl(config.upstream, &s.upstream, &why);
    boost::system::error_code ec;
    tcp::resolver resolver(impl->workers[0]->ioc);
    auto results =
        resolver.resolve(s.upstream.address.host, std::to_string(s.upstream.address.port), ec);
    if (ec || results.empty()) {
      return InvalidArgument("gateway.upstream: cannot resolve " + s.upstream.address.host + ": " +
                             ec.message());
    }
    for (const auto& r : results) s.upstream_endpoints.push_back(r.endpoint());
    s.gateway = true;
  }

  if (!config.grpc_listen.empty()) {
    auto grpc = GrpcFrontend::Start(config, s.store.store.get(), s.clock);
    if (!grpc.ok()) return grpc.status();
    s.grpc = std::move(grpc).value();
    impl->rls_stamps = StampRls(config.rls_config);
  }

  auto& ioc0 = impl->workers[0]->ioc;
  auto main = Bind(ioc0, config.listen, "listen");
  if (!main.ok()) return main.status();
  impl->main_acceptor.emplace(std::move(main).value());
  if (!config.admin_listen.empty()) {
    auto admin = Bind(ioc0, config.admin_listen, "admin");
    if (!admin.ok()) return admin.status();
    impl->admin_acceptor.emplace(std::move(admin).value());
  }
  impl->reload_timer.emplace(ioc0);
  impl->port = impl->main_acceptor->local_endpoint().port();
  if (impl->admin_acceptor) impl->admin_port = impl->admin_acceptor->local_endpoint().port();

  auto shortest = std::min({config.read_timeout, config.idle_timeout, config.write_timeout,
                            config.upstream_timeout, config.upstream_connect_timeout});
  impl->sweep_interval = std::clamp(shortest / 4, Millis(5), Millis(250));
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
  Shared& s = m.shared;
  net::co_spawn(m.workers[0]->ioc, m.AcceptLoop(*m.main_acceptor, ListenerKind::kMain),
                net::detached);
  if (m.admin_acceptor) {
    net::co_spawn(m.workers[0]->ioc, m.AcceptLoop(*m.admin_acceptor, ListenerKind::kAdmin),
                  net::detached);
  }
  for (auto& w : m.workers) m.ScheduleSweep(*w);
  m.ScheduleReloadPoll();
  nlohmann::json info = {{"listen", m.main_acceptor->local_endpoint().address().to_string() + ":" +
                                        std::to_string(port())},
                         {"threads", m.workers.size()},
                         {"store", s.store.description},
                         {"failure_mode", s.config.failure_mode},
                         {"policy", s.config.policy_path},
                         {"policy_generation", s.policies->generation()},
                         {"headers", s.config.header_style}};
  if (m.admin_acceptor) {
    info["admin"] = m.admin_acceptor->local_endpoint().address().to_string() + ":" +
                    std::to_string(admin_port());
  }
  if (s.gateway) info["upstream"] = s.config.upstream;
  if (s.grpc) info["grpc"] = s.grpc->address();
  s.log->Info("started", std::move(info));
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
  if (m.shared.grpc) m.shared.grpc->Shutdown();
  m.shared.log->Info("stopped",
                     {{"connections_total", m.shared.metrics->connections_total.load()}});
  m.shared.log->Flush();
}

std::vector<ConfigError> Server::Reload() { return impl_->shared.Reload("api"); }

uint16_t Server::port() const { return impl_->port; }
uint16_t Server::admin_port() const { return impl_->admin_port; }
Enforcer& Server::enforcer() { return *impl_->shared.enforcer; }
const ServerConfig& Server::config() const { return impl_->shared.config; }

}  // namespace tollgate::server
