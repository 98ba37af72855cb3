#include "runtime/store_bundle.h"

#include <chrono>

#include "tollgate/local_store.h"
#if TOLLGATE_HAVE_REDIS
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#endif
#if TOLLGATE_HAVE_RESILIENT
#include "tollgate/resilient_store.h"
#endif

namespace tollgate::runtime {
namespace {

void WriteLocalMetrics(const LocalStore* raw, PrometheusWriter& w) {
  LocalStoreStats s = raw->Stats();
  w.Family("tollgate_store_keys", "gauge", "Keys held by the local store.");
  w.Sample("tollgate_store_keys", {"store", "local"}, double(s.keys));
  w.Family("tollgate_store_capacity_keys", "gauge", "Key slots allocated by the local store.");
  w.Sample("tollgate_store_capacity_keys", {"store", "local"}, double(s.capacity_slots));
  w.Family("tollgate_store_max_keys", "gauge",
           "The local store's key cap (store.local_max_keys): keys beyond it overflow.");
  w.Sample("tollgate_store_max_keys", {"store", "local"}, double(s.max_keys));
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
}

#if TOLLGATE_HAVE_REDIS && TOLLGATE_HAVE_RESILIENT
void WriteResilientMetrics(ResilientStore* raw, PrometheusWriter& w) {
  ResilientStoreStats s = raw->Stats();
  w.Family("tollgate_breaker_state", "gauge",
           "Circuit breaker state of the remote store (1 for the current state).");
  for (BreakerState st : {BreakerState::kClosed, BreakerState::kOpen, BreakerState::kHalfOpen}) {
    w.Sample("tollgate_breaker_state", {"state", BreakerStateName(st)},
             s.breaker_state == st ? 1.0 : 0.0);
  }
  w.Family("tollgate_breaker_transitions_total", "counter", "Breaker transitions by target state.");
  w.Sample("tollgate_breaker_transitions_total", {"to", "open"}, s.breaker.opened);
  w.Sample("tollgate_breaker_transitions_total", {"to", "half_open"}, s.breaker.half_opened);
  w.Sample("tollgate_breaker_transitions_total", {"to", "closed"}, s.breaker.closed);
  w.Family("tollgate_breaker_opened_total", "counter", "Breaker transitions into open, by reason.");
  w.Sample("tollgate_breaker_opened_total", {"reason", "consecutive_failures"},
           s.breaker.opened_by_consecutive);
  w.Sample("tollgate_breaker_opened_total", {"reason", "failure_ratio"}, s.breaker.opened_by_ratio);
  w.Sample("tollgate_breaker_opened_total", {"reason", "probe_failed"}, s.breaker.opened_by_probe);
  w.Sample("tollgate_breaker_opened_total", {"reason", "no_answer"}, s.breaker.opened_by_no_answer);
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
}

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

void WriteRedisMetrics(const RedisStore* raw, PrometheusWriter& w) {
  RedisStoreStats s = raw->Stats();
  WriteScriptCallMetrics(w, s.script_calls, s.decisions, s.timeouts, s.errors);
  w.Family("tollgate_redis_connects_total", "counter", "Successful (re)connections to Redis.");
  w.Sample("tollgate_redis_connects_total", {}, s.connects);
}

void WriteClusterMetrics(const RedisClusterStore* raw, PrometheusWriter& w) {
  RedisClusterStats s = raw->Stats();
  WriteScriptCallMetrics(w, s.script_calls, s.decisions, s.timeouts, s.errors);
  w.Family("tollgate_redis_cluster_redirects_total", "counter", "MOVED / ASK replies followed.");
  w.Sample("tollgate_redis_cluster_redirects_total", {"kind", "moved"}, s.moved);
  w.Sample("tollgate_redis_cluster_redirects_total", {"kind", "ask"}, s.ask);
  w.Family("tollgate_redis_cluster_masters", "gauge", "Masters in the last topology read.");
  w.Sample("tollgate_redis_cluster_masters", double(s.masters));
}
#endif

// The store's Prometheus families, from the parts the runtime opened.
std::function<void(PrometheusWriter&)> StoreMetrics(const OpenedStore& opened) {
  if (opened.local != nullptr) {
    return [raw = opened.local](PrometheusWriter& w) { WriteLocalMetrics(raw, w); };
  }
#if TOLLGATE_HAVE_REDIS && TOLLGATE_HAVE_RESILIENT
  return [resilient = opened.resilient, redis = opened.redis,
          cluster = opened.cluster](PrometheusWriter& w) {
    if (resilient != nullptr) WriteResilientMetrics(resilient, w);
    if (redis != nullptr) WriteRedisMetrics(redis, w);
    if (cluster != nullptr) WriteClusterMetrics(cluster, w);
  };
#else
  return nullptr;
#endif
}

}  // namespace

Result<StoreBundle> CreateStore(const StoreSpec& spec, const StoreEnv& env) {
  auto opened = OpenStore(spec, env);
  if (!opened.ok()) return opened.status();
  StoreBundle bundle;
  bundle.description = opened->description;
  bundle.fail_closed = opened->resilient != nullptr && spec.resilience &&
                       spec.resilience->mode == FailureMode::kClosed;
  if (opened->resilient != nullptr) {
    OpenedStore parts = *opened;
    parts.store = nullptr;  // the bundle owns the store; the check borrows its parts
    bundle.backing_healthy = [parts] { return parts.BackingHealthy(); };
  }
  bundle.export_metrics = StoreMetrics(*opened);
#if TOLLGATE_HAVE_REDIS
  if (RedisStore* redis = opened->redis) {
    bundle.redis_command = [redis](std::vector<std::string> argv) {
      return redis->Command(std::move(argv));
    };
  } else if (RedisClusterStore* cluster = opened->cluster) {
    bundle.redis_command = [cluster](std::vector<std::string> argv) {
      const bool script =
          argv.size() > 3 && (argv[0] == "EVAL" || argv[0] == "EVALSHA") && argv[2] != "0";
      const std::string key = script ? argv[3] : argv.size() > 1 ? argv[1] : std::string();
      return cluster->Command(key, std::move(argv));
    };
  }
  bundle.key_prefix = opened->key_prefix;
#endif
  bundle.local = opened->resilient == nullptr ? opened->local : nullptr;
  bundle.store = std::move(opened->store);
  return bundle;
}

}  // namespace tollgate::runtime
