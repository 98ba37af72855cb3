// Store factory: turns `--store` and `--failure-mode` into the Store tollgated uses.
//
//   local                                  -> LocalStore (bounded, in process)
//   redis://[user:pass@]HOST:PORT[/db]     -> RedisStore, wrapped by the resilient store
//   redis-cluster://HOST:PORT[,HOST:PORT]  -> Redis Cluster, wrapped likewise
//   rediss://... and rediss-cluster://...  -> the same over TLS (docs/redis.md)
//
// The failure mode (open | closed | degrade) applies to remote stores only: a
// local store cannot be unreachable. A store kind this build does not include
// fails with "store X not available in this build".
//
// Ownership: the bundle owns the store(s); `store` is what the Enforcer uses.
// Thread safety: the bundle is immutable after Create; its stores are thread-safe.
#ifndef TOLLGATE_SERVER_STORE_FACTORY_H_
#define TOLLGATE_SERVER_STORE_FACTORY_H_

#include <functional>
#include <memory>
#include <string>

#include "server/config.h"
#include "server/log.h"
#include "server/metrics.h"
#include "tollgate/clock.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

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
  // Extra owned objects (the inner store of a wrapper) kept alive with the bundle.
  std::vector<std::shared_ptr<void>> keep_alive;
};

// `log`, when given, gets one line per circuit breaker transition. Per-rule
// failure modes need no policy here: the Enforcer tags each store item with
// its rule's mode. `policies` is unused.
Result<StoreBundle> CreateStore(const ServerConfig& config, const Clock* clock,
                                std::shared_ptr<Logger> log = nullptr,
                                std::shared_ptr<PolicyStore> policies = nullptr);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_STORE_FACTORY_H_
