// MakeStore(url): a Store from "local[://?...]" or "redis://...".
#include <charconv>

#include "tollgate/limiter.h"

#ifdef TOLLGATE_HAVE_REDIS
#include "tollgate/redis_store.h"
#endif

namespace tollgate {
namespace {

Result<size_t> ParseSize(std::string_view name, std::string_view value) {
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v == 0)
    return InvalidArgument("store url: " + std::string(name) + " must be a positive integer");
  return v;
}

Result<std::shared_ptr<Store>> MakeLocal(std::string_view query, const Clock* clock) {
  LocalStoreOptions options;
  options.clock = clock;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (name == "max_keys" || name == "shards") {
      auto v = ParseSize(name, value);
      if (!v.ok()) return v.status();
      (name == "max_keys" ? options.max_keys : options.shards) = *v;
    } else if (name == "overflow" && (value == "reject" || value == "allow")) {
      options.overflow = value == "allow" ? OverflowPolicy::kAllow : OverflowPolicy::kReject;
    } else {
      return InvalidArgument("store url: unknown local option '" + std::string(name.substr(0, 64)) +
                             "'");
    }
  }
  auto store = LocalStore::Create(options);
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
  return InvalidArgument("store url: expected local[://?max_keys=N&shards=N] or redis[s]://...");
}

}  // namespace tollgate
