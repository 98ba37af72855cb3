#include "tollgate/runtime.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/redact.h"
#include "policy/policy_impl.h"
#include "runtime/etcd_watch.h"
#include "runtime/file_stamp.h"
#include "runtime/policy_file.h"
#include "runtime/state_lock.h"
#include "runtime/store_bundle.h"
#include "runtime/tenant_hash.h"

namespace tollgate {

using json = nlohmann::json;
using runtime::StoreBundle;

RollbackChange FleetChange(const RollbackTransition& change) {
  RollbackChange out;
  out.rule = change.rule;
  out.fingerprint = change.fingerprint;
  out.tripped = change.tripped;
  out.trigger = change.tripped || change.by_operator
                    ? std::string(RollbackTriggerName(change.tripped ? change.trigger
                                                                     : RollbackTrigger::kAdmin))
                    : "none";
  out.reason = change.reason;
  return out;
}

RollbackTransition AdoptedTransition(const RollbackRecord& record) {
  RollbackTransition out;
  out.rule = record.rule;
  out.fingerprint = record.fingerprint;
  out.tripped = record.tripped;
  out.trigger = RollbackTriggerFromName(record.trigger);
  out.reason = record.reason;
  out.origin = record.origin;
  return out;
}

namespace {

bool IsEtcdLocation(const std::string& location) {
  return location.find("://") != std::string::npos;
}

json ErrorList(const std::vector<ConfigError>& errors) {
  json list = json::array();
  for (const auto& e : errors) list.push_back(e.ToString());
  return list;
}

void Emit(const RuntimeEnv& env, RuntimeEvent::Level level, std::string_view name,
          const json& fields) {
  if (!env.on_event) return;
  const std::string text = fields.dump();
  env.on_event(RuntimeEvent{level, name, text});
}

// The store's callbacks: one event per breaker transition, never per request.
StoreEnv StoreEnvOf(const RuntimeEnv& env) {
  StoreEnv store_env;
  store_env.clock = env.clock;
  store_env.io_clock = env.io_clock;
  store_env.on_breaker = [env](const BreakerTransition& t) {
    const json fields = {{"from", std::string(BreakerStateName(t.from))},
                         {"to", std::string(BreakerStateName(t.to))},
                         {"reason", std::string(BreakerReasonName(t.reason))}};
    Emit(env, t.to == BreakerState::kOpen ? RuntimeEvent::Level::kWarn : RuntimeEvent::Level::kInfo,
         "breaker_transition", fields);
  };
  store_env.warn = [env](std::string_view event, const Status& why) {
    Emit(env, RuntimeEvent::Level::kWarn, event, {{"error", why.ToString()}});
  };
  return store_env;
}

}  // namespace

class Runtime::Impl {
 public:
  Impl(RuntimeOptions o, RuntimeEnv e) : options(std::move(o)), env(std::move(e)) {}

  const RuntimeOptions options;
  const RuntimeEnv env;
  StoreBundle store;
  std::shared_ptr<PolicyStore> policies;
  // The one Enforcer, for HTTP and every other front end (the Envoy adapter
  // decides on it through an Enforcer::FrontEnd of its own).
  std::unique_ptr<Enforcer> enforcer;
  // Declared after the Enforcer, which its thread adopts into, so it goes
  // first; Stop ends its thread. Shared: the Enforcer's on_rollback holds it weakly.
  std::shared_ptr<RollbackFleet> rollback_fleet;
  std::string policy_source;
  std::optional<CompanionConfig> companion;
  std::mutex reload_mu;  // one reload, PUT or watch delivery at a time
  // Reload attempts by result, counted after on_reloaded (the host's view is
  // then up to date).
  std::atomic<uint64_t> reloads_ok{0};
  std::atomic<uint64_t> reloads_failed{0};
  // The policy file and watch_files as SourceChanged last saw them.
  std::mutex stamp_mu;
  runtime::FileStamp policy_stamp;   // guarded by stamp_mu
  runtime::FileStamps watch_stamps;  // guarded by stamp_mu
  // The policy source when it is an etcd key (then the watch delivers new revisions).
  std::optional<etcd::EtcdOptions> etcd_source;
  std::unique_ptr<etcd::EtcdWatch> etcd_watch;
  int64_t etcd_revision = 0;  // the revision the first policy was read at
  // Redis tenant tables: the shortest "refresh" the last parse asked for (ns,
  // 0: none) and when the policy was last read (clock->Now()).
  std::atomic<int64_t> tenant_refresh_ns{0};
  std::atomic<int64_t> tenant_loaded_ns{0};
  // Set by a tenant table read that failed because Redis could not be reached
  // (OpenPolicy: such a start is kUnavailable, not kInvalidArgument).
  std::atomic<bool> tenant_store_unreachable{false};

