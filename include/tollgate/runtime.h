// Runtime: tollgated's whole decision engine without a socket.
//
// A Runtime opens, from typed options, what a front end decides with: the
// policy source (a file, an etcd key or an inline text), the store
// (StoreSpec: local, Redis, Redis Cluster, always resilient when remote), the
// Enforcer over both, and the fleet's shared rollback guards. It reloads the
// policy (Reload, PutPolicy, the etcd watch, a Redis tenant table's refresh),
// answers readiness, writes the store's and the fleet's Prometheus families,
// and administers keys on the store; on the local store it keeps the state
// across restarts (RuntimeOptions::local_state: loaded by Create, saved
// periodically between Start and Stop, and by SaveState). tollgated (server/)
// is one front end over it; an embedder is another:
//
//   RuntimeOptions options;
//   options.policy.location = "/etc/tollgate/policy.json";
//   options.store.url = "redis://127.0.0.1:6379";
//   auto runtime = Runtime::Create(std::move(options));   // Result<unique_ptr<Runtime>>
//   (*runtime)->Start();                                  // etcd watch, fleet thread
//   CheckOutcome outcome = (*runtime)->enforcer().Check(request);
//
// Reloads: every change of policy (and of the companion configuration a front
// end attaches, such as tollgated's Envoy rule files) is checked whole before
// anything is installed, and installed by ONE swap of the PolicyStore: the
// policy the Enforcer decides with, the companion's compiled configuration and
// their generation change together, so no reader (an HTTP decision, an Envoy
// decision, view()) sees a new policy beside an old companion or the reverse.
// After it view() shows both with the new generation and `on_reloaded` runs
// once; a failed reload or PUT changes nothing (the written-back source is
// restored).
//
// Errors: Create fails with kInvalidArgument when the options or the policy
// are invalid, another code for what may pass on its own (a store, an etcd key
// out of reach). Reload and PutPolicy return every error, empty when live.
// Events (breaker transitions, reload audit lines, warnings) go to
// RuntimeEnv::on_event, never to a global logger.
//
// Thread safety: every method may be called from any thread, except Start and
// Stop (the owner's). Reload, PutPolicy and the etcd watch are serialised.
// Ownership: the Runtime owns its store, its one Enforcer, fleet and watch; the clocks
// in RuntimeEnv are borrowed and must outlive it.
#ifndef TOLLGATE_RUNTIME_H_
#define TOLLGATE_RUNTIME_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/config_error.h"
#include "tollgate/metrics.h"
#include "tollgate/policy.h"
#include "tollgate/redis_hash.h"
#include "tollgate/rollback_fleet.h"
#include "tollgate/status.h"
#include "tollgate/store.h"
#include "tollgate/store_spec.h"
#include "tollgate/tls.h"

