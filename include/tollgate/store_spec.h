// Store specs: the one grammar and factory that turn a store URL (plus, for
// remote stores, how to survive their outages) into a running Store. tollgated
// (--store / the config's `store`), the `tollgate` CLI and embedders
// (MakeStore) all go through it, so every front end accepts the same URLs and
// refuses bad ones with the same messages.
//
// URL grammar (the scheme picks the store):
//   local | local:// | local://?max_keys=N&shards=N&overflow=evict|allow|reject&max_keys_per_rule=N
//                                              LocalStore (ParseLocalStoreQuery)
//   redis://[[user]:password@]host[:port][/db][?prefix=P&timeout_ms=N&connect_timeout_ms=N&pool=N]
//   rediss://...   the same over TLS (+ tls_ca_file, tls_cert_file, tls_key_file,
//                  tls_server_name, tls_insecure_skip_verify)    RedisStore (ParseRedisUrl)
//   redis-cluster://[[user]:password@]host:port[,host:port...][?options as redis://]
//   rediss-cluster://...                       RedisClusterStore (ParseRedisClusterUrl)
//   redis-sentinel://[[user]:password@]host:port[,host:port...]/<master>[?master_password=P&
//                    master_username=U&db=N&options as redis://]
//                  RedisStore whose master the sentinels name (ParseRedisSentinelUrl); the
//                  user info authenticates to the sentinels.
//   rediss-sentinel://...  the same over TLS to the sentinels and the master (+ rediss://'s
//                  tls_* options)
//
// Resilience and the fleet are not URL schemes: they are StoreSpec::resilience.
// With it, a remote store is wrapped in a ResilientStore (failure mode +
// circuit breaker + degrade + charge-back); with resilience->fleet the
// instances sharing the store count each other through a fleet registry whose
// commands go through the store's own Command (RedisStore, or
// RedisClusterStore routed by the fleet key), never a connection of its own.
// A local store ignores it (it cannot be unreachable).
//
// Errors: kInvalidArgument "store: ..." naming the part of the spec that is
// wrong and why (an unknown scheme lists the known ones; a store this build
// lacks says so: kUnavailable "store redis not available in this build").
// Thread safety: the functions are pure or create new objects; the opened
// stores are thread-safe. Ownership: OpenedStore owns everything it opened.
#ifndef TOLLGATE_STORE_SPEC_H_
#define TOLLGATE_STORE_SPEC_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/circuit_breaker.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate {

class RedisStore;
class RedisClusterStore;
class ResilientStore;

enum class StoreScheme { kLocal, kRedis, kRedisCluster };

// The store a URL names (rediss:// and redis-sentinel:// are kRedis,
// rediss-cluster:// kRedisCluster);
// kInvalidArgument for any other scheme, naming the known ones.
Result<StoreScheme> StoreSchemeOf(std::string_view url);
std::string_view StoreSchemeName(StoreScheme scheme);  // "local", "redis", "redis-cluster"

// How a remote store is kept deciding through its outages (resilient_store.h).
struct ResilienceSpec {
  FailureMode mode = FailureMode::kOpen;  // for items without a failure_mode tag
  double degrade_fraction = 0.5;
  bool charge_back = true;
  Nanos call_deadline{0};
  // Breaker thresholds; its clock is StoreEnv::clock and its listener StoreEnv::on_breaker.
  CircuitBreakerOptions breaker;
  // Register in the fleet (the degrade divisor) on the store itself, in the
  // sorted set key_prefix + "{fleet}".
  bool fleet = true;
};

struct StoreSpec {
  std::string url = "local";
  // The local store's options the URL's query does not set (the query wins).
  LocalStoreOptions local;
  // Remote stores: the per-call timeout, replacing the URL's timeout_ms; 0: the URL's.
  std::chrono::milliseconds call_timeout{0};
  // Remote stores: the cap on reconnect backoff; 0: the store's default.
  std::chrono::milliseconds reconnect_backoff_max{0};
  // Remote stores: wrap in a ResilientStore; empty: the bare store (errors reach the caller).
  std::optional<ResilienceSpec> resilience;
};

// spec.local with the query of a "local://?..." URL applied (the query wins).
Result<LocalStoreOptions> LocalOptionsOf(const StoreSpec& spec);

// Checks `spec` without opening anything: the scheme, the URL (its options,
// hosts, ports), the local options. The same checks OpenStore makes first.
Status CheckStoreSpec(const StoreSpec& spec);

// What the opened store needs from its host.
struct StoreEnv {
  const Clock* clock = &SystemClock::Instance();  // not owned; must outlive the store
  // Times the remote store's I/O (call deadlines, reconnect backoff, topology
  // timers, the resilient wrapper's call deadline and prober); not owned.
  const Clock* io_clock = &SystemClock::Instance();
  // One call per breaker transition (never per request); optional.
  std::function<void(const BreakerTransition&)> on_breaker;
  // A problem that does not stop the store (the fleet registry could not be
  // made: degrade then divides by 1); optional.
  std::function<void(std::string_view event, const Status& why)> warn;
};

// An opened store and typed views of its parts (for stats and metrics).
struct OpenedStore {
  std::shared_ptr<Store> store;  // what decisions go to
  StoreScheme scheme = StoreScheme::kLocal;
  // "local (max_keys 1048576, ...)", "redis 127.0.0.1:6379 db 0, failure mode open"
  std::string description;
  // The parts, or null: the local store, the remote store, its resilient wrapper.
  LocalStore* local = nullptr;
  RedisStore* redis = nullptr;
  RedisClusterStore* cluster = nullptr;
  ResilientStore* resilient = nullptr;
  // Remote stores: the key prefix of the URL (shared keys such as the fleet's
  // sets are named with it); empty for the local store.
  std::string key_prefix;
  // Whether the backing store is healthy (its connections up and, when
  // resilient, its breaker not open), whatever the failure mode says.
  bool BackingHealthy() const;
};

Result<OpenedStore> OpenStore(const StoreSpec& spec, const StoreEnv& env = {});

// A bare store from a URL, for configuration files, command lines and
// embedders: OpenStore({.url = url}, {.clock = clock}).store.
Result<std::shared_ptr<Store>> MakeStore(std::string_view url,
                                         const Clock* clock = &SystemClock::Instance());

}  // namespace tollgate

#endif  // TOLLGATE_STORE_SPEC_H_