  // The local store's state file (RuntimeOptions::local_state): what was
  // loaded at start, the saves since, and the thread that saves periodically.
  struct StateCounters {
    std::atomic<uint64_t> saves{0};
    std::atomic<uint64_t> save_failures{0};
    std::atomic<int64_t> last_save_ns{0};
    std::atomic<uint64_t> last_save_bytes{0};
    std::atomic<uint64_t> last_save_entries{0};
    LocalStateLoaded loaded;  // written once, before the Runtime is returned
    bool load_failed = false;
  };
  StateCounters state;
  std::mutex save_mu;  // one save at a time (the interval's and the drain's)
  std::mutex saver_mu;
  std::condition_variable saver_cv;
  bool saver_stop = false;  // guarded by saver_mu
  std::thread saver;
  std::unique_ptr<runtime::StateFileLock> state_lock;  // held from before the load to the end

  // The policy source is a file (not etcd, not inline text).
  bool PolicyFile() const { return !options.policy.location.empty() && !etcd_source; }

  bool Persisting() const { return store.local != nullptr && !options.local_state.file.empty(); }

  // At start, before anything decides: the file's lock (waiting for the
  // process being replaced to save and exit), then the file, if there is
  // one, into the empty local store. A file that cannot be loaded is one
  // event and an empty start; a lock still held after lock_wait fails Create.
  Status LoadState() {
    if (!Persisting()) return Status::Ok();
    const std::string& file = options.local_state.file;
    auto locked = runtime::StateFileLock::Acquire(
        file, options.local_state.lock_wait, *env.io_clock, [this, &file](const std::string& pid) {
          Event(RuntimeEvent::Level::kInfo, "state_lock_wait",
                {{"file", file},
                 {"holder_pid", pid},
                 {"wait_ms", options.local_state.lock_wait.count()}});
        });
    if (!locked.ok()) return locked.status();
    state_lock = std::move(locked).value();
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 && errno == ENOENT) {
      Event(RuntimeEvent::Level::kInfo, "state_loaded",
            {{"file", file}, {"found", false}, {"loaded", 0}});
      return Status::Ok();
    }
    std::shared_ptr<const Policy> policy = policies->Current();
    const bool keep_others = options.envoy;
    LocalStateLoadOptions load;
    load.keep_group = [policy, keep_others](std::string_view group) {
      return keep_others || policy->Find(group) >= 0;
    };
    auto loaded = store.local->Load(file, load);
    if (!loaded.ok()) {
      state.load_failed = true;
      Event(RuntimeEvent::Level::kError, "state_load_failed",
            {{"file", file},
             {"error", loaded.status().message()},
             {"action", "starting with an empty local store"}});
      return Status::Ok();
    }
    state.loaded = *loaded;
    Event(RuntimeEvent::Level::kInfo, "state_loaded",
          {{"file", file},
           {"found", true},
           {"loaded", loaded->loaded},
           {"dropped_rule", loaded->dropped_group},
           {"dropped_expired", loaded->dropped_expired},
           {"dropped_no_room", loaded->dropped_no_room},
           {"saved_age_s", double(env.clock->WallNow() - loaded->saved_wall_ns) / 1e9}});
    return Status::Ok();
  }

  Status SaveState(std::string_view trigger) {
    if (!Persisting()) return Status::Ok();
    std::lock_guard<std::mutex> lock(save_mu);
    const int64_t start = env.io_clock->Now();
    auto saved = store.local->Save(options.local_state.file);
    const int64_t took = env.io_clock->Now() - start;
    if (!saved.ok()) {
      state.save_failures.fetch_add(1);
      Event(RuntimeEvent::Level::kError, "state_save_failed",
            {{"file", options.local_state.file},
             {"trigger", std::string(trigger)},
             {"error", saved.status().message()}});
      return saved.status();
    }
    const size_t entries = saved->buckets + saved->windows + saved->logs;
    state.last_save_ns.store(took);
    state.last_save_bytes.store(saved->bytes);
    state.last_save_entries.store(entries);
    state.saves.fetch_add(1);
    Event(trigger == "interval" ? RuntimeEvent::Level::kDebug : RuntimeEvent::Level::kInfo,
          "state_saved",
          {{"file", options.local_state.file},
           {"trigger", std::string(trigger)},
           {"entries", entries},
           {"bytes", saved->bytes},
           {"duration_ms", double(took) / 1e6}});
    return Status::Ok();
  }

  void StartSaver() {
    if (!Persisting() || options.local_state.save_interval.count() <= 0 || saver.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(saver_mu);
      saver_stop = false;
    }
    saver = std::thread([this] {
      const int64_t interval = Nanos(options.local_state.save_interval).count();
      std::unique_lock<std::mutex> lock(saver_mu);
      for (;;) {
        const int64_t deadline = env.io_clock->Now() + interval;
        if (env.io_clock->WaitUntil(lock, saver_cv, deadline, [this] { return saver_stop; })) {
          return;
        }
        lock.unlock();
        (void)SaveState("interval");  // a failure is its own event and counter
        lock.lock();
        if (saver_stop) return;
      }
    });
  }