namespace tollgate {

// How an etcd policy source connects (tollgated's `etcd` object;
// docs/operations.md, "etcd in production"): authentication, TLS for
// etcds://, the deadline of a call.
struct EtcdClientOptions {
  std::string username = {};       // "" = no authentication
  std::string password_file = {};  // its one line is the password (required with username)
  // etcds:// only: the CA file (else the system's trust store), the client
  // certificate for etcd's --client-cert-auth (without a subject CommonName:
  // etcd's JSON gateway refuses one), the name verified and sent as SNI.
  TlsClientSettings tls = {};
  // One call on one member (connect, TLS handshake, request, whole reply);
  // then the next member is tried.
  std::chrono::milliseconds timeout{2000};
};

// Where the policy comes from.
struct PolicySourceOptions {
  // A file path, or etcd://host:port[,host:port]/key (etcds:// for TLS; then
  // watched). Empty with `text`: an inline policy that only PutPolicy changes.
  std::string location = {};
  std::optional<std::string> text = {};
  // Value files and tenant tables are read from this directory, confined to
  // it; "" = the policy file's directory (an etcd policy: none).
  std::string value_dir = {};
  // Whether a policy that arrives over the network (PutPolicy, an etcd key)
  // may read value files.
  bool remote_files = false;
  // Files SourceChanged looks at beside a policy file: the companion's
  // (tollgated: the Envoy rule files); a directory stands for each *.yaml /
  // *.yml in it.
  std::vector<std::string> watch_files = {};
  EtcdClientOptions etcd = {};  // an etcd location only
};

// The rollback guards shared across instances on the same Redis.
struct FleetOptions {
  bool share_rollback = true;  // only with a Redis store
  std::chrono::milliseconds rollback_sync{1000};
};

// The local store's state across restarts (LocalStore::Save / Load;
// docs/operations.md, "Restarts and state"). Only with a local store.
struct LocalStatePersistence {
  std::string file = {};  // "" = off
  // Saved every interval by a thread of the Runtime (Start/Stop), off the
  // decision path; 0 = only when the host calls SaveState (tollgated: on drain).
  std::chrono::milliseconds save_interval{30000};
  // Create takes an exclusive lock on "<file>.lock" before loading and holds
  // it for the Runtime's life (after the last save): a process started while
  // the one it replaces still runs waits up to this long for it to save and
  // exit, then fails (kUnavailable). The restart handshake of
  // docs/operations.md ("Restarts and state").
  std::chrono::milliseconds lock_wait{60000};
};

struct RuntimeOptions {
  PolicySourceOptions policy;
  StoreSpec store;
  // Loaded by Create before anything decides: entries of rules the policy no
  // longer has are dropped (with an Envoy front end, `envoy` set, entries of
  // other groups are kept: they are the Envoy rules'); the rest are read with
  // the policy's current limits, as after a reload. A file that cannot be
  // read or is refused is one `state_load_failed` event and an empty start.
  LocalStatePersistence local_state;
  // `log` and `on_rollback` are the Runtime's (events, the fleet).
  EnforcerOptions enforcer;
  FleetOptions fleet;
  // An Envoy front end will attach (tollgate/envoy_rls.h AttachEnvoyDecider):
  // the state file's entries of other groups than the policy's rules are
  // then kept (local_state). It decides on enforcer(), the one Enforcer,
  // through an Enforcer::FrontEnd of its own (its response options, its
  // rules' counters apart from HTTP's); no second Enforcer is made.
  bool envoy = false;
};

// What the Runtime tells its host. `fields` is one JSON object's text.
struct RuntimeEvent {
  enum class Level { kDebug, kInfo, kWarn, kError };
  Level level = Level::kInfo;
  std::string_view name;    // "policy_reloaded", "breaker_transition", ...
  std::string_view fields;  // {"trigger":"sighup","generation":2,...}
};

struct RuntimeEnv {
  const Clock* clock = &SystemClock::Instance();     // decisions, reload stamps
  const Clock* io_clock = &SystemClock::Instance();  // the store's I/O timers
  std::function<void(const RuntimeEvent&)> on_event;
  // After every reload attempt (any trigger), under the reload lock: `errors`
  // empty means the new policy is live. A front end swaps its own view here.
  std::function<void(const std::vector<ConfigError>& errors)> on_reloaded;
};

// A configuration a front end reloads with the policy (tollgated: the Envoy
// rule files, src/rls/rls_decider.h RlsCompanion). `check` validates without
// installing (a PUT's dry run); `compile` builds the next configuration into
// *out (an immutable object, opaque to the Runtime, that the front end reads
// back from View::companion) or returns every error; the Runtime installs it
// with the policy in one swap, or neither. `installed` (optional) runs after
// each reload that installed one (under the reload lock).
struct CompanionConfig {
  std::string name;  // error prefix: "rls_config"
  std::function<std::vector<ConfigError>()> check;
  std::function<std::vector<ConfigError>(std::shared_ptr<const void>* out)> compile;
  std::function<void()> installed;
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> Create(RuntimeOptions options, RuntimeEnv env = {});
  // What Create would refuse for a configuration reason, without connecting
  // anywhere: the store spec and the policy (a file parsed, an etcd URL
  // parsed). Each error has its path ("store: ...", "<file>: rules[0]...").
  static std::vector<ConfigError> Check(const RuntimeOptions& options);
  // Check's policy half (a front end that checked the store spec itself).
  static std::vector<ConfigError> CheckPolicySource(const PolicySourceOptions& policy);
  // The policy file's Redis tenant tables read from the store as a start
  // reads them; when the store cannot be reached they are left unchecked and
  // *unchecked says why.
  static std::vector<ConfigError> CheckTenantTables(const RuntimeOptions& options,
                                                    std::string* unchecked);
  ~Runtime();  // Stop()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Reads the fleet's rollback guards once (before the first decision).
  void SyncRollbackFleet();
  // Starts the etcd watch, the fleet's thread and the periodic state save;
  // Stop ends them.
  void Start();
  void Stop();
  // Saves the local store's state to RuntimeOptions::local_state.file now
  // (tollgated: on drain, once in-flight requests finished). Ok and nothing
  // done when persistence is off. Saves are serialised; decisions go on.
  Status SaveState(std::string_view trigger);

  // Re-reads the source (or installs `text`, already read from it).
  std::vector<ConfigError> Reload(std::string_view trigger);
  // Checks `text`, writes it to the source, installs it; any failure leaves
  // the source and the live policy as they were. Audit-logged with `actor`.
  // `*written` (optional) tells whether the source was written (and, on
  // errors, put back): a file watch may take the file's new stamp.
  std::vector<ConfigError> PutPolicy(std::string_view text, std::string_view actor,
                                     bool* written = nullptr);
  // PutPolicy's dry run: `text` parsed as a PUT parses it, except that Redis
  // tenant tables are not read (no store round trip: PutPolicy checks them,
  // and the companion), and what it would change in the running policy.
  struct PolicyPreview {
    std::vector<ConfigError> errors;  // not empty: the policy would be refused
    std::string version_before;       // the running policy's
    std::string version;              // `text`'s
    std::vector<RuleChange> changes;
    std::vector<ConfigError> warnings;  // PolicyWarnings: rules that can never apply
  };
  PolicyPreview PreviewPolicy(std::string_view text) const;
  // Reloaded (and checked by PutPolicy) with the policy. Set before Start and
  // before the first decision: compiles the companion's first configuration
  // and installs it beside the running policy (same generation); on errors
  // nothing is attached and every error is returned (as `compile` gave it).
  std::vector<ConfigError> AttachCompanion(CompanionConfig companion);
  // Whether a Redis tenant table asks to be read again now; true marks the
  // refresh as under way (the caller then reloads with trigger "tenant_refresh").
  bool TenantRefreshDue();
  // For a host that polls the source (tollgated: policy_poll_interval): whether
  // the policy file (by mtime, size and inode; never for etcd or inline text)
  // or a watch_files entry changed since the files were last seen (Create,
  // MarkSourceSeen, a PutPolicy that wrote the file, the last SourceChanged);
  // the caller then reloads with trigger "file_changed". A policy file that
  // cannot be read is no change, so a broken file is reported once, not on
  // every poll.
  bool SourceChanged();
  // Takes the files as they are now as seen (a host reloading for another
  // reason, such as SIGHUP, need not reload again for the same bytes).
  void MarkSourceSeen();

