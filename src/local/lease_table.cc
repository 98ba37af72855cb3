#include "local/lease_table.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace tollgate {
namespace {

// splitmix64's finalizer: a bijection on 64-bit words.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

std::string HexId(uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return std::string(buf, 16);
}

bool ParseHexId(std::string_view text, uint64_t* out) {
  if (!ValidLeaseId(text) || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) v = (v << 4) | static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  *out = v;
  return true;
}

}  // namespace

LeaseTable::LeaseTable(size_t max_keys, size_t shards) : max_keys_(max_keys) {
  shards = std::max<size_t>(shards, 1);
  for (size_t i = 0; i < shards; ++i) shards_.push_back(std::make_unique<Shard>());
  std::random_device rd;
  id_secret_ = (uint64_t{rd()} << 32) ^ rd();
}

LeaseTable::Shard& LeaseTable::ShardOf(std::string_view key) {
  return *shards_[StringHash{}(key) % shards_.size()];
}

uint64_t LeaseTable::NextId() {
  return Mix(id_counter_.fetch_add(1, std::memory_order_relaxed) ^ id_secret_);
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

LeaseDecision LeaseTable::Acquire(std::string_view key, const LeaseLimit& limit, int64_t now_ns) {
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
  const Lease lease{NextId(), now_ns + limit.lease_ns()};
  leases.push_back(lease);
  d.allowed = true;
  d.remaining = limit.max_in_flight() - live - 1;
  d.expires_in = Nanos(limit.lease_ns());
  d.lease_id = HexId(lease.id);
  return d;
}

Result<bool> LeaseTable::Release(std::string_view key, std::string_view lease_id, int64_t now_ns) {
  uint64_t id = 0;
  if (!ParseHexId(lease_id, &id)) {
    return InvalidArgument("lease_id: must be 1 to 16 lowercase hex digits");
  }
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  auto it = shard.leases.find(key);
  if (it == shard.leases.end()) return false;
  auto& leases = it->second;
  bool released = false;
  for (size_t i = 0; i < leases.size(); ++i) {
    if (leases[i].id == id) {
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
