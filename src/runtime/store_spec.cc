// The store-spec grammar (store_spec.h): schemes, checks, the local options.
#include "runtime/store_spec_impl.h"

#include "base/redact.h"

#if TOLLGATE_HAVE_REDIS
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#endif

namespace tollgate {
namespace {

constexpr std::string_view kKnownSchemes =
    "local[://?OPTIONS], redis://, rediss://, redis-cluster://, rediss-cluster:// or "
    "redis-sentinel://";

// A bad URL quoted back: redacted (it may hold a password) and at most 100
// bytes (it may be long or hostile).
std::string Quoted(std::string_view url) { return "'" + base::RedactUrl(url, 100) + "'"; }

}  // namespace

Result<StoreScheme> StoreSchemeOf(std::string_view url) {
  if (url == "local" || url == "local://" || url.starts_with("local://?")) {
    return StoreScheme::kLocal;
  }
  if (url.starts_with("redis://") || url.starts_with("rediss://")) return StoreScheme::kRedis;
  // A RedisStore too, its master found through the sentinels.
  if (url.starts_with("redis-sentinel://") || url.starts_with("rediss-sentinel://")) {
    return StoreScheme::kRedis;
  }
  if (url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://")) {
    return StoreScheme::kRedisCluster;
  }
  return InvalidArgument("store: unknown store URL " + Quoted(url) + ": expected " +
                         std::string(kKnownSchemes));
}

std::string_view StoreSchemeName(StoreScheme scheme) {
  switch (scheme) {
    case StoreScheme::kLocal:
      return "local";
    case StoreScheme::kRedis:
      return "redis";
    case StoreScheme::kRedisCluster:
      return "redis-cluster";
  }
  return "unknown";
}

Result<LocalStoreOptions> LocalOptionsOf(const StoreSpec& spec) {
  const size_t query = spec.url.find("://?");
  if (query == std::string::npos) return spec.local;
  auto options = ParseLocalStoreQuery(std::string_view(spec.url).substr(query + 4), spec.local);
  if (!options.ok()) return InvalidArgument("store: " + std::string(options.status().message()));
  return options;
}

namespace runtime {

bool IsSentinelUrl(std::string_view url) {
  return url.starts_with("redis-sentinel://") || url.starts_with("rediss-sentinel://");
}

Status NotInThisBuild(StoreScheme scheme, std::string_view url) {
  return UnavailableError("store " + std::string(StoreSchemeName(scheme)) +
                          " not available in this build (" + Quoted(url) +
                          "); build with the redis and resilient libraries");
}

}  // namespace runtime

Status CheckStoreSpec(const StoreSpec& spec) {
  auto scheme = StoreSchemeOf(spec.url);
  if (!scheme.ok()) return scheme.status();
  if (*scheme == StoreScheme::kLocal) {
    auto local = LocalOptionsOf(spec);
    return local.ok() ? Status::Ok() : local.status();
  }
#if TOLLGATE_HAVE_REDIS
  Status parsed = *scheme == StoreScheme::kRedisCluster ? ParseRedisClusterUrl(spec.url).status()
                  : runtime::IsSentinelUrl(spec.url)    ? ParseRedisSentinelUrl(spec.url).status()
                                                        : ParseRedisUrl(spec.url).status();
  if (!parsed.ok()) return InvalidArgument("store: " + std::string(parsed.message()));
  if (spec.call_timeout.count() < 0) return InvalidArgument("store: call timeout must be >= 0");
  if (const auto& r = spec.resilience) {
    if (!(r->degrade_fraction > 0 && r->degrade_fraction <= 1)) {
      return InvalidArgument("store: degrade_fraction must be in (0, 1]");
    }
  }
  return Status::Ok();
#else
  return runtime::NotInThisBuild(*scheme, spec.url);
#endif
}

Result<std::shared_ptr<Store>> MakeStore(std::string_view url, const Clock* clock) {
  if (clock == nullptr) return InvalidArgument("store: clock must not be null");
  StoreSpec spec;
  spec.url = std::string(url);
  StoreEnv env;
  env.clock = clock;
  auto opened = OpenStore(spec, env);
  if (!opened.ok()) return opened.status();
  return std::move(opened->store);
}

}  // namespace tollgate
