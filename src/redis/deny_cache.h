// DenyCache: "known denied until t" for single-item decisions.
//
// Tokens only refill at the limit's known rate, and other instances can only
// take tokens away, so after Redis denied (key, cost, limit) with retry_after
// R at a moment no earlier than local time t0, Redis would deny the same again
// until t0 + R. The entry key includes the limit's constants, so a changed
// limit never hits an entry made under the old one.
//
// Thread safety: all methods are safe to call concurrently (one mutex).
#ifndef TOLLGATE_SRC_REDIS_DENY_CACHE_H_
#define TOLLGATE_SRC_REDIS_DENY_CACHE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "tollgate/decision.h"
#include "tollgate/limit.h"

namespace tollgate::redis {

class DenyCache {
 public:
  explicit DenyCache(size_t max_entries) : max_entries_(max_entries) {}

  static std::string EntryKey(std::string_view redis_key, const Limit& limit, int64_t cost) {
    std::string k(redis_key);
    k += '|';
    k += std::to_string(cost) + '|' + std::to_string(limit.tolerance_ns()) + '|' +
         std::to_string(limit.interval_ns()) + '|' + std::to_string(limit.max_delay_ns()) + '|' +
         std::to_string(limit.burst()) + '|' + std::to_string(static_cast<int>(limit.algorithm()));
    return k;
  }

  // The cached denial, with retry_after and reset_after moved to `now_ns`.
  std::optional<Decision> Lookup(const std::string& entry, int64_t now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(entry);
    if (it == map_.end()) return std::nullopt;
    if (now_ns >= it->second.until_ns) {
      map_.erase(it);
      return std::nullopt;
    }
    Decision d = it->second.decision;
    const int64_t elapsed = now_ns - it->second.at_ns;
    if (d.retry_after != Decision::kNever) d.retry_after = Nanos(it->second.until_ns - now_ns);
    d.reset_after = Nanos(std::max<int64_t>(0, d.reset_after.count() - elapsed));
    return d;
  }

  // Records that Redis denied `d` for a call sent at local time `sent_ns`.
  void Insert(const std::string& entry, const Decision& d, int64_t sent_ns) {
    if (d.allowed || d.retry_after.count() <= 0) return;
    const int64_t until =
        d.retry_after == Decision::kNever ? INT64_MAX : sent_ns + d.retry_after.count();
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= max_entries_) {
      for (auto it = map_.begin(); it != map_.end();) {
        it = it->second.until_ns <= sent_ns ? map_.erase(it) : std::next(it);
      }
      if (map_.size() >= max_entries_) map_.clear();
    }
    map_[entry] = Entry{d, sent_ns, until};
  }

  // Drops every entry of `redis_key` (any cost or limit): its state was reset
  // or overwritten by an administrator (key administration). Scans the map:
  // for administrative calls, never the request path.
  void Forget(std::string_view redis_key) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = map_.begin(); it != map_.end();) {
      const std::string& k = it->first;
      const bool of_key = k.size() > redis_key.size() + 1 && k.starts_with(redis_key) &&
                          k[redis_key.size()] == '|' && k[redis_key.size() + 1] >= '0' &&
                          k[redis_key.size() + 1] <= '9';
      it = of_key ? map_.erase(it) : std::next(it);
    }
  }

 private:
  struct Entry {
    Decision decision;
    int64_t at_ns;
    int64_t until_ns;
  };
  const size_t max_entries_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;
};

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_DENY_CACHE_H_
