#include "resilient/charge_back_ledger.h"

#include <limits>
#include <utility>

namespace tollgate::resilient {

bool ChargeBackLedger::Add(std::string_view key, const Limit& limit, int64_t cost) {
  Shard& shard = shards_[Hash{}(key) % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it != shard.entries.end()) {
    int64_t sum;
    if (__builtin_add_overflow(it->second.cost, cost, &sum))
      sum = std::numeric_limits<int64_t>::max();
    it->second.cost = sum;
    it->second.limit = limit;
    return true;
  }
  // Reserve a place under the global cap before inserting.
  size_t n = size_.load(std::memory_order_relaxed);
  do {
    if (n >= max_keys_) return false;
  } while (!size_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  shard.entries.emplace(std::string(key), Value{limit, cost});
  return true;
}

std::vector<ChargeBackLedger::Entry> ChargeBackLedger::TakeAll() {
  std::vector<Entry> out;
  for (Shard& shard : shards_) {
    std::unordered_map<std::string, Value, Hash, std::equal_to<>> taken;
    {
      std::lock_guard<std::mutex> lock(shard.mu);
      taken.swap(shard.entries);
    }
    size_.fetch_sub(taken.size(), std::memory_order_relaxed);
    out.reserve(out.size() + taken.size());
    for (auto& [key, value] : taken) out.push_back(Entry{key, value.limit, value.cost});
  }
  return out;
}

}  // namespace tollgate::resilient
