// OpenStore (store_spec.h): a running store from a checked spec.
#include <string>
#include <utility>

#include "runtime/store_spec_impl.h"
#include "tollgate/local_store.h"
#if TOLLGATE_HAVE_REDIS
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#include "tollgate/resilient_store.h"
#endif

namespace tollgate {
namespace {

Result<OpenedStore> OpenLocal(const StoreSpec& spec, const StoreEnv& env) {
  auto options = LocalOptionsOf(spec);
  if (!options.ok()) return options.status();
  options->clock = env.clock;
  auto created = LocalStore::Create(*options);
  if (!created.ok()) return InvalidArgument("store: " + std::string(created.status().message()));
  std::shared_ptr<LocalStore> local = std::move(created).value();
  OpenedStore out;
  out.scheme = StoreScheme::kLocal;
  static constexpr const char* kOverflow[] = {"reject", "allow", "evict"};
  out.description = "local (max_keys " + std::to_string(options->max_keys) + ", overflow " +
                    kOverflow[static_cast<int>(options->overflow)] + ", max_keys_per_rule " +
                    std::to_string(options->max_keys_per_group) + ")";
  out.local = local.get();
  out.store = std::move(local);
  return out;
}

#if TOLLGATE_HAVE_REDIS
// The fleet registry over the store's own command function, in the sorted set
// key_prefix + "{fleet}" (one cluster slot). Null (with a warning) when it
// cannot be made: degrade then divides by the last known count (1).
std::unique_ptr<FleetRegistry> MakeFleet(const std::string& key_prefix, FleetCommand command,
                                         const StoreEnv& env) {
  RedisFleetOptions f;
  f.key = key_prefix + "{fleet}";
  auto fleet = CreateRedisFleetRegistry(std::move(f), std::move(command));
  if (!fleet.ok()) {
    if (env.warn) env.warn("fleet_registry_unavailable", fleet.status());
    return nullptr;
  }
  return std::move(fleet).value();
}

// Wraps `out.store` (a remote store) in a ResilientStore per spec.resilience.
Status WrapResilient(const StoreSpec& spec, const StoreEnv& env,
                     std::unique_ptr<FleetRegistry> fleet, std::unique_ptr<Store> primary,
                     OpenedStore& out) {
  const ResilienceSpec& r = *spec.resilience;
  ResilientStoreOptions options;
  options.mode = r.mode;
  options.degrade_fraction = r.degrade_fraction;
  options.charge_back = r.charge_back;
  options.call_deadline = r.call_deadline;
  options.clock = env.clock;
  options.io_clock = env.io_clock;
  options.breaker = r.breaker;
  options.breaker.clock = env.clock;
  options.breaker.listener = env.on_breaker;
  options.fleet = std::move(fleet);
  auto created = ResilientStore::Create(std::move(primary), std::move(options));
  if (!created.ok()) return InvalidArgument("store: " + std::string(created.status().message()));
  std::shared_ptr<ResilientStore> resilient = std::move(created).value();
  out.description += ", failure mode " + std::string(FailureModeName(r.mode));
  out.resilient = resilient.get();
  out.store = std::move(resilient);
  return Status::Ok();
}

// The opened remote store `primary` (its parts already in `out`), bare or
// wrapped per spec.resilience, with a fleet registry over `fleet_command`.
Result<OpenedStore> Finish(const StoreSpec& spec, const StoreEnv& env,
                           std::unique_ptr<Store> primary, OpenedStore out,
                           const std::string& key_prefix, FleetCommand fleet_command) {
  if (!spec.resilience) {
    out.store = std::move(primary);
    return out;
  }
  std::unique_ptr<FleetRegistry> fleet;
  if (spec.resilience->fleet) fleet = MakeFleet(key_prefix, std::move(fleet_command), env);
  if (Status s = WrapResilient(spec, env, std::move(fleet), std::move(primary), out); !s.ok()) {
    return s;
  }
  return out;
}

// The spec's settings over a parsed URL's node options.
void ApplyRemote(const StoreSpec& spec, const StoreEnv& env, RedisOptions& node) {
  if (spec.call_timeout.count() > 0) node.call_timeout = spec.call_timeout;
  if (spec.reconnect_backoff_max.count() > 0) {
    node.reconnect_backoff_max = spec.reconnect_backoff_max;
  }
  node.clock = env.clock;
  node.io_clock = env.io_clock;
}

Result<OpenedStore> OpenRedis(const StoreSpec& spec, const StoreEnv& env) {
  const bool sentinel = runtime::IsSentinelUrl(spec.url);
  auto options = sentinel ? ParseRedisSentinelUrl(spec.url) : ParseRedisUrl(spec.url);
  if (!options.ok()) return InvalidArgument("store: " + std::string(options.status().message()));
  ApplyRemote(spec, env, *options);
  auto created = RedisStore::Create(*options);
  if (!created.ok()) return InvalidArgument("store: " + std::string(created.status().message()));
  std::unique_ptr<RedisStore> redis = std::move(created).value();
  OpenedStore out;
  out.scheme = StoreScheme::kRedis;
  if (sentinel) {
    std::string sentinels;
    for (const auto& s : options->sentinels) sentinels += (sentinels.empty() ? "" : ",") + s;
    out.description = "redis-sentinel master '" + options->sentinel_master + "' via " + sentinels +
                      " db " + std::to_string(options->db);
  } else {
    out.description = "redis " + options->host + ":" + std::to_string(options->port) + " db " +
                      std::to_string(options->db);
  }
  out.redis = redis.get();
  out.key_prefix = options->key_prefix;
  RedisStore* raw = redis.get();  // owned by the resilient store, which owns the fleet too
  return Finish(
      spec, env, std::move(redis), std::move(out), options->key_prefix,
      [raw](std::vector<std::string> argv) { return IntegerReply(raw->Command(std::move(argv))); });
}

Result<OpenedStore> OpenRedisCluster(const StoreSpec& spec, const StoreEnv& env) {
  auto options = ParseRedisClusterUrl(spec.url);
  if (!options.ok()) return InvalidArgument("store: " + std::string(options.status().message()));
  ApplyRemote(spec, env, options->node);
  auto created = RedisClusterStore::Create(*options);
  if (!created.ok()) return InvalidArgument("store: " + std::string(created.status().message()));
  std::unique_ptr<RedisClusterStore> cluster = std::move(created).value();
  OpenedStore out;
  out.scheme = StoreScheme::kRedisCluster;
  out.description = "redis-cluster (" + std::to_string(options->seeds.size()) + " seeds)";
  out.cluster = cluster.get();
  out.key_prefix = options->node.key_prefix;
  // Routed by the fleet key's slot; MOVED/ASK are the cluster store's business.
  RedisClusterStore* raw = cluster.get();
  return Finish(spec, env, std::move(cluster), std::move(out), options->node.key_prefix,
                [raw, key = options->node.key_prefix + "{fleet}"](std::vector<std::string> argv) {
                  return IntegerReply(raw->Command(key, std::move(argv)));
                });
}
#endif

}  // namespace

bool OpenedStore::BackingHealthy() const {
#if TOLLGATE_HAVE_REDIS
  if (resilient != nullptr) {
    return resilient->breaker().state() != BreakerState::kOpen && resilient->primary().Healthy();
  }
#endif
  return store != nullptr && store->Healthy();
}

Result<OpenedStore> OpenStore(const StoreSpec& spec, const StoreEnv& env) {
  if (env.clock == nullptr) return InvalidArgument("store: clock must not be null");
  if (env.io_clock == nullptr) return InvalidArgument("store: io_clock must not be null");
  if (Status s = CheckStoreSpec(spec); !s.ok()) return s;
  const StoreScheme scheme = *StoreSchemeOf(spec.url);
  if (scheme == StoreScheme::kLocal) return OpenLocal(spec, env);
#if TOLLGATE_HAVE_REDIS
  if (scheme == StoreScheme::kRedis) return OpenRedis(spec, env);
  return OpenRedisCluster(spec, env);
#else
  return runtime::NotInThisBuild(scheme, spec.url);
#endif
}

}  // namespace tollgate