  void StopSaver() {
    {
      std::lock_guard<std::mutex> lock(saver_mu);
      saver_stop = true;
    }
    saver_cv.notify_all();
    if (saver.joinable()) saver.join();
  }

  // Exported whether or not a state file is configured (zeros without one), so
  // an alert on them exists before the file does and every store shows the same families.
  void WriteStateMetrics(PrometheusWriter& w) const {
    w.Family("tollgate_state_saves_total", "counter",
             "Saves of the local store's state file (store.local_state_file), by result.");
    w.Sample("tollgate_state_saves_total", {"result", "ok"}, state.saves.load());
    w.Sample("tollgate_state_saves_total", {"result", "error"}, state.save_failures.load());
    w.Family("tollgate_state_last_save_seconds", "gauge",
             "How long the last successful state save took.");
    w.Sample("tollgate_state_last_save_seconds", double(state.last_save_ns.load()) / 1e9);
    w.Family("tollgate_state_last_save_bytes", "gauge", "The size of the last state file saved.");
    w.Sample("tollgate_state_last_save_bytes", double(state.last_save_bytes.load()));
    w.Family("tollgate_state_last_save_entries", "gauge",
             "Keys (buckets, windows, logs) in the last state file saved.");
    w.Sample("tollgate_state_last_save_entries", double(state.last_save_entries.load()));
    w.Family("tollgate_state_load_entries", "gauge",
             "Entries of the state file read at start: loaded, or dropped and why.");
    w.Sample("tollgate_state_load_entries", {"result", "loaded"}, double(state.loaded.loaded));
    w.Sample("tollgate_state_load_entries", {"result", "dropped_rule"},
             double(state.loaded.dropped_group));
    w.Sample("tollgate_state_load_entries", {"result", "dropped_expired"},
             double(state.loaded.dropped_expired));
    w.Sample("tollgate_state_load_entries", {"result", "dropped_no_room"},
             double(state.loaded.dropped_no_room));
    w.Family("tollgate_state_load_failed", "gauge",
             "1 when the state file was refused at start (tollgated started empty).");
    w.Sample("tollgate_state_load_failed", state.load_failed ? 1.0 : 0.0);
  }

  bool PolicyFromEtcd() const { return IsEtcdLocation(options.policy.location); }

  void Event(RuntimeEvent::Level level, std::string_view name, const json& fields) const {
    Emit(env, level, name, fields);
  }

  // How every parse of the policy reads what it names: value files confined
  // to value_dir, else the policy file's directory (PolicyStore::Open); an
  // etcd or inline policy reads files only with remote_files. Redis tenant
  // tables from the store's Redis; `record_refresh` (not for a PUT's check)
  // notes their refresh for TenantRefreshDue.
  PolicyParseOptions ParseOptions(bool record_refresh = true) {
    PolicyParseOptions parse;
    parse.base_dir = options.policy.value_dir;
    parse.files =
        !(PolicyFromEtcd() || options.policy.location.empty()) || options.policy.remote_files;
    parse.read_tenant_hash = [this, record_refresh](
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
      Status read = runtime::ReadTenantHash(store.redis_command, ref.key, entries);
      if (runtime::StoreUnreachable(read)) tenant_store_unreachable = true;
      return read;
    };
    return parse;
  }

  PolicyParseOptions PutParseOptions() {
    PolicyParseOptions parse = ParseOptions(/*record_refresh=*/false);
    parse.base_dir = policies->parse_options().base_dir;
    parse.files = options.policy.remote_files;
    return parse;
  }

  Status PolicyRefused(std::string message) const {
    if (tenant_store_unreachable.load()) return UnavailableError(std::move(message));
    return InvalidArgument(std::move(message));
  }

  // The first policy: the file, the etcd key's current value, or the text.
  Status OpenPolicy() {
    tenant_store_unreachable.store(false);
    const std::string& location = options.policy.location;
    if (location.empty()) {
      if (!options.policy.text) return InvalidArgument("policy: no location and no text");
      auto opened = PolicyStore::FromText(*options.policy.text, env.clock, ParseOptions());
      if (!opened.ok()) return PolicyRefused("invalid policy " + opened.status().message());
      policies = std::move(opened).value();
      policy_source = "inline";
      return Status::Ok();
    }
    if (!PolicyFromEtcd()) {
      auto opened = PolicyStore::Open(location, env.clock, ParseOptions());
      if (!opened.ok()) return PolicyRefused("invalid policy " + opened.status().message());
      policies = std::move(opened).value();
      policy_source = "file:" + location;
      return Status::Ok();
    }
    auto url = etcd::ParseEtcdUrl(location);
    if (!url.ok()) {
      return InvalidArgument("policy " + base::RedactUrl(location) + ": " + url.status().message());
    }
    etcd::EtcdOptions etcd_options;
    etcd_options.url = std::move(url).value();
    std::vector<ConfigError> errors;
    etcd_options.session =
        etcd::EtcdSession::Create(options.policy.etcd, etcd_options.url.tls, &errors);
    if (!errors.empty()) {
      std::string message;
      for (const ConfigError& e : errors) message += (message.empty() ? "" : "; ") + e.ToString();
      return InvalidArgument(message);
    }
    etcd_options.io_timeout = options.policy.etcd.timeout;
    auto read = etcd::EtcdRange(etcd_options);
    if (!read.ok()) return read.status();
    if (!read->kv) return UnavailableError("etcd key " + etcd_options.url.key + " does not exist");
    auto opened = PolicyStore::FromText(read->kv->value, env.clock, ParseOptions());
    if (!opened.ok()) {
      return PolicyRefused("invalid policy in " + location + ":\n" + opened.status().message());
    }
    policies = std::move(opened).value();
    etcd_source = std::move(etcd_options);
    etcd_revision = read->revision;
    policy_source = location;
    return Status::Ok();
  }