  // What one swap published, read together.
  struct View {
    std::shared_ptr<const Policy> policy;  // never null
    uint64_t generation = 0;
    // The companion's configuration installed with `policy`; null without one.
    std::shared_ptr<const void> companion;
  };
  View view() const;

  // The one Enforcer: HTTP decides on it, and so does every other front end
  // (the Envoy adapter through its Enforcer::FrontEnd).
  Enforcer& enforcer() const;
  PolicyStore& policies() const;
  Store& store() const;
  // How every parse of a PUT policy reads files and tenant tables.
  PolicyParseOptions PutParseOptions() const;
  // "file:<path>", "etcd://host:port[,...]/key" or "inline".
  const std::string& policy_source() const;
  bool policy_from_etcd() const;
  const std::string& store_description() const;
  // The store can decide now.
  bool StoreHealthy() const;
  // The store behind the failure mode is healthy (connections up, breaker
  // not open); the store's own health without a resilient wrapper.
  bool BackingHealthy() const;
  // Ready to decide: the store can, or its failure mode answers for it.
  bool Ready() const;
  // The remote store's key prefix ("" locally).
  const std::string& key_prefix() const;
  // Null unless the rollback guards are shared (fleet scope).
  RollbackFleet* rollback_fleet() const;
  // A command on the Redis behind the store; null for the local store.
  const RedisCommand& redis_command() const;
  // The store's families (keys, breaker, Redis calls); the fleet's (none
  // without a fleet).
  void WriteStoreMetrics(PrometheusWriter& w) const;
  void WriteFleetMetrics(PrometheusWriter& w) const;
  // The live policy's families: tollgate_policy_reloads_total{result} (every
  // reload and PUT attempt since Create), tollgate_policy_generation,
  // tollgate_policy_last_reload_success, ..._timestamp_seconds and
  // tollgate_policy_info{version,source}.
  void WritePolicyMetrics(PrometheusWriter& w) const;

  // An operator's trip (`trip`) or clear of `rule`'s rollback guard, already
  // made on this instance's Enforcer, sent to the fleet now (blocking: one
  // Redis round trip; a failed send is queued for the fleet's thread). Only
  // with a fleet (rollback_fleet() not null).
  struct RollbackPublish {
    bool policy_rule = false;  // false: no rule of the running policy; nothing sent
    Status status;             // the send's; Ok: `record` is what the fleet stored
    RollbackRecord record;
  };
  RollbackPublish PublishRollback(const std::string& rule, bool trip) const;

  // Key administration (blocking: one store round trip each).
  Result<Decision> InspectKey(std::string_view bucket_key, const Limit& limit) const;
  Status ResetKey(std::string_view bucket_key, const Limit& limit) const;
  Result<Decision> SetRemaining(std::string_view bucket_key, const Limit& limit,
                                int64_t remaining) const;

  class Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The Enforcer's rollback change as the fleet records it, and a fleet record
// as the Enforcer adopts it.
RollbackChange FleetChange(const RollbackTransition& change);
RollbackTransition AdoptedTransition(const RollbackRecord& record);

// The per-rule families of a front end's /metrics, from `counters` (an
// Enforcer's Counters()), one writer per group so a front end can put its
// own samples of a family beside them (tollgated's Envoy decisions):
//  - decisions and concurrency leases: tollgate_decisions_total,
//    tollgate_leases_total, tollgate_leases_in_flight;
//  - missing keys and the rollback guards: tollgate_missing_key_total,
//    tollgate_rule_rolled_back, tollgate_rollback_{trips,clears,adopted}_total;
//  - settlements: tollgate_settlements_total, tollgate_settled_cost_total,
//    tollgate_response_cost_invalid_total, tollgate_settle_failures_total,
//    tollgate_refunds_total.
void WriteRuleDecisionMetrics(PrometheusWriter& w, const std::vector<RuleCounters>& counters);
void WriteRuleGuardMetrics(PrometheusWriter& w, const std::vector<RuleCounters>& counters);
void WriteRuleSettlementMetrics(PrometheusWriter& w, const std::vector<RuleCounters>& counters);

}  // namespace tollgate

#endif  // TOLLGATE_RUNTIME_H_
