#include "server/server.h"

#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/redact.h"
#include "runtime/etcd_watch.h"
#include "server/admin_guard.h"
#include "server/context.h"
#include "server/handlers.h"
#include "server/policy_file.h"
#include "server/rollback_admin.h"
#include "server/runtime.h"
#include "server/session.h"
#include "server/startup_check.h"
#include "src/policy/policy_impl.h"

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
      return UnavailableError(std::string(what) + ": cannot resolve " + hp.host);
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
  // What the config asks for, owned here for the server's life; each Runtime
  // snapshot points to these (server/runtime.h).
  std::shared_ptr<const ServerConfig> config;
  std::shared_ptr<Logger> log;
  const Clock* clock = nullptr;
  const Clock* io_clock = nullptr;         // the store's I/O timers
  std::unique_ptr<DecisionTracer> tracer;  // null without tracing.endpoint
  std::shared_ptr<PolicyStore> policies;
  StoreBundle store;
  std::unique_ptr<Enforcer> enforcer;
  // The rollback guards shared across the fleet (a remote store with
  // store.share_rollback); null otherwise. Declared after the Enforcer, which
  // its thread adopts into, so it goes first; Wait stops its thread. Shared:
  // the Enforcer's on_rollback holds it weakly.
  std::shared_ptr<RollbackFleet> rollback_fleet;
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<TopRejected> top;
  std::unique_ptr<RejectionGate> reject_gate;
  std::unique_ptr<RejectionGate> shadow_gate;
  std::unique_ptr<RejectionGate> upstream_error_gate;
  std::unique_ptr<ConnectionLimits> connection_limits;
  std::unique_ptr<GrpcFrontend> grpc;  // Envoy RLS, when grpc_listen is set
  ServerState state;
  std::optional<RuntimeHolder> runtimes;
  std::mutex reload_mu;  // one reload (and snapshot swap) at a time
  // The policy source: a file (policy_path), or an etcd key when policy_path is
  // etcd://host:port[,host:port]/key (then the watch delivers new revisions).
  std::optional<etcd::EtcdOptions> etcd_source;
  std::unique_ptr<etcd::EtcdWatch> etcd_watch;  // stopped in Wait, after the workers
  int64_t etcd_revision = 0;                    // the revision the first policy was read at
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
  std::optional<net::signal_set> signals;
  std::optional<net::steady_timer> reload_timer;
  FileStamp policy_stamp;
  // Redis tenant tables: the shortest "refresh" the last parse asked for (ns,
  // 0: none) and when the policy was last read (clock->Now()); the reload poll
  // reloads the policy when that is due, so the tables are read again and the
  // new policy swapped in whole.
  std::atomic<int64_t> tenant_refresh_ns{0};
  std::atomic<int64_t> tenant_loaded_ns{0};
  // Set by a tenant table read that failed because Redis could not be reached
  // (OpenPolicy: such a start exits 1, not 2).
  std::atomic<bool> tenant_store_unreachable{false};
  RlsStamps rls_stamps;  // empty without the gRPC frontend
  std::vector<std::thread> threads;
  std::atomic<bool> shutdown_started{false};
  bool started = false;
  bool waited = false;
  uint16_t port = 0;
  uint16_t admin_port = 0;
  std::chrono::milliseconds sweep_interval{250};
  int64_t start_wall_ns = 0;

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
        log->Warn("accept_failed", {{"error", ec.message()}});
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(redirect_error(use_awaitable, ec));
        continue;
      }
      metrics->connections_total.fetch_add(1, std::memory_order_relaxed);
      tcp::endpoint remote = socket.remote_endpoint(ec);
      std::optional<ConnectionLimits::Slot> slot =
          ec ? std::nullopt : connection_limits->TryAcquire(kind, remote.address());
      if (!slot) {
        metrics->connections_refused.fetch_add(1, std::memory_order_relaxed);
        socket.close(ec);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      net::co_spawn(w.ioc, RunSession(*runtimes, w, kind, std::move(socket), std::move(*slot)),
                    net::detached);
    }
  }

  void Sweep(Worker& w) {
    int64_t now = clock->Now();
    bool draining = state.draining.load(std::memory_order_acquire);
    bool force = draining && now > state.drain_deadline_ns.load(std::memory_order_relaxed);
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
      FileStamp now = Stamp(config->policy_path);
      bool changed = now.size >= 0 && !(now == policy_stamp);
      if (changed) policy_stamp = now;  // a broken file is reported once, not on every poll
      if (grpc) {
        RlsStamps rls_now = StampRls(config->rls_config);
        if (rls_now != rls_stamps) {
          rls_stamps = std::move(rls_now);
          changed = true;
        }
      }
      if (changed) {
        net::post(source_pool, [this] { Reload("file_changed"); });
      } else if (const int64_t every = tenant_refresh_ns.load(std::memory_order_relaxed);
                 every > 0 && clock->Now() - tenant_loaded_ns.load() >= every) {
        tenant_loaded_ns.store(clock->Now());  // one refresh in flight, not one a poll
        net::post(source_pool, [this] { Reload("tenant_refresh"); });
      }
      ScheduleReloadPoll();
    });
  }

  void WaitSignal() {
    signals->async_wait([this](boost::system::error_code ec, int signo) {
      if (ec) return;
      if (signo == SIGHUP) {
        policy_stamp = Stamp(config->policy_path);
        if (grpc) rls_stamps = StampRls(config->rls_config);
        net::post(source_pool, [this] { Reload("sighup"); });
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

  // Runs a reload (admin, SIGHUP, file change, the API), logs and counts it;
  // on success the next snapshot is swapped in whole before it returns.
  std::vector<ConfigError> Reload(std::string_view trigger) {
    std::lock_guard<std::mutex> lock(reload_mu);
    return ReloadLocked(trigger, "");
  }

  // The admin API's PUT. Checked first exactly as the reload below will parse
  // it (the same ParsePolicy with the same Redis tenant reader; with the gRPC
  // frontend the rls_config too), so a policy that would not apply is never
  // stored. Then stored (the file replaced; etcd: put only while the key is at
  // the revision just read) and applied from the same bytes; should that
  // reload still fail (a tenant hash changed in between), the stored bytes are
  // put back. The file watch and a restart only ever see a policy that applied.
  std::vector<ConfigError> PutPolicy(std::string_view text, std::string_view actor) {
    std::lock_guard<std::mutex> lock(reload_mu);
    std::vector<ConfigError> errors = CheckPut(text);
    if (!errors.empty()) {
      LogPutFailed(actor, errors);
      return errors;
    }
    Result<StoredPolicy> stored = StorePolicy(text);
    if (!stored.ok()) {
      errors = {{"", stored.status().message()}};
      LogPutFailed(actor, errors);
      return errors;
    }
    const std::string copy(text);
    errors = ReloadLocked("admin_put", actor, &copy);
    if (!errors.empty()) RestorePolicy(*stored, actor);
    // The file watch need not reload what was just written; posted to the
    // thread that owns the stamp (a poll before it only reloads the same bytes).
    if (reload_timer && !etcd_source) {
      net::post(reload_timer->get_executor(),
                [this] { policy_stamp = Stamp(config->policy_path); });
    }
    return errors;
  }

  std::vector<ConfigError> CheckPut(std::string_view text) {
    std::vector<ConfigError> errors = ParsePolicy(text, PutParseOptions()).errors;
    if (grpc) {
      for (ConfigError& e : GrpcFrontend::CheckConfig(*config)) {
        e.path = "rls_config: " + e.path;
        errors.push_back(std::move(e));
      }
    }
    return errors;
  }

  void LogPutFailed(std::string_view actor, const std::vector<ConfigError>& errors) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : errors) list.push_back(e.ToString());
    log->Error("policy_put_failed", {{"actor", std::string(actor)}, {"errors", std::move(list)}});
  }

  // What a PUT replaced: the bytes before it, and (etcd) the revision it wrote.
  struct StoredPolicy {
    std::optional<std::string> before;  // etcd: nullopt when the key did not exist
    int64_t revision = 0;
  };

  Result<StoredPolicy> StorePolicy(std::string_view text) {
    StoredPolicy stored;
    if (etcd_source) {
      Result<etcd::RangeReply> read = etcd::EtcdRange(*etcd_source);
      if (!read.ok()) return read.status();
      const int64_t seen = read->kv ? read->kv->mod_revision : 0;
      if (read->kv) stored.before = read->kv->value;
      Result<int64_t> put = etcd::EtcdPutIfRevision(*etcd_source, text, seen);
      if (!put.ok()) return put.status();
      stored.revision = *put;
      return stored;
    }
    Result<std::string> before = ReadWholeFile(config->policy_path, kMaxPolicyBytes);
    if (!before.ok()) return before.status();
    stored.before = std::move(before).value();
    if (Status written = ReplaceFileAtomically(config->policy_path, text); !written.ok()) {
      return written;
    }
    return stored;
  }

  // Puts back what StorePolicy replaced (etcd: only if nobody wrote the key
  // since), logging the outcome.
  void RestorePolicy(const StoredPolicy& stored, std::string_view actor) {
    Status restored = Status::Ok();
    if (etcd_source) {
      if (stored.before) {
        restored = etcd::EtcdPutIfRevision(*etcd_source, *stored.before, stored.revision).status();
      } else {
        restored = etcd::EtcdDeleteIfRevision(*etcd_source, stored.revision);
      }
    } else {
      restored = ReplaceFileAtomically(config->policy_path, *stored.before);
    }
    nlohmann::json fields = {{"actor", std::string(actor)}, {"source", config->policy_path}};
    if (restored.ok()) {
      log->Warn("policy_put_rolled_back", std::move(fields));
    } else {
      fields["error"] = restored.message();
      log->Error("policy_put_rollback_failed", std::move(fields));
    }
  }

  // Reload's work; reload_mu is held. Every successful reload is one audit
  // line (policy_reloaded) with the version before and after and each rule
  // change (DiffPolicies).
  std::vector<ConfigError> ReloadLocked(std::string_view trigger, std::string_view actor,
                                        const std::string* text = nullptr) {
    std::shared_ptr<const Policy> before = policies->Current();
    const std::string version_before = policies->version();
    // The parse below sets it again if the new policy still reads a hash; a
    // rejected policy leaves the running one, and its refresh, in place.
    const int64_t refresh_before = tenant_refresh_ns.exchange(0);
    tenant_loaded_ns.store(clock->Now());
    std::vector<ConfigError> errors;
    if (text) {
      errors = policies->ReloadFromText(*text);
    } else if (etcd_source) {
      Result<etcd::RangeReply> read = etcd::EtcdRange(*etcd_source);
      if (!read.ok()) {
        errors.push_back({"", read.status().message()});
      } else if (!read->kv) {
        errors.push_back({"", "etcd key " + etcd_source->url.key + " does not exist"});
      } else {
        errors = policies->ReloadFromText(read->kv->value);
      }
    } else {
      errors = policies->Reload();
    }
    if (grpc) {
      for (auto& e : grpc->Reload()) {
        e.path = "rls_config: " + e.path;
        errors.push_back(std::move(e));
      }
    }
    if (!errors.empty()) {
      tenant_refresh_ns.store(refresh_before);
      state.reloads_failed.fetch_add(1, std::memory_order_relaxed);
      nlohmann::json list = nlohmann::json::array();
      for (const auto& e : errors) list.push_back(e.ToString());
      nlohmann::json fields = {{"trigger", std::string(trigger)},
                               {"path", policies->path()},
                               {"errors", std::move(list)},
                               {"generation", policies->generation()},
                               {"version", version_before}};
      if (!actor.empty()) fields["actor"] = std::string(actor);
      log->Error("policy_reload_failed", std::move(fields));
      return errors;
    }
    auto next = std::make_shared<Runtime>(*runtimes->Load());
    next->policy = policies->Current(&next->policy_generation);
    std::shared_ptr<const Policy> after = next->policy;
    runtimes->Swap(std::move(next));
    state.reloads_ok.fetch_add(1, std::memory_order_relaxed);
    nlohmann::json fields = {{"trigger", std::string(trigger)},
                             {"path", policies->path()},
                             {"generation", policies->generation()},
                             {"version_before", version_before},
                             {"version", policies->version()},
                             {"changes", ChangesJson(DiffPolicies(*before, *after))}};
    if (!actor.empty()) fields["actor"] = std::string(actor);
    log->Info("policy_reloaded", std::move(fields));
    LogPolicyWarnings(*after);
    return errors;
  }

  // One `policy_warning` line for each rule of `policy` that can never apply.
  void LogPolicyWarnings(const Policy& policy) {
    for (const ConfigError& w : PolicyWarnings(policy)) {
      log->Warn("policy_warning",
                {{"path", w.path}, {"warning", w.message}, {"version", policies->version()}});
    }
  }

  // The first snapshot, from the config and what Create built for it.
  std::shared_ptr<const Runtime> BuildRuntime(std::shared_ptr<const Gateway> gateway) {
    auto rt = std::make_shared<Runtime>();
    rt->config = config;
    rt->exposure = ExposureOf(*config);
    if (!config->admin_token.empty()) rt->bearer = "Bearer " + config->admin_token;
    rt->admin_hosts = AdminHostNames(*config);
    rt->identities = IdentityRedactor(config->identity_hash_key, config->raw_identities);
    rt->gateway = std::move(gateway);
    rt->policy = policies->Current(&rt->policy_generation);
    rt->policy_source = etcd_source ? config->policy_path : "file:" + config->policy_path;
    rt->enforcer = enforcer.get();
    rt->rollback_fleet = rollback_fleet.get();
    rt->policies = policies.get();
    rt->store = &store;
    rt->async_decisions = store.store->AsyncNative();
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

  // How every parse of the policy reads what it names: value files confined
  // to policy_value_dir, else the policy file's directory (PolicyStore::Open);
  // an etcd policy reads files only with policy_remote_files. Redis tenant
  // tables from the store's Redis; `record_refresh` (not for a PUT's check)
  // notes their refresh for the reload poll.
  PolicyParseOptions ParseOptions(bool record_refresh = true) {
    PolicyParseOptions options;
    options.base_dir = config->policy_value_dir;
    options.files = !PolicyFromEtcd() || config->policy_remote_files;
    options.read_tenant_hash = [this, record_refresh](
                                   const TenantHashRef& ref,
                                   std::vector<std::pair<std::string, std::string>>* entries) {
      if (!store.redis_command) {
        return InvalidArgument("a Redis tenant table needs a Redis store (store: redis://...)");
      }
      if (record_refresh && ref.refresh.count() > 0) {
        int64_t now = tenant_refresh_ns.load();
        while ((now == 0 || ref.refresh.count() < now) &&
               !tenant_refresh_ns.compare_exchange_weak(now, ref.refresh.count())) {
        }
      }
      Status read = ReadTenantHash(store.redis_command, ref.key, entries);
      if (StoreUnreachable(read)) tenant_store_unreachable = true;
      return read;
    };
    return options;
  }

  bool PolicyFromEtcd() const { return config->policy_path.find("://") != std::string::npos; }

  // How a policy given over the network (PUT /v1/policy) is checked: as every
  // reload parses it, but reading value files only with policy_remote_files.
  PolicyParseOptions PutParseOptions() {
    PolicyParseOptions options = ParseOptions(/*record_refresh=*/false);
    options.base_dir = policies->parse_options().base_dir;
    options.files = config->policy_remote_files;
    return options;
  }

  // The policy, the store and the Enforcer deciding with them.
  // The first policy: the file, or the etcd key's current value.
  // An invalid policy is kInvalidArgument (tollgated exits 2); a Redis tenant
  // table that could not be read because Redis is down is not (exit 1: a
  // restart may succeed).
  Status OpenPolicy() {
    tenant_store_unreachable.store(false);
    if (!PolicyFromEtcd()) {  // a URL: CheckServerConfig
      auto opened = PolicyStore::Open(config->policy_path, clock, ParseOptions());
      if (!opened.ok()) return PolicyRefused("invalid policy " + opened.status().message());
      policies = std::move(opened).value();
      return Status::Ok();
    }
    auto url = etcd::ParseEtcdUrl(config->policy_path);
    if (!url.ok())
      return InvalidArgument("policy " + base::RedactUrl(config->policy_path) + ": " +
                             url.status().message());
    etcd::EtcdOptions options;
    options.url = std::move(url).value();
    auto read = etcd::EtcdRange(options);
    if (!read.ok()) return read.status();
    if (!read->kv) return UnavailableError("etcd key " + options.url.key + " does not exist");
    auto opened = PolicyStore::FromText(read->kv->value, clock, ParseOptions());
    if (!opened.ok()) {
      return PolicyRefused("invalid policy in " + config->policy_path + ":\n" +
                           opened.status().message());
    }
    policies = std::move(opened).value();
    etcd_source = std::move(options);
    etcd_revision = read->revision;
    return Status::Ok();
  }

  Status PolicyRefused(std::string message) const {
    if (tenant_store_unreachable.load()) return UnavailableError(std::move(message));
    return InvalidArgument(std::move(message));
  }

  // Watches the etcd key (after Start): each new revision reloads like a file change.
  void WatchEtcd() {
    if (!etcd_source) return;
    etcd_watch = std::make_unique<etcd::EtcdWatch>(
        *etcd_source, etcd_revision,
        [this](int64_t revision, std::string value) {
          std::lock_guard<std::mutex> lock(reload_mu);
          if (value == policies->text()) return;  // already live (read no files to tell)
          ReloadLocked("etcd_watch:" + std::to_string(revision), "", &value);
        },
        [this](const Status& status) {
          log->Warn("policy_source_error",
                    {{"source", config->policy_path}, {"error", status.message()}});
        });
  }

  Status OpenEngine() {
    // The store first: a policy's Redis tenant tables are read through it.
    auto created = CreateStore(*config, clock, io_clock, log);
    if (!created.ok()) return created.status();
    store = std::move(created).value();
    if (Status st = OpenPolicy(); !st.ok()) return st;
    LogPolicyWarnings(*policies->Current());
    tenant_loaded_ns.store(clock->Now());
    policy_stamp = Stamp(config->policy_path);
    auto tracing = DecisionTracer::Create(*config, clock);
    if (!tracing.ok()) return InvalidArgument("tracing: " + tracing.status().message());
    tracer = std::move(tracing).value();
    EnforcerOptions options = MakeEnforcerOptions(*config);
    options.time_store_calls = tracer != nullptr;  // the store span's times
    std::weak_ptr<Logger> weak_log = log;
    options.log = [weak_log](std::string_view message) {
      if (auto l = weak_log.lock()) l->Warn("policy_event", {{"message", std::string(message)}});
    };
    if (Status st = OpenRollbackFleet(); !st.ok()) return st;
    options.on_rollback =
        [weak = std::weak_ptr<RollbackFleet>(rollback_fleet)](const RollbackTransition& change) {
          // An operator's change is sent by the admin endpoint, which reports the outcome.
          if (change.by_operator) return;
          if (auto fleet = weak.lock()) fleet->Publish(FleetChange(change));
        };
    auto made = Enforcer::Create(policies, store.store.get(), clock, std::move(options));
    if (!made.ok()) return made.status();
    enforcer = std::move(made).value();
    return Status::Ok();
  }

  // The fleet's rollback guards in the store's Redis (key <prefix>{rollback}),
  // timed by the I/O clock; the first read waits for Create (SyncRollbackFleet).
  Status OpenRollbackFleet() {
    if (!config->share_rollback || !store.redis_command) return Status::Ok();
    RollbackFleetOptions options;
    options.key = store.key_prefix + "{rollback}";
    options.interval = config->rollback_sync;
    options.clock = io_clock;
    auto fleet = RollbackFleet::Create(std::move(options), store.redis_command,
                                       [this](const RollbackRecord& record) { Adopt(record); });
    if (!fleet.ok()) return fleet.status();
    rollback_fleet = std::move(fleet).value();
    return Status::Ok();
  }

  // Another instance's trip or clear (or this one's, as the fleet stored it).
  void Adopt(const RollbackRecord& record) {
    if (!enforcer || !enforcer->AdoptRollback(AdoptedTransition(record))) return;
    nlohmann::json fields = {{"rule", record.rule},
                             {"tripped", record.tripped},
                             {"trigger", record.trigger},
                             {"origin", record.origin},
                             {"epoch", record.epoch}};
    if (record.tripped) {
      fields["reason"] = record.reason;
      log->Warn("rollback_adopted", std::move(fields));
    } else {
      log->Info("rollback_adopted", std::move(fields));
    }
  }

  // Before serving: the trips the fleet already has apply to the first request.
  void SyncRollbackFleet() {
    if (!rollback_fleet) return;
    if (Status st = rollback_fleet->Sync(); !st.ok()) {
      log->Warn("rollback_fleet_unavailable",
                {{"key", rollback_fleet->key()}, {"error", st.message()}});
    }
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
    return std::shared_ptr<const Gateway>(std::move(gw));
  }

  Status BindListeners() {
    auto& ioc0 = workers[0]->ioc;
    auto main = Bind(ioc0, config->listen, "listen");
    if (!main.ok()) return main.status();
    main_acceptor.emplace(std::move(main).value());
    if (!config->admin_listen.empty()) {
      auto admin = Bind(ioc0, config->admin_listen, "admin");
      if (!admin.ok()) return admin.status();
      admin_acceptor.emplace(std::move(admin).value());
    }
    reload_timer.emplace(ioc0);
    port = main_acceptor->local_endpoint().port();
    if (admin_acceptor) admin_port = admin_acceptor->local_endpoint().port();
    return Status::Ok();
  }

  void Shutdown() {
    bool expected = false;
    if (!shutdown_started.compare_exchange_strong(expected, true)) return;
    state.drain_deadline_ns.store(clock->Now() + Nanos(config->drain_timeout).count());
    state.draining.store(true, std::memory_order_release);
    log->Info("draining", {{"drain_timeout_ms", config->drain_timeout.count()}});
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
    LogLevel level = LogLevel::kInfo;
    ParseLogLevel(config.log_level, &level);
    auto created = Logger::Create(level, config.log_file);
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
  if (Status st = m.OpenEngine(); !st.ok()) return st;
  m.SyncRollbackFleet();
  m.CreateWorkers();
  auto gateway = m.ResolveGateway();
  if (!gateway.ok()) return gateway.status();
  if (!m.config->grpc_listen.empty()) {
    auto grpc = GrpcFrontend::Start(*m.config, m.store.store.get(), clock);
    if (!grpc.ok()) return grpc.status();
    m.grpc = std::move(grpc).value();
    m.rls_stamps = StampRls(m.config->rls_config);
  }
  if (Status st = m.BindListeners(); !st.ok()) return st;
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
  for (auto& w : m.workers) m.ScheduleSweep(*w);
  m.ScheduleReloadPoll();
  m.WatchEtcd();
  if (m.rollback_fleet) m.rollback_fleet->Start();
  nlohmann::json info = {{"listen", m.main_acceptor->local_endpoint().address().to_string() + ":" +
                                        std::to_string(port())},
                         {"threads", m.workers.size()},
                         {"store", m.store.description},
                         {"failure_mode", m.config->failure_mode},
                         {"policy", m.config->policy_path},
                         {"policy_generation", m.policies->generation()},
                         {"headers", m.config->header_style},
                         {"rollback_scope", m.rollback_fleet ? "fleet" : "instance"}};
  if (m.admin_acceptor) {
    info["admin"] = m.admin_acceptor->local_endpoint().address().to_string() + ":" +
                    std::to_string(admin_port());
  }
  if (!m.config->upstream.empty()) info["upstream"] = m.config->upstream;
  if (m.grpc) info["grpc"] = m.grpc->address();
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
  m.etcd_watch.reset();
  if (m.rollback_fleet) m.rollback_fleet->Stop();
  m.source_pool.join();
  m.admin_pool.join();
  if (m.grpc) m.grpc->Shutdown();
  m.log->Info("stopped", {{"connections_total", m.metrics->connections_total.load()}});
  m.log->Flush();
}

std::vector<ConfigError> Server::Reload() { return impl_->Reload("api"); }

uint16_t Server::port() const { return impl_->port; }
uint16_t Server::admin_port() const { return impl_->admin_port; }
Enforcer& Server::enforcer() { return *impl_->enforcer; }
const ServerConfig& Server::config() const { return *impl_->config; }

}  // namespace tollgate::server