  Status Open() {
    // The store first: a policy's Redis tenant tables are read through it.
    auto created = runtime::CreateStore(options.store, StoreEnvOf(env));
    if (!created.ok()) return created.status();
    store = std::move(created).value();
    if (Status st = OpenPolicy(); !st.ok()) return st;
    LogPolicyWarnings(*policies->Current());
    if (Status st = LoadState(); !st.ok()) return st;  // before anything decides
    tenant_loaded_ns.store(env.clock->Now());
    EnforcerOptions enforcer_options = options.enforcer;
    enforcer_options.log = [this](std::string_view message) {
      Event(RuntimeEvent::Level::kWarn, "policy_event", {{"message", std::string(message)}});
    };
    if (Status st = OpenRollbackFleet(); !st.ok()) return st;
    enforcer_options.on_rollback =
        [weak = std::weak_ptr<RollbackFleet>(rollback_fleet),
         also = options.enforcer.on_rollback](const RollbackTransition& change) {
          if (also) also(change);
          // An operator's change is sent by the admin endpoint, which reports the outcome.
          if (change.by_operator) return;
          if (auto fleet = weak.lock()) fleet->Publish(FleetChange(change));
        };
    auto made =
        Enforcer::Create(policies, store.store.get(), env.clock, std::move(enforcer_options));
    if (!made.ok()) return made.status();
    enforcer = std::move(made).value();
    return Status::Ok();
  }

  // The companion's compile as the PolicyStore calls it: errors prefixed by
  // its name. Null without a companion (the attachment in place stays).
  PolicyStore::Attach CompanionAttach() const {
    if (!companion) return nullptr;
    return [this](PolicyStore::Attachment* out) {
      std::vector<ConfigError> errors = companion->compile(out);
      for (ConfigError& e : errors) e.path = companion->name + ": " + e.path;
      return errors;
    };
  }

  // The fleet's rollback guards in the store's Redis (key <prefix>{rollback}),
  // timed by the I/O clock.
  Status OpenRollbackFleet() {
    if (!options.fleet.share_rollback || !store.redis_command) return Status::Ok();
    RollbackFleetOptions fleet_options;
    fleet_options.key = store.key_prefix + "{rollback}";
    fleet_options.interval = options.fleet.rollback_sync;
    fleet_options.clock = env.io_clock;
    auto fleet = RollbackFleet::Create(std::move(fleet_options), store.redis_command,
                                       [this](const RollbackRecord& record) { Adopt(record); });
    if (!fleet.ok()) return fleet.status();
    rollback_fleet = std::move(fleet).value();
    return Status::Ok();
  }

  // Another instance's trip or clear (or this one's, as the fleet stored it).
  void Adopt(const RollbackRecord& record) {
    if (!enforcer || !enforcer->AdoptRollback(AdoptedTransition(record))) return;
    json fields = {{"rule", record.rule},
                   {"tripped", record.tripped},
                   {"trigger", record.trigger},
                   {"origin", record.origin},
                   {"epoch", record.epoch}};
    if (record.tripped) {
      fields["reason"] = record.reason;
      Event(RuntimeEvent::Level::kWarn, "rollback_adopted", fields);
    } else {
      Event(RuntimeEvent::Level::kInfo, "rollback_adopted", fields);
    }
  }

  // Watches the etcd key: each new revision reloads like a file change.
  void WatchEtcd() {
    if (!etcd_source || etcd_watch) return;
    etcd_watch = std::make_unique<etcd::EtcdWatch>(
        *etcd_source, etcd_revision,
        [this](int64_t revision, std::string value) {
          std::lock_guard<std::mutex> lock(reload_mu);
          if (value == policies->text()) return;  // already live (read no files to tell)
          ReloadLocked("etcd_watch:" + std::to_string(revision), "", &value);
        },
        [this](const Status& status) {
          Event(RuntimeEvent::Level::kWarn, "policy_source_error",
                {{"source", options.policy.location}, {"error", status.message()}});
        });
  }

