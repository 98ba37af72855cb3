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
  LocalStoreOptions options;
  options.max_keys = config.local_max_keys;
  options.clock = clock;
  auto created = LocalStore::Create(options);
  if (!created.ok()) return created.status();
  std::shared_ptr<LocalStore> local = std::move(created).value();
  StoreBundle bundle;
  bundle.description = "local (max_keys " + std::to_string(config.local_max_keys) + ")";
  LocalStore* raw = local.get();
  bundle.export_metrics = [raw](PrometheusWriter& w) {
    LocalStoreStats s = raw->Stats();
    w.Family("tollgate_store_keys", "gauge", "Keys held by the local store.");
    w.Sample("tollgate_store_keys", {"store", "local"}, double(s.keys));
    w.Family("tollgate_store_capacity_keys", "gauge", "Key slots allocated by the local store.");
    w.Sample("tollgate_store_capacity_keys", {"store", "local"}, double(s.capacity_slots));
    w.Family("tollgate_store_bytes", "gauge", "Bytes allocated for local store slots.");
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
  };
  bundle.store = std::move(local);
  return bundle;
}

#if TOLLGATE_HAVE_REDIS && TOLLGATE_HAVE_RESILIENT
// Wraps a remote store in the resilient store (failure mode + circuit breaker).
// With degrade, the local share is divided by the live instance count, which
// instances learn from heartbeats in a sorted set on the same Redis.
std::unique_ptr<FleetRegistry> MakeFleet(const ServerConfig& config, const RedisOptions& node,
                                         const std::string& host, int port,
                                         const std::shared_ptr<Logger>& log) {
  if (config.failure_mode != "degrade") return nullptr;
  RedisFleetOptions f;
  f.host = host;
  f.port = port;
  f.username = node.username;
  f.password = node.password;
  f.db = node.db;
  f.key = node.key_prefix + "{fleet}";
  auto fleet = CreateRedisFleetRegistry(std::move(f));
  if (!fleet.ok()) {
    if (log) log->Warn("fleet_registry_unavailable", {{"error", fleet.status().ToString()}});
    return nullptr;
  }
  return std::move(fleet).value();
}

Result<StoreBundle> WrapResilient(std::unique_ptr<Store> primary, std::string description,
                                  std::function<void(PrometheusWriter&)> primary_metrics,
                                  const ServerConfig& config, const Clock* clock,
                                  std::unique_ptr<FleetRegistry> fleet,
                                  const std::shared_ptr<Logger>& log) {
  ResilientStoreOptions options;
  if (!ParseFailureMode(config.failure_mode, &options.mode)) {
    return InvalidArgument("failure_mode: must be open, closed or degrade");
  }
  options.degrade_fraction = config.degrade_fraction;
  options.clock = clock;
  options.breaker.clock = clock;
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
                                const std::shared_ptr<Logger>& log) {
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
  auto fleet = MakeFleet(config, *options, options->host, options->port, log);
  return WrapResilient(std::move(redis), description, redis_metrics, config, clock,
                       std::move(fleet), log);
}

Result<StoreBundle> CreateRedisCluster(const ServerConfig& config, const Clock* clock,
                                       const std::shared_ptr<Logger>& log) {
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
  auto fleet = MakeFleet(config, options->node, seed_host, seed_port, log);
  return WrapResilient(std::move(cluster), description, cluster_metrics, config, clock,
                       std::move(fleet), log);
}
#endif

}  // namespace

Result<StoreBundle> CreateStore(const ServerConfig& config, const Clock* clock,
                                std::shared_ptr<Logger> log) {
  if (config.store == "local") return CreateLocal(config, clock);
#if TOLLGATE_HAVE_REDIS && TOLLGATE_HAVE_RESILIENT
  if (config.store.rfind("redis://", 0) == 0 || config.store.rfind("rediss://", 0) == 0) {
    return CreateRedis(config, clock, log);
  }
  if (config.store.rfind("redis-cluster://", 0) == 0) {
    return CreateRedisCluster(config, clock, log);
  }
#endif
  std::string kind = config.store.substr(0, config.store.find("://"));
  return UnavailableError("store " + kind + " not available in this build (" + config.store +
                          "); build with the redis and resilient libraries");
}

}  // namespace tollgate::server
