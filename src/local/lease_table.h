// LeaseTable: LocalStore's concurrency leases (see tollgate/lease.h).
//
// Layout: `shards` mutex-guarded hash maps from key to that key's live leases
// (at most max_in_flight (id, expiry) pairs, in no order). Every operation on
// a key runs under its shard's mutex, so the count check and the insert are
// one step: never more than max_in_flight live leases, however many threads.
// Expired leases are dropped whenever their key is touched; a key with no
// live lease is erased.
//
// Bounded memory: at most max_keys keys hold leases. A new key that finds the
// table full first sweeps its own shard for keys whose leases have all
// expired; if the table is still full the acquire is denied (retry_after 1 s,
// counted in overflow_rejected): running out of room never admits unlimited.
//
// Ids: 128 bits from a CSPRNG (base/lease_id.h), 32 hex digits: no number
// of ids seen tells anything about the next one. A release compares the id it
// is given with a key's live ids in constant time.
//
// Thread safety: all methods are safe to call concurrently.
#ifndef TOLLGATE_SRC_LOCAL_LEASE_TABLE_H_
#define TOLLGATE_SRC_LOCAL_LEASE_TABLE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/lease_id.h"
#include "tollgate/lease.h"

namespace tollgate {

class LeaseTable {
 public:
  LeaseTable(size_t max_keys, size_t shards);

  // kInternal when no random id could be drawn (nothing is recorded).
  Result<LeaseDecision> Acquire(std::string_view key, const LeaseLimit& limit, int64_t now_ns);
  // kInvalidArgument for a malformed id; else whether the lease was live.
  Result<bool> Release(std::string_view key, std::string_view lease_id, int64_t now_ns);

  size_t keys() const { return keys_.load(std::memory_order_relaxed); }
  uint64_t overflow_rejected() const { return overflow_rejected_.load(std::memory_order_relaxed); }
  void Clear();

 private:
  struct Lease {
    std::array<char, 2 * kRandomLeaseIdBytes> id;  // hex digits, no allocation
    int64_t expires_ns;
    std::string_view Id() const { return {id.data(), id.size()}; }
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    // Guarded by mu.
    std::unordered_map<std::string, std::vector<Lease>, StringHash, std::equal_to<>> leases;
  };

  Shard& ShardOf(std::string_view key);
  // Drops expired leases from every key of `shard` and erases emptied keys.
  void SweepLocked(Shard& shard, int64_t now_ns);

  const size_t max_keys_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<size_t> keys_{0};
  std::atomic<uint64_t> overflow_rejected_{0};
};

}  // namespace tollgate

#endif  // TOLLGATE_SRC_LOCAL_LEASE_TABLE_H_