  // One `policy_warning` event for each rule of `policy` that can never apply.
  void LogPolicyWarnings(const Policy& policy) {
    for (const ConfigError& w : PolicyWarnings(policy)) {
      Event(RuntimeEvent::Level::kWarn, "policy_warning",
            {{"path", w.path}, {"warning", w.message}, {"version", policies->version()}});
    }
  }

  // A reload's work; reload_mu is held. Every reload is one audit event
  // (policy_reloaded with the version before and after and each rule change,
  // or policy_reload_failed), after on_reloaded has run.
  std::vector<ConfigError> ReloadLocked(std::string_view trigger, std::string_view actor,
                                        const std::string* text = nullptr) {
    std::shared_ptr<const Policy> before = policies->Current();
    const std::string version_before = policies->version();
    // The parse below sets it again if the new policy still reads a hash; a
    // rejected policy leaves the running one, and its refresh, in place.
    const int64_t refresh_before = tenant_refresh_ns.exchange(0);
    tenant_loaded_ns.store(env.clock->Now());
    // The policy and the companion's configuration are installed by one
    // PolicyStore swap (one generation), or neither is.
    const PolicyStore::Attach attach = CompanionAttach();
    std::vector<ConfigError> errors;
    if (text) {
      errors = policies->ReloadFromText(*text, attach);
    } else if (etcd_source) {
      Result<etcd::RangeReply> read = etcd::EtcdRange(*etcd_source);
      if (!read.ok()) {
        errors.push_back({"", read.status().message()});
      } else if (!read->kv) {
        errors.push_back({"", "etcd key " + etcd_source->url.key + " does not exist"});
      } else {
        errors = policies->ReloadFromText(read->kv->value, attach);
      }
    } else if (options.policy.location.empty()) {
      errors = policies->ReloadFromText(policies->text(), attach);
    } else {
      errors = policies->Reload(attach);
    }
    if (errors.empty() && companion && companion->installed) companion->installed();
    if (env.on_reloaded) env.on_reloaded(errors);
    (errors.empty() ? reloads_ok : reloads_failed).fetch_add(1, std::memory_order_relaxed);
    if (!errors.empty()) {
      tenant_refresh_ns.store(refresh_before);
      json fields = {{"trigger", std::string(trigger)},
                     {"path", policies->path()},
                     {"errors", ErrorList(errors)},
                     {"generation", policies->generation()},
                     {"version", version_before}};
      if (!actor.empty()) fields["actor"] = std::string(actor);
      Event(RuntimeEvent::Level::kError, "policy_reload_failed", fields);
      return errors;
    }
    std::shared_ptr<const Policy> after = policies->Current();
    json fields = {{"trigger", std::string(trigger)},
                   {"path", policies->path()},
                   {"generation", policies->generation()},
                   {"version_before", version_before},
                   {"version", policies->version()},
                   {"changes", json::parse(PolicyDiffJson(DiffPolicies(*before, *after)))}};
    if (!actor.empty()) fields["actor"] = std::string(actor);
    Event(RuntimeEvent::Level::kInfo, "policy_reloaded", fields);
    LogPolicyWarnings(*after);
    return errors;
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
    const std::string& path = options.policy.location;
    if (path.empty()) {  // inline: nothing to write back
      stored.before = policies->text();
      return stored;
    }
    Result<std::string> before = runtime::ReadWholeFile(path, kMaxPolicyBytes);
    if (!before.ok()) return before.status();
    stored.before = std::move(before).value();
    if (Status written = runtime::ReplaceFileAtomically(path, text); !written.ok()) {
      return written;
    }
    return stored;
  }

  // Puts back what StorePolicy replaced (etcd: only if nobody wrote the key
  // since), with an event saying how it went.
  void RestorePolicy(const StoredPolicy& stored, std::string_view actor) {
    const std::string& path = options.policy.location;
    Status restored = Status::Ok();
    if (etcd_source) {
      if (stored.before) {
        restored = etcd::EtcdPutIfRevision(*etcd_source, *stored.before, stored.revision).status();
      } else {
        restored = etcd::EtcdDeleteIfRevision(*etcd_source, stored.revision);
      }
    } else if (!path.empty()) {
      restored = runtime::ReplaceFileAtomically(path, *stored.before);
    }
    json fields = {{"actor", std::string(actor)}, {"source", path}};
    if (restored.ok()) {
      Event(RuntimeEvent::Level::kWarn, "policy_put_rolled_back", fields);
    } else {
      fields["error"] = restored.message();
      Event(RuntimeEvent::Level::kError, "policy_put_rollback_failed", fields);
    }
  }

  std::vector<ConfigError> CheckPut(std::string_view text) {
    std::vector<ConfigError> errors = ParsePolicy(text, PutParseOptions()).errors;
    if (companion) {
      for (ConfigError& e : companion->check()) {
        e.path = companion->name + ": " + e.path;
        errors.push_back(std::move(e));
      }
    }
    return errors;
  }

