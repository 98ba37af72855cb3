// LocalStore: in-process, sharded, bounded-memory rate-limit state.
//
// Layout: `shards` fixed-size open-addressing tables in one array allocated
// at creation (memory is bounded by max_keys from the start and never grows).
// A key is identified by a keyed 128-bit hash of its bytes (the 256-bit
// secret is random per store, so clients cannot aim collisions); a slot is 32
// bytes, two to a cache line.
//
// Hot path (existing key, word-sized algorithm): a lock-free probe of at most
// kProbeWindow slots, then a CAS loop on the slot's 64-bit state word. No lock,
// no allocation. Inserting a new key takes its shard's mutex.
//
// Bounded memory: a new key that finds no free slot in its probe window (or a
// shard that holds its share of max_keys) reclaims a slot inside the window:
// first the one idle the longest (bucket full again / window over: such a
// slot carries no information). Keys still in debt are never evicted, so a
// throttled client is never silently handed a fresh bucket; when nothing can
// be reclaimed the decision follows `overflow` and a counter records it.
//
// Thread safety: all methods are safe to call concurrently.
#ifndef TOLLGATE_LOCAL_STORE_H_
#define TOLLGATE_LOCAL_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/store.h"

namespace tollgate {

enum class OverflowPolicy { kReject, kAllow };

struct LocalStoreOptions {
  size_t max_keys = size_t{1} << 20;
  size_t shards = 64;  // rounded up to a power of two
  OverflowPolicy overflow = OverflowPolicy::kReject;
  const Clock* clock = &SystemClock::Instance();  // not owned; must outlive the store
};

struct LocalStoreStats {
  size_t keys = 0;            // live keys
  size_t capacity_slots = 0;  // slots allocated
  size_t bytes = 0;           // bytes allocated for slots and shards
  uint64_t reclaimed = 0;     // idle keys reclaimed to make room
  uint64_t overflow_rejected = 0;
  uint64_t overflow_allowed = 0;
};

class LocalStore final : public Store {
 public:
  static constexpr size_t kProbeWindow = 64;

  static Result<std::unique_ptr<LocalStore>> Create(const LocalStoreOptions& options);
  ~LocalStore() override;

  // The fast path for one key; reads the store's clock.
  Decision Acquire(std::string_view key, const Limit& limit, int64_t cost);
  // Same, at a caller-supplied monotonic time (ns, same epoch as the clock).
  Decision AcquireAt(std::string_view key, const Limit& limit, int64_t cost, int64_t now_ns);

  // A key hashed once, for callers that decide on the same key again and
  // again (a connection, a player, a session): saves hashing every time.
  // Valid only with the store that prepared it.
  struct PreparedKey {
    uint64_t hi = 0;
    uint64_t lo = 0;
  };
  PreparedKey Prepare(std::string_view key) const;
  Decision AcquireAt(const PreparedKey& key, const Limit& limit, int64_t cost, int64_t now_ns);

  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override;
  Result<BatchDecision> AcquireAt(std::span<const AcquireItem> items, int64_t now_ns);

  // Many independent decisions in one call (not all-or-nothing): out[i] is
  // what Acquire(items[i].key, *items[i].limit, items[i].cost) would return,
  // in order, at one clock reading. Hashes a group of keys and prefetches
  // their slots before deciding it, so that over many keys (more than fit in
  // the cache) the memory latency of a group overlaps instead of adding up.
  // kInvalidArgument, before anything is charged, when out.size() differs
  // from items.size() or an item has no limit or a negative cost.
  Status AcquireEach(std::span<const AcquireItem> items, std::span<Decision> out);
  Status AcquireEachAt(std::span<const AcquireItem> items, std::span<Decision> out, int64_t now_ns);

  // Forgets every key (tests, admin).
  void Clear();

  LocalStoreStats Stats() const;
  std::string Name() const override { return "local"; }

  class Impl;

 private:
  explicit LocalStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate

#endif  // TOLLGATE_LOCAL_STORE_H_
