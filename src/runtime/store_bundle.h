// Internal to the Runtime: the store it runs, opened by the store factory
// (tollgate/store_spec.h), plus what a front end needs of it: readiness, the
// store's Prometheus families and a plain command on the Redis behind it. The
// only place that knows the concrete store types (their stats).
//
// Ownership: the bundle owns the store(s); `store` is what the Enforcer uses.
// Thread safety: the bundle is immutable after Create; its stores are thread-safe.
#ifndef TOLLGATE_SRC_RUNTIME_STORE_BUNDLE_H_
#define TOLLGATE_SRC_RUNTIME_STORE_BUNDLE_H_

#include <functional>
#include <memory>
#include <string>

#include "tollgate/clock.h"
#include "tollgate/local_store.h"
#include "tollgate/metrics.h"
#include "tollgate/redis_hash.h"
#include "tollgate/status.h"
#include "tollgate/store.h"
#include "tollgate/store_spec.h"

namespace tollgate::runtime {

struct StoreBundle {
  std::shared_ptr<Store> store;  // the store decisions go to
  std::string description;       // "local (max_keys 1048576)", "redis 127.0.0.1:6379, fail open"
  bool fail_closed = false;      // readiness needs a healthy store
  // Whether the store behind the failure mode is healthy (its connections are
  // up and its circuit breaker is not open); null: store->Healthy(). /readyz
  // reports it as store_healthy even when the failure mode keeps us ready.
  std::function<bool()> backing_healthy;
  // Appends store gauges/counters (keys, evictions, breaker state) to /metrics.
  std::function<void(PrometheusWriter&)> export_metrics;
  // A plain command on the Redis behind the store (RedisStore::Command, or the
  // cluster's routed by its first key: argv[1], or for EVAL/EVALSHA the first
  // of KEYS); null for the local store. Reads Redis tenant tables
  // (tenant_hash.h) and shares the rollback guards (RollbackFleet).
  RedisCommand redis_command;
  std::string key_prefix;  // the remote store's key prefix; "" for the local store
  // The local store when it is the store decisions go to (its state is saved
  // and loaded across restarts); null for a remote store.
  LocalStore* local = nullptr;
};

// Opens `spec`'s store through the factory. `env.on_breaker` and `env.warn`
// get one call per circuit breaker transition and per fleet warning.
// Per-rule failure modes need nothing here: the Enforcer tags each item.
Result<StoreBundle> CreateStore(const StoreSpec& spec, const StoreEnv& env);

}  // namespace tollgate::runtime

#endif  // TOLLGATE_SRC_RUNTIME_STORE_BUNDLE_H_