  void LogPutFailed(std::string_view actor, const std::vector<ConfigError>& errors) {
    Event(RuntimeEvent::Level::kError, "policy_put_failed",
          {{"actor", std::string(actor)}, {"errors", ErrorList(errors)}});
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Runtime::~Runtime() {
  Stop();
  // The store goes before the Enforcer: its I/O thread may still be finishing
  // a call whose callback writes the Enforcer's rule state (an asynchronous
  // lease release after the response; ASan saw it write a freed RuleState
  // when the Enforcer went first). Destroying the store joins that thread.
  impl_->store = StoreBundle{};
}

Result<std::unique_ptr<Runtime>> Runtime::Create(RuntimeOptions options, RuntimeEnv env) {
  if (env.clock == nullptr || env.io_clock == nullptr) {
    return InvalidArgument("Runtime::Create: clock and io_clock must not be null");
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(env));
  if (Status st = impl->Open(); !st.ok()) return st;
  auto runtime = std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
  runtime->MarkSourceSeen();
  return runtime;
}

std::vector<ConfigError> Runtime::CheckPolicySource(const PolicySourceOptions& policy) {
  std::vector<ConfigError> errors;
  if (IsEtcdLocation(policy.location)) {
    // etcd:// or etcds://, with the credentials and TLS files of `etcd`
    // readable and usable. The key is read at start-up, not here.
    if (auto url = etcd::ParseEtcdUrl(policy.location); !url.ok()) {
      errors.push_back({"policy", url.status().message()});
    } else {
      etcd::EtcdSession::Create(policy.etcd, url->tls, &errors);
    }
  } else if (!policy.location.empty()) {
    ParsedPolicy parsed =
        ParsePolicyFile(policy.location, PolicyParseOptions{.base_dir = policy.value_dir});
    for (const ConfigError& e : parsed.errors) {
      errors.push_back(
          {e.path.empty() ? policy.location : policy.location + ": " + e.path, e.message});
    }
  } else if (policy.text) {
    PolicyParseOptions parse;
    parse.files = policy.remote_files;
    parse.base_dir = policy.value_dir;
    for (const ConfigError& e : ParsePolicy(*policy.text, parse).errors) {
      errors.push_back({e.path.empty() ? "policy" : "policy: " + e.path, e.message});
    }
  }
  return errors;
}

std::vector<ConfigError> Runtime::Check(const RuntimeOptions& options) {
  std::vector<ConfigError> errors;
  if (Status store = CheckStoreSpec(options.store); !store.ok()) {
    std::string_view why = store.message();
    if (why.starts_with("store: ")) why.remove_prefix(7);
    errors.push_back({"store", std::string(why)});
  }
  for (ConfigError& e : CheckPolicySource(options.policy)) errors.push_back(std::move(e));
  return errors;
}

std::vector<ConfigError> Runtime::CheckTenantTables(const RuntimeOptions& options,
                                                    std::string* unchecked) {
  const std::string& location = options.policy.location;
  if (location.empty() || IsEtcdLocation(location)) return {};
  std::optional<StoreBundle> store;  // opened for the first table
  PolicyParseOptions parse{.base_dir = options.policy.value_dir};
  parse.read_tenant_hash = [&](const TenantHashRef& ref,
                               std::vector<std::pair<std::string, std::string>>* entries) {
    if (!unchecked->empty()) return Status::Ok();  // the store is out of reach
    if (!store) {
      auto created = runtime::CreateStore(options.store, StoreEnv{});
      if (!created.ok()) {
        *unchecked = "tenant tables not checked: " + created.status().message();
        return Status::Ok();
      }
      store = std::move(created).value();
    }
    if (!store->redis_command) {
      return InvalidArgument("a Redis tenant table needs a Redis store (store: redis://...)");
    }
    Status read = runtime::ReadTenantHash(store->redis_command, ref.key, entries);
    if (runtime::StoreUnreachable(read)) {
      *unchecked = "tenant tables not checked: the store did not answer (" + read.message() + ")";
      entries->clear();
      return Status::Ok();
    }
    return read;
  };
  std::vector<ConfigError> errors;
  for (const ConfigError& e : ParsePolicyFile(location, parse).errors) {
    errors.push_back({location + ": " + e.path, e.message});
  }
  return errors;
}

void Runtime::SyncRollbackFleet() {
  Impl& m = *impl_;
  if (!m.rollback_fleet) return;
  if (Status st = m.rollback_fleet->Sync(); !st.ok()) {
    m.Event(RuntimeEvent::Level::kWarn, "rollback_fleet_unavailable",
            {{"key", m.rollback_fleet->key()}, {"error", st.message()}});
  }
}

void Runtime::Start() {
  impl_->WatchEtcd();
  if (impl_->rollback_fleet) impl_->rollback_fleet->Start();
  impl_->StartSaver();
}

void Runtime::Stop() {
  impl_->etcd_watch.reset();
  if (impl_->rollback_fleet) impl_->rollback_fleet->Stop();
  impl_->StopSaver();
}

Status Runtime::SaveState(std::string_view trigger) { return impl_->SaveState(trigger); }

std::vector<ConfigError> Runtime::Reload(std::string_view trigger) {
  std::lock_guard<std::mutex> lock(impl_->reload_mu);
  return impl_->ReloadLocked(trigger, "");
}

// Checked first exactly as the reload below will parse it (the same parse
// with the same Redis tenant reader; the companion's check too), so a policy
// that would not apply is never stored. Then stored (the file replaced; etcd:
// put only while the key is at the revision just read) and applied from the
// same bytes; should that reload still fail (a tenant hash changed in
// between), the stored bytes are put back.
std::vector<ConfigError> Runtime::PutPolicy(std::string_view text, std::string_view actor,
                                            bool* written) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.reload_mu);
  if (written) *written = false;
  std::vector<ConfigError> errors = m.CheckPut(text);
  if (!errors.empty()) {
    m.LogPutFailed(actor, errors);
    return errors;
  }
  Result<Impl::StoredPolicy> stored = m.StorePolicy(text);
  if (!stored.ok()) {
    errors = {{"", stored.status().message()}};
    m.LogPutFailed(actor, errors);
    return errors;
  }
  if (written) *written = true;
  const std::string copy(text);
  errors = m.ReloadLocked("admin_put", actor, &copy);
  if (!errors.empty()) m.RestorePolicy(*stored, actor);
  if (m.PolicyFile()) {  // the file watch need not reload what was just written
    std::lock_guard<std::mutex> stamp_lock(m.stamp_mu);
    m.policy_stamp = runtime::StampFile(m.options.policy.location);
  }
  return errors;
}

