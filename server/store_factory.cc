#include "server/store_factory.h"

#include <chrono>
#include <cstdlib>

#include "tollgate/local_store.h"
#if TOLLGATE_HAVE_REDIS
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#endif
#if TOLLGATE_HAVE_RESILIENT
#include "tollgate/resilient_store.h"
#endif

namespace tollgate::server {
namespace {

Result<StoreBundle> CreateLocal(const ServerConfig& config, const Clock* clock) {
  auto options = LocalStoreOptionsOf(config);
  if (!options.ok()) return options.status();
  options->clock = clock;
  auto created = LocalStore::Create(*options);
  if (!created.ok()) return created.status();
  std::shared_ptr<LocalStore> local = std::move(created).value();
  StoreBundle bundle;
  static constexpr const char* kOverflow[] = {"reject", "allow", "evict"};
  bundle.description = "local (max_keys " + std::to_string(options->max_keys) + ", overflow " +
                       kOverflow[static_cast<int>(options->overflow)] + ", max_keys_per_rule " +
                       std::to_string(options->max_keys_per_group) + ")";
  LocalStore* raw = local.get();
  bundle.export_metrics = [raw](PrometheusWriter& w) {
    LocalStoreStats s = raw->Stats();
    w.Family("tollgate_store_keys", "gauge", "Keys held by the local store.");
    w.Sample("tollgate_store_keys", {"store", "local"}, double(s.keys));
    w.Family("tollgate_store_capacity_keys", "gauge", "Key slots allocated by the local store.");
    w.Sample("tollgate_store_capacity_keys", {"store", "local"}, double(s.capacity_slots));
    w.Family("tollgate_store_bytes", "gauge",
             "Bytes held by the local store (slots, shards, sliding_log state).");
    w.Sample("tollgate_store_bytes", {"store", "local"}, double(s.bytes));
    w.Family("tollgate_store_keys_evicted_total", "counter",
             "Idle keys reclaimed to make room for new ones.");
    w.Sample("tollgate_store_keys_evicted_total", {"store", "local"}, s.reclaimed);
    w.Family("tollgate_store_overflow_total", "counter",
             "Decisions made without a slot because the key cap was reached, by result.");
    w.Sample("tollgate_store_overflow_total", {"store", "local", "result", "rejected"},
             s.overflow_rejected);
    w.Sample("tollgate_store_overflow_total", {"store", "local", "result", "allowed"},
             s.overflow_allowed);
    w.Family("tollgate_store_keys_evicted_in_debt_total", "counter",
             "Buckets still in debt evicted for a new key (overflow evict).");
    w.Sample("tollgate_store_keys_evicted_in_debt_total", {"store", "local"}, s.evicted);
    w.Family("tollgate_store_log_keys", "gauge", "sliding_log keys held by the local store.");
    w.Sample("tollgate_store_log_keys", {"store", "local"}, double(s.log_keys));
  };
  bundle.store = std::move(local);
  return bundle;
}

#if TOLLGATE_HAVE_REDIS && TOLLGATE_HAVE_RESILIENT
// Wraps a remote store in the resilient store (failure mode + circuit breaker).
// With degrade, the local share is divided by the live instance count, which
// instances learn from heartbeats in a sorted set on the same Redis. The fleet
// registers whenever the store is remote: a rule may say degrade (now or after
// a reload) even when the global mode does not. Its commands go through the
// store's own connection code (RedisStore), so AUTH, db and TLS are the store's.
std::unique_ptr<FleetRegistry> MakeFleet(const RedisOptions& node, FleetCommand command,
                                         const std::shared_ptr<Logger>& log) {
  RedisFleetOptions f;
  f.key = node.key_prefix + "{fleet}";
  auto fleet = CreateRedisFleetRegistry(std::move(f), std::move(command));
  if (!fleet.ok()) {
    if (log) log->Warn("fleet_registry_unavailable", {{"error", fleet.status().ToString()}});
    return nullptr;
  }
  return std::move(fleet).value();
}

// A fleet command's integer reply (an error reply is kServer with its text).
Result<int64_t> FleetReply(Result<RedisReply> r) {
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kInteger) return r->integer;
  if (r->type == RedisReply::Type::kError) {
    return Status(StatusCode::kServer, r->str.substr(0, 200));
  }
  return Status(StatusCode::kServer, "unexpected reply type");
}

// Cluster: the fleet key's slot owner, through a one-connection RedisStore with
// the cluster's node options (AUTH, TLS), starting at the first seed and
// following one MOVED ("MOVED <slot> <host>:<port>") to the owner. Used from
// the resilient store's maintenance thread only.
class ClusterFleetCommand {
 public:
  ClusterFleetCommand(RedisOptions node, std::string host, int port) : node_(std::move(node)) {
    node_.host = std::move(host);
    node_.port = port;
    node_.connections = 1;
    node_.deny_cache = false;
  }

