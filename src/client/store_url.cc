// MakeStore(url): a Store from "local[://?...]" or "redis://...".
#include "tollgate/limiter.h"

#ifdef TOLLGATE_HAVE_REDIS
#include "tollgate/redis_store.h"
#endif

namespace tollgate {
namespace {

Result<std::shared_ptr<Store>> MakeLocal(std::string_view query, const Clock* clock) {
  LocalStoreOptions defaults;
  defaults.clock = clock;
  auto options = ParseLocalStoreQuery(query, defaults);
  if (!options.ok()) return options.status();
  auto store = LocalStore::Create(*options);
  if (!store.ok()) return store.status();
  return std::shared_ptr<Store>(std::move(*store));
}

}  // namespace

Result<std::shared_ptr<Store>> MakeStore(std::string_view url, const Clock* clock) {
  if (clock == nullptr) return InvalidArgument("store url: clock must not be null");
  if (url == "local" || url == "local://") return MakeLocal({}, clock);
  if (url.starts_with("local://?")) return MakeLocal(url.substr(9), clock);
  if (url.starts_with("redis://") || url.starts_with("rediss://")) {
#ifdef TOLLGATE_HAVE_REDIS
    auto options = ParseRedisUrl(url);
    if (!options.ok()) return options.status();
    options->clock = clock;
    auto store = RedisStore::Create(*options);
    if (!store.ok()) return store.status();
    return std::shared_ptr<Store>(std::move(*store));
#else
    return InvalidArgument("store url: this tollgate was built without the Redis store");
#endif
  }
  return InvalidArgument(
      "store url: expected local[://?max_keys=N&shards=N&overflow=evict|allow|reject"
      "&max_keys_per_rule=N] or redis[s]://...");
}

}  // namespace tollgate