Runtime::PolicyPreview Runtime::PreviewPolicy(std::string_view text) const {
  PolicyParseOptions options = impl_->PutParseOptions();
  options.read_tenant_hash = nullptr;
  ParsedPolicy parsed = ParsePolicy(text, options);
  PolicyPreview preview;
  preview.version_before = impl_->policies->version();
  if (!parsed.policy) {
    preview.errors = std::move(parsed.errors);
    if (preview.errors.empty()) preview.errors.push_back({"", "the policy was not parsed"});
    return preview;
  }
  preview.version = parsed.version;
  preview.changes = DiffPolicies(*impl_->policies->Current(), *parsed.policy);
  preview.warnings = PolicyWarnings(*parsed.policy);
  return preview;
}

std::vector<ConfigError> Runtime::AttachCompanion(CompanionConfig companion) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.reload_mu);
  std::vector<ConfigError> errors = m.policies->SetAttachment(companion.compile);
  if (errors.empty()) m.companion = std::move(companion);
  return errors;
}

bool Runtime::SourceChanged() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.stamp_mu);
  bool changed = false;
  if (m.PolicyFile()) {
    const runtime::FileStamp now = runtime::StampFile(m.options.policy.location);
    changed = now.size >= 0 && !(now == m.policy_stamp);
    if (changed) m.policy_stamp = now;
  }
  if (!m.options.policy.watch_files.empty()) {
    runtime::FileStamps now = runtime::StampFiles(m.options.policy.watch_files);
    if (now != m.watch_stamps) {
      m.watch_stamps = std::move(now);
      changed = true;
    }
  }
  return changed;
}

void Runtime::MarkSourceSeen() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.stamp_mu);
  if (m.PolicyFile()) m.policy_stamp = runtime::StampFile(m.options.policy.location);
  m.watch_stamps = runtime::StampFiles(m.options.policy.watch_files);
}

bool Runtime::TenantRefreshDue() {
  Impl& m = *impl_;
  const int64_t every = m.tenant_refresh_ns.load(std::memory_order_relaxed);
  if (every <= 0 || m.env.clock->Now() - m.tenant_loaded_ns.load() < every) return false;
  m.tenant_loaded_ns.store(m.env.clock->Now());  // one refresh in flight, not one a poll
  return true;
}

Runtime::View Runtime::view() const {
  PolicyStore::Snapshot s = impl_->policies->snapshot();
  return View{std::move(s.policy), s.generation, std::move(s.attachment)};
}

Enforcer& Runtime::enforcer() const { return *impl_->enforcer; }
PolicyStore& Runtime::policies() const { return *impl_->policies; }
Store& Runtime::store() const { return *impl_->store.store; }
PolicyParseOptions Runtime::PutParseOptions() const { return impl_->PutParseOptions(); }
const std::string& Runtime::policy_source() const { return impl_->policy_source; }
bool Runtime::policy_from_etcd() const { return impl_->etcd_source.has_value(); }
const std::string& Runtime::store_description() const { return impl_->store.description; }
bool Runtime::StoreHealthy() const { return impl_->store.store->Healthy(); }

bool Runtime::BackingHealthy() const {
  const StoreBundle& s = impl_->store;
  return s.backing_healthy ? s.backing_healthy() : s.store->Healthy();
}

