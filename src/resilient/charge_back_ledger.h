// ChargeBackLedger: what kDegrade granted locally, per key, to be charged to
// the primary store when it is back.
//
// Thread safety: all methods are safe to call concurrently; each of kShards
// shards has its own mutex guarding its map. The size cap is global (an atomic
// count of entries), so memory stays bounded by max_keys entries.
#ifndef TOLLGATE_SRC_RESILIENT_CHARGE_BACK_LEDGER_H_
#define TOLLGATE_SRC_RESILIENT_CHARGE_BACK_LEDGER_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tollgate/limit.h"

namespace tollgate::resilient {

class ChargeBackLedger {
 public:
  struct Entry {
    std::string key;
    Limit limit;   // the primary's (unscaled) limit last used with the key
    int64_t cost;  // total granted locally, not yet charged back
  };

  explicit ChargeBackLedger(size_t max_keys) : max_keys_(max_keys) {}

  // Adds `cost` to `key`. False (and nothing recorded) when the key is new and
  // the ledger already holds max_keys keys.
  bool Add(std::string_view key, const Limit& limit, int64_t cost);
  // Removes and returns every entry.
  std::vector<Entry> TakeAll();
  size_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kShards = 16;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Value {
    Limit limit;
    int64_t cost;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Value, Hash, std::equal_to<>> entries;  // guarded by mu
  };

  const size_t max_keys_;
  std::atomic<size_t> size_{0};
  std::array<Shard, kShards> shards_;
};

}  // namespace tollgate::resilient

#endif  // TOLLGATE_SRC_RESILIENT_CHARGE_BACK_LEDGER_H_