  Result<int64_t> operator()(const std::vector<std::string>& argv) {
    for (int attempt = 0;; ++attempt) {
      if (store_ == nullptr) {
        auto created = RedisStore::Create(node_);
        if (!created.ok()) return created.status();
        store_ = std::move(created).value();
      }
      Result<RedisReply> r = store_->Command(argv);
      if (attempt == 0 && r.ok() && r->type == RedisReply::Type::kError && Redirect(r->str)) {
        continue;
      }
      return FleetReply(std::move(r));
    }
  }

 private:
  bool Redirect(const std::string& error) {
    std::string host;
    int port = 0;
    if (!ParseMovedTarget(error, &host, &port)) return false;
    if (!host.empty()) node_.host = std::move(host);
    node_.port = port;
    store_.reset();
    return true;
  }

  RedisOptions node_;
  std::unique_ptr<RedisStore> store_;
};

Result<StoreBundle> WrapResilient(std::unique_ptr<Store> primary, std::string description,
                                  std::function<void(PrometheusWriter&)> primary_metrics,
                                  const ServerConfig& config, const Clock* clock,
                                  std::unique_ptr<FleetRegistry> fleet,
                                  const std::shared_ptr<Logger>& log,
                                  const std::shared_ptr<PolicyStore>& policies) {
  ResilientStoreOptions options;
  if (!ParseFailureMode(config.failure_mode, &options.mode)) {
    return InvalidArgument("failure_mode: must be open, closed or degrade");
  }
  options.degrade_fraction = config.degrade_fraction;
  options.charge_back = config.charge_back;
  options.call_deadline = config.call_deadline;
  options.clock = clock;
  options.breaker.clock = clock;
  options.breaker.consecutive_failures = config.breaker_consecutive_failures;
  options.breaker.failure_ratio = config.breaker_failure_ratio;
  options.breaker.min_calls = config.breaker_min_calls;
  options.breaker.window = config.breaker_window;
  options.breaker.open_duration = config.breaker_open;
  options.breaker.half_open_probes = config.breaker_half_open_probes;
  options.fleet = std::move(fleet);
  // One log line per transition, never per request.
  std::weak_ptr<Logger> weak_log = log;
  options.breaker.listener = [weak_log](const BreakerTransition& t) {
    auto l = weak_log.lock();
    if (!l) return;
    const nlohmann::json fields = {{"from", std::string(BreakerStateName(t.from))},
                                   {"to", std::string(BreakerStateName(t.to))},
                                   {"reason", std::string(BreakerReasonName(t.reason))}};
    if (t.to == BreakerState::kOpen) {
      l->Warn("breaker_transition", fields);
    } else {
      l->Info("breaker_transition", fields);
    }
  };
  auto created = ResilientStore::Create(std::move(primary), std::move(options));
  if (!created.ok()) return created.status();
  std::shared_ptr<ResilientStore> resilient = std::move(created).value();
  StoreBundle bundle;
  bundle.description = description + ", failure mode " + config.failure_mode;
  bundle.fail_closed = config.failure_mode == "closed";
  ResilientStore* raw = resilient.get();
  bundle.backing_healthy = [raw] {
    return raw->breaker().state() != BreakerState::kOpen && raw->primary().Healthy();
  };
  bundle.export_metrics = [raw, primary_metrics](PrometheusWriter& w) {
    ResilientStoreStats s = raw->Stats();
    w.Family("tollgate_breaker_state", "gauge",
             "Circuit breaker state of the remote store (1 for the current state).");
    for (BreakerState st : {BreakerState::kClosed, BreakerState::kOpen, BreakerState::kHalfOpen}) {
      w.Sample("tollgate_breaker_state", {"state", BreakerStateName(st)},
               s.breaker_state == st ? 1.0 : 0.0);
    }
    w.Family("tollgate_breaker_transitions_total", "counter",
             "Breaker transitions by target state.");
    w.Sample("tollgate_breaker_transitions_total", {"to", "open"}, s.breaker.opened);
    w.Sample("tollgate_breaker_transitions_total", {"to", "half_open"}, s.breaker.half_opened);
    w.Sample("tollgate_breaker_transitions_total", {"to", "closed"}, s.breaker.closed);
    w.Family("tollgate_breaker_opened_total", "counter",
             "Breaker transitions into open, by reason.");
    w.Sample("tollgate_breaker_opened_total", {"reason", "consecutive_failures"},
             s.breaker.opened_by_consecutive);
    w.Sample("tollgate_breaker_opened_total", {"reason", "failure_ratio"},
             s.breaker.opened_by_ratio);
    w.Sample("tollgate_breaker_opened_total", {"reason", "probe_failed"},
             s.breaker.opened_by_probe);
    w.Sample("tollgate_breaker_opened_total", {"reason", "no_answer"},
             s.breaker.opened_by_no_answer);
    w.Family("tollgate_breaker_probes_total", "counter",
             "Half-open probe calls let through to the remote store.");
    w.Sample("tollgate_breaker_probes_total", {}, s.breaker.probes);
    w.Family("tollgate_failure_mode_decisions_total", "counter",
             "Batches answered without the remote store, by failure mode.");
    w.Sample("tollgate_failure_mode_decisions_total", {"mode", "open"}, s.open_decisions);
    w.Sample("tollgate_failure_mode_decisions_total", {"mode", "closed"}, s.closed_rejections);
    w.Sample("tollgate_failure_mode_decisions_total", {"mode", "degrade"}, s.degraded_decisions);
    w.Family("tollgate_store_primary_failures_total", "counter",
             "Remote store calls that failed (timeouts, connection errors).");
    w.Sample("tollgate_store_primary_failures_total", {}, s.primary_failures);
    w.Family("tollgate_store_short_circuited_total", "counter",
             "Batches the open breaker kept from the remote store.");
    w.Sample("tollgate_store_short_circuited_total", {}, s.short_circuited);
    w.Family("tollgate_charge_back_tokens_total", "counter",
             "Tokens spent locally while degraded and charged back to the remote store.");
    w.Sample("tollgate_charge_back_tokens_total", {}, s.charge_back_tokens);
    w.Family("tollgate_charge_back_keys_total", "counter",
             "Keys whose local grants were charged back to the remote store.");
    w.Sample("tollgate_charge_back_keys_total", {}, s.charge_back_keys);
    w.Family("tollgate_charge_back_forgiven_tokens_total", "counter",
             "Tokens granted locally that no longer fitted in the remote bucket (not charged).");
    w.Sample("tollgate_charge_back_forgiven_tokens_total", {}, s.charge_back_forgiven);
    w.Family("tollgate_charge_back_dropped_tokens_total", "counter",
             "Tokens granted locally but not recorded for charge-back (ledger full).");
    w.Sample("tollgate_charge_back_dropped_tokens_total", {}, s.charge_back_dropped);
    w.Family("tollgate_charge_back_failures_total", "counter",
             "Failed charge-back attempts (kept and retried).");
    w.Sample("tollgate_charge_back_failures_total", {}, s.charge_back_failures);
    w.Family("tollgate_charge_back_pending_keys", "gauge",
             "Keys with local grants waiting to be charged back.");
    w.Sample("tollgate_charge_back_pending_keys", {}, double(s.charge_back_pending_keys));
    w.Family("tollgate_fleet_instances", "gauge",
             "Live tollgated instances sharing the limits (the degrade divisor).");
    w.Sample("tollgate_fleet_instances", {}, double(s.instances));
    w.Family("tollgate_fleet_heartbeats_total", "counter", "Fleet heartbeats, by result.");
    w.Sample("tollgate_fleet_heartbeats_total", {"result", "ok"}, s.heartbeats);
    w.Sample("tollgate_fleet_heartbeats_total", {"result", "error"}, s.heartbeat_failures);
    w.Family("tollgate_store_deadline_expired_total", "counter",
             "Remote store calls cut short by store.call_deadline_ms.");
    w.Sample("tollgate_store_deadline_expired_total", {}, s.deadline_expired);
    if (primary_metrics) primary_metrics(w);
  };
  bundle.store = std::move(resilient);
  return bundle;
}

// Reconnect attempts back off to at most this, so decisions return to Redis
// within ~1 s of its recovery (breaker cool-down + one reconnect + a probe).
constexpr std::chrono::milliseconds kReconnectBackoffMax{200};

// The counters every Redis store exports, single node or cluster.
void WriteScriptCallMetrics(PrometheusWriter& w, uint64_t script_calls, uint64_t decisions,
                            uint64_t timeouts, uint64_t errors) {
  w.Family("tollgate_redis_script_calls_total", "counter",
           "Script calls sent to Redis (one call decides many batches).");
  w.Sample("tollgate_redis_script_calls_total", {}, script_calls);
  w.Family("tollgate_redis_decisions_total", "counter", "Batches decided by Redis.");
  w.Sample("tollgate_redis_decisions_total", {}, decisions);
  w.Family("tollgate_redis_errors_total", "counter", "Redis calls failed, by kind.");
  w.Sample("tollgate_redis_errors_total", {"kind", "timeout"}, timeouts);
  w.Sample("tollgate_redis_errors_total", {"kind", "other"}, errors);
}

Result<StoreBundle> CreateRedis(const ServerConfig& config, const Clock* clock,
                                const std::shared_ptr<Logger>& log,
                                const std::shared_ptr<PolicyStore>& policies) {
  auto options = ParseRedisUrl(config.store);
  if (!options.ok()) return options.status();
  options->call_timeout = config.store_timeout;
  options->clock = clock;
  options->reconnect_backoff_max = kReconnectBackoffMax;
  auto created = RedisStore::Create(*options);
  if (!created.ok()) return created.status();
  std::unique_ptr<RedisStore> redis = std::move(created).value();
  RedisStore* raw = redis.get();
  std::string description = "redis " + options->host + ":" + std::to_string(options->port) +
                            " db " + std::to_string(options->db);
  auto redis_metrics = [raw](PrometheusWriter& w) {
    RedisStoreStats s = raw->Stats();
    WriteScriptCallMetrics(w, s.script_calls, s.decisions, s.timeouts, s.errors);
    w.Family("tollgate_redis_connects_total", "counter", "Successful (re)connections to Redis.");
    w.Sample("tollgate_redis_connects_total", {}, s.connects);
  };
  auto fleet = MakeFleet(
      *options,
      [raw](std::vector<std::string> argv) { return FleetReply(raw->Command(std::move(argv))); },
      log);
  return WrapResilient(std::move(redis), description, redis_metrics, config, clock,
                       std::move(fleet), log, policies);
}

Result<StoreBundle> CreateRedisCluster(const ServerConfig& config, const Clock* clock,
                                       const std::shared_ptr<Logger>& log,
                                       const std::shared_ptr<PolicyStore>& policies) {
  auto options = ParseRedisClusterUrl(config.store);
  if (!options.ok()) return options.status();
  options->node.call_timeout = config.store_timeout;
  options->node.clock = clock;
  options->node.reconnect_backoff_max = kReconnectBackoffMax;
  // The fleet set lives on the first seed's slot owner (the registry follows one MOVED).
  std::string seed_host = "127.0.0.1";
  int seed_port = 6379;
  if (!options->seeds.empty()) {
    const std::string& seed = options->seeds.front();
    const size_t colon = seed.rfind(':');
    seed_host = seed.substr(0, colon);
    if (colon != std::string::npos) seed_port = std::atoi(seed.c_str() + colon + 1);
  }
  auto created = RedisClusterStore::Create(*options);
  if (!created.ok()) return created.status();
  std::unique_ptr<RedisClusterStore> cluster = std::move(created).value();
  RedisClusterStore* raw = cluster.get();
  std::string description = "redis-cluster (" + std::to_string(options->seeds.size()) + " seeds)";
  auto cluster_metrics = [raw](PrometheusWriter& w) {
    RedisClusterStats s = raw->Stats();
    WriteScriptCallMetrics(w, s.script_calls, s.decisions, s.timeouts, s.errors);
    w.Family("tollgate_redis_cluster_redirects_total", "counter", "MOVED / ASK replies followed.");
    w.Sample("tollgate_redis_cluster_redirects_total", {"kind", "moved"}, s.moved);
    w.Sample("tollgate_redis_cluster_redirects_total", {"kind", "ask"}, s.ask);
    w.Family("tollgate_redis_cluster_masters", "gauge", "Masters in the last topology read.");
    w.Sample("tollgate_redis_cluster_masters", double(s.masters));
  };
  auto command = std::make_shared<ClusterFleetCommand>(options->node, seed_host, seed_port);
  auto fleet = MakeFleet(
      options->node, [command](std::vector<std::string> argv) { return (*command)(argv); }, log);
  return WrapResilient(std::move(cluster), description, cluster_metrics, config, clock,
                       std::move(fleet), log, policies);
}
#endif

}  // namespace

Result<StoreBundle> CreateStore(const ServerConfig& config, const Clock* clock,
                                std::shared_ptr<Logger> log,
                                std::shared_ptr<PolicyStore> policies) {
  const StoreKind kind = StoreKindOf(config.store);
  if (kind == StoreKind::kLocal) return CreateLocal(config, clock);
#if TOLLGATE_HAVE_REDIS && TOLLGATE_HAVE_RESILIENT
  if (kind == StoreKind::kRedis) return CreateRedis(config, clock, log, policies);
  if (kind == StoreKind::kRedisCluster) return CreateRedisCluster(config, clock, log, policies);
#endif
  const std::string scheme = config.store.substr(0, config.store.find("://"));
  return UnavailableError("store " + scheme + " not available in this build (" + config.store +
                          "); build with the redis and resilient libraries");
}

}  // namespace tollgate::server