bool Runtime::Ready() const { return StoreHealthy() || !impl_->store.fail_closed; }
const std::string& Runtime::key_prefix() const { return impl_->store.key_prefix; }
RollbackFleet* Runtime::rollback_fleet() const { return impl_->rollback_fleet.get(); }
const RedisCommand& Runtime::redis_command() const { return impl_->store.redis_command; }

void Runtime::WriteStoreMetrics(PrometheusWriter& w) const {
  if (impl_->store.export_metrics) impl_->store.export_metrics(w);
  impl_->WriteStateMetrics(w);
}

void Runtime::WritePolicyMetrics(PrometheusWriter& w) const {
  const PolicyStore& policies = *impl_->policies;
  w.Family("tollgate_policy_reloads_total", "counter", "Policy reloads by result.");
  w.Sample("tollgate_policy_reloads_total", {"result", "success"},
           impl_->reloads_ok.load(std::memory_order_relaxed));
  w.Sample("tollgate_policy_reloads_total", {"result", "failure"},
           impl_->reloads_failed.load(std::memory_order_relaxed));
  w.Family("tollgate_policy_generation", "gauge",
           "Generation of the live policy (1 = as started).");
  w.Sample("tollgate_policy_generation", double(policies.generation()));
  const PolicyStore::ReloadResult last = policies.last_reload();
  w.Family("tollgate_policy_last_reload_success", "gauge",
           "1 if the last reload attempt succeeded (or none was made).");
  w.Sample("tollgate_policy_last_reload_success", last.ok ? 1.0 : 0.0);
  w.Family("tollgate_policy_last_reload_timestamp_seconds", "gauge",
           "Wall-clock time of the last reload attempt (or of loading at startup).");
  w.Sample("tollgate_policy_last_reload_timestamp_seconds", double(last.wall_time_ns) / 1e9);
  w.Family("tollgate_policy_info", "gauge",
           "1, labelled with the running policy's version (sha256 prefix of its text) and source.");
  w.Sample("tollgate_policy_info", {"version", policies.version(), "source", impl_->policy_source},
           1.0);
}

void Runtime::WriteFleetMetrics(PrometheusWriter& w) const {
  if (!impl_->rollback_fleet) return;
  const RollbackFleetStats st = impl_->rollback_fleet->stats();
  w.Family("tollgate_rollback_fleet_reads_total", "counter",
           "Reads of the fleet's rollback hash, by result (ok, error).");
  w.Sample("tollgate_rollback_fleet_reads_total", {"result", "ok"}, st.reads);
  w.Sample("tollgate_rollback_fleet_reads_total", {"result", "error"}, st.read_failures);
  w.Family("tollgate_rollback_fleet_publishes_total", "counter",
           "Rollback trips and clears sent to the fleet, by result (ok, error: queued again).");
  w.Sample("tollgate_rollback_fleet_publishes_total", {"result", "ok"}, st.publishes);
  w.Sample("tollgate_rollback_fleet_publishes_total", {"result", "error"}, st.publish_failures);
  w.Family("tollgate_rollback_fleet_bad_records_total", "counter",
           "Records of the fleet's rollback hash skipped because they did not parse.");
  w.Sample("tollgate_rollback_fleet_bad_records_total", {}, st.bad_records);
  w.Family("tollgate_rollback_fleet_pending", "gauge",
           "Rollback transitions of this instance not yet sent to the fleet.");
  w.Sample("tollgate_rollback_fleet_pending", double(st.pending));
}

Runtime::RollbackPublish Runtime::PublishRollback(const std::string& rule, bool trip) const {
  const Enforcer& enforcer = *impl_->enforcer;
  RollbackTransition change;
  change.rule = rule;
  change.fingerprint = enforcer.RollbackFingerprint(rule);
  change.tripped = trip;
  change.by_operator = true;
  change.trigger = trip ? RollbackTrigger::kAdmin : RollbackTrigger::kNone;
  for (const RuleCounters& c : enforcer.Counters()) {
    if (c.rule == rule && trip && c.rolled_back) {
      change.trigger = c.rollback_trigger;  // tripped before: the fleet learns why
      change.reason = c.rollback_reason;
    }
  }
  RollbackPublish sent;
  if (change.fingerprint == 0) return sent;
  sent.policy_rule = true;
  Result<RollbackRecord> stored = impl_->rollback_fleet->PublishNow(FleetChange(change));
  if (stored.ok()) {
    sent.record = std::move(stored).value();
  } else {
    sent.status = stored.status();
  }
  return sent;
}

Result<Decision> Runtime::InspectKey(std::string_view bucket_key, const Limit& limit) const {
  return tollgate::InspectKey(*impl_->store.store, bucket_key, limit);
}

Status Runtime::ResetKey(std::string_view bucket_key, const Limit& limit) const {
  return impl_->store.store->ResetKey(bucket_key, limit);
}

Result<Decision> Runtime::SetRemaining(std::string_view bucket_key, const Limit& limit,
                                       int64_t remaining) const {
  return impl_->store.store->SetRemaining(bucket_key, limit, remaining);
}

}  // namespace tollgate
