// The store tollgated runs: the runtime's store factory (tollgate/store_spec.h)
// fed from the server config, plus what the HTTP side needs of it: readiness
// and the store's Prometheus families. The URL grammar, the resilient wrapper
// and the fleet live in src/runtime; this file only maps the config and logs.
//
// Ownership: the bundle owns the store(s); `store` is what the Enforcer uses.
// Thread safety: the bundle is immutable after Create; its stores are thread-safe.
#ifndef TOLLGATE_SERVER_STORE_BUNDLE_H_
#define TOLLGATE_SERVER_STORE_BUNDLE_H_

#include <functional>
#include <memory>
#include <string>

#include "server/config.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/tenant_hash.h"
#include "tollgate/clock.h"
#include "tollgate/status.h"
#include "tollgate/store.h"
#include "tollgate/store_spec.h"

namespace tollgate::server {

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
  // (server/tenant_hash.h) and shares the rollback guards (RollbackFleet).
  RedisCommand redis_command;
  std::string key_prefix;  // the remote store's key prefix; "" for the local store
};

// The runtime store spec of the config's `store` section (URL, local_*,
// timeouts, failure mode, breaker). Remote stores are always resilient and
// register in the fleet. kInvalidArgument names the field that is wrong.
Result<StoreSpec> StoreSpecOf(const ServerConfig& config);

// Opens the config's store through the runtime factory. `log`, when given,
// gets one line per circuit breaker transition and the fleet's warnings.
// Per-rule failure modes need nothing here: the Enforcer tags each item.
// `clock` drives decisions and the breaker, `io_clock` the store's I/O timers.
Result<StoreBundle> CreateStore(const ServerConfig& config, const Clock* clock,
                                const Clock* io_clock, std::shared_ptr<Logger> log = nullptr);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_STORE_BUNDLE_H_
