#include "local/lease_table.h"

#include <algorithm>

namespace tollgate {

LeaseTable::LeaseTable(size_t max_keys, size_t shards) : max_keys_(max_keys) {
  shards = std::max<size_t>(shards, 1);
  for (size_t i = 0; i < shards; ++i) shards_.push_back(std::make_unique<Shard>());
}

LeaseTable::Shard& LeaseTable::ShardOf(std::string_view key) {
  return *shards_[StringHash{}(key) % shards_.size()];
}

void LeaseTable::SweepLocked(Shard& shard, int64_t now_ns) {
  for (auto it = shard.leases.begin(); it != shard.leases.end();) {
    auto& v = it->second;
    std::erase_if(v, [&](const Lease& l) { return l.expires_ns <= now_ns; });
    if (v.empty()) {
      it = shard.leases.erase(it);
      keys_.fetch_sub(1, std::memory_order_relaxed);
    } else {
      ++it;
    }
  }
}

Result<LeaseDecision> LeaseTable::Acquire(std::string_view key, const LeaseLimit& limit,
                                          int64_t now_ns) {
  LeaseDecision d;
  d.limit = limit.max_in_flight();
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  auto it = shard.leases.find(key);
  if (it == shard.leases.end()) {
    // Reserve the key's place in the global count before inserting, so
    // concurrent inserts in different shards never exceed max_keys.
    if (keys_.fetch_add(1, std::memory_order_relaxed) >= max_keys_) {
      keys_.fetch_sub(1, std::memory_order_relaxed);
      SweepLocked(shard, now_ns);
      if (keys_.fetch_add(1, std::memory_order_relaxed) >= max_keys_) {
        keys_.fetch_sub(1, std::memory_order_relaxed);
        overflow_rejected_.fetch_add(1, std::memory_order_relaxed);
        d.retry_after = Nanos(1'000'000'000);
        return d;
      }
    }
    it = shard.leases.emplace(std::string(key), std::vector<Lease>{}).first;
  }
  auto& leases = it->second;
  std::erase_if(leases, [&](const Lease& l) { return l.expires_ns <= now_ns; });
  const auto live = static_cast<int64_t>(leases.size());
  if (live >= limit.max_in_flight()) {
    int64_t soonest = leases.front().expires_ns;
    for (const Lease& l : leases) soonest = std::min(soonest, l.expires_ns);
    d.remaining = 0;
    d.retry_after = Nanos(soonest - now_ns);
    return d;
  }
  std::optional<std::string> id = RandomLeaseId();
  if (!id) {
    if (leases.empty()) {
      shard.leases.erase(it);
      keys_.fetch_sub(1, std::memory_order_relaxed);
    }
    return InternalError("lease: no random id (RAND_bytes failed)");
  }
  Lease lease{{}, now_ns + limit.lease_ns()};
  std::copy(id->begin(), id->end(), lease.id.begin());
  leases.push_back(lease);
  d.allowed = true;
  d.remaining = limit.max_in_flight() - live - 1;
  d.expires_in = Nanos(limit.lease_ns());
  d.lease_id = std::move(*id);
  return d;
}

Result<bool> LeaseTable::Release(std::string_view key, std::string_view lease_id, int64_t now_ns) {
  // Only the form this table hands out (a random id's 32 digits).
  if (!ValidLeaseId(lease_id) || lease_id.size() != 2 * kRandomLeaseIdBytes) {
    return InvalidArgument("lease_id: must be 32 lowercase hex digits");
  }
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  auto it = shard.leases.find(key);
  if (it == shard.leases.end()) return false;
  auto& leases = it->second;
  bool released = false;
  for (size_t i = 0; i < leases.size(); ++i) {
    if (LeaseIdsEqual(leases[i].Id(), lease_id)) {
      // An expired lease no longer counts, so releasing it frees nothing.
      released = leases[i].expires_ns > now_ns;
      leases[i] = leases.back();
      leases.pop_back();
      break;
    }
  }
  std::erase_if(leases, [&](const Lease& l) { return l.expires_ns <= now_ns; });
  if (leases.empty()) {
    shard.leases.erase(it);
    keys_.fetch_sub(1, std::memory_order_relaxed);
  }
  return released;
}

void LeaseTable::Clear() {
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    keys_.fetch_sub(shard->leases.size(), std::memory_order_relaxed);
    shard->leases.clear();
  }
}

}  // namespace tollgate
