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
// shard that holds its share of max_keys when max_keys keys are held) reclaims
// a slot: first the one of its probe window idle the longest (bucket full
// again / window over: such a slot carries no information, whatever its
// group). A shard holding less than its share (max_keys / shards) admits a key
// past max_keys, so that uneven hashing never makes a sparse shard evict the
// few clients it holds while the others keep many closer to rest: the store
// holds at most max_keys + shards x (max_keys / shards / 10 + 16) keys (that
// headroom is allocated at creation; with uniform hashing the excess is about
// the square root of a shard's share). When nothing is at rest the decision
// follows `overflow`:
//  - kEvict (default): the bucket of the new key's own group closest to rest
//    (the least debt left: for equal limits, the least recently charged; of
//    fixed and sliding windows ending together, the least used, and one at
//    its limit only when no less-used one is left) is dropped and the new
//    key takes its slot (searched in the probe window and, when the window
//    has a free place, in three more windows taken in turn: a shard of up to
//    four windows, 256 slots, is searched whole); the evicted client gets a
//    fresh bucket if it comes back. When its group has nothing in the window to
//    evict, the decision is allowed and counted as overflow_allowed. Storage
//    pressure never blocks traffic, and the clients deepest in debt (the
//    throttled ones) are the last to be evicted.
//  - kAllow: the decision is allowed without a slot (counted).
//  - kReject: the decision is denied with Retry-After 1 s (counted).
//
// Groups: a key's group is its bytes before the first `group_separator`
// (the policy layer's bucket keys start with the rule name and 0x1F, so a
// group is a rule). With max_keys_per_group set, a group holding that many
// keys reclaims and evicts only among its own keys, so one flooded group
// cannot take the slots another group needs; eviction of a bucket in debt
// never crosses groups. At most kMaxGroups groups are told apart; further
// groups share the last one's count.
//
// Leases (concurrency limits) live in a separate mutex-sharded table, see
// AcquireLease below and src/local/lease_table.h.
//
// Memory: 32 bytes a slot plus 2 (its group), slots = max_keys * ~1.4; a
// sliding_log key lives in a map beside the slots (about 700 bytes with up to
// 32 entries, 512 more per further 32); Stats().bytes counts both.
//
// Persistence (Save / Load, below): the state that carries information
// (buckets not full, windows and calendar quotas in progress, debts left by
// settlements, sliding logs) in a versioned, checksummed file, times in
// wall-clock ns so that time moves on across a restart. Leases are not saved:
// they expire by design (a holder that outlives a restart re-acquires).
//
// Thread safety: all methods are safe to call concurrently, except Load
// (before the first decision: see there).
#ifndef TOLLGATE_LOCAL_STORE_H_
#define TOLLGATE_LOCAL_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/store.h"

namespace tollgate {

enum class OverflowPolicy { kReject, kAllow, kEvict };

struct LocalStoreOptions {
  size_t max_keys = size_t{1} << 20;
  size_t shards = 64;  // rounded up to a power of two
  OverflowPolicy overflow = OverflowPolicy::kEvict;
  // 0: no per-group cap. Otherwise at most this many keys per group.
  size_t max_keys_per_group = 0;
  char group_separator = '\x1f';
  const Clock* clock = &SystemClock::Instance();  // not owned; must outlive the store
};

struct LocalStoreStats {
  size_t keys = 0;            // live keys
  size_t capacity_slots = 0;  // slots allocated
  size_t max_keys = 0;        // the key cap (LocalStoreOptions::max_keys) live keys count against
  size_t bytes = 0;           // bytes for slots, shards and sliding logs
  size_t log_keys = 0;        // sliding_log keys (beside `keys`)
  size_t log_bytes = 0;       // estimated bytes of sliding_log state (in `bytes`)
  uint64_t reclaimed = 0;     // idle keys reclaimed to make room
  uint64_t overflow_rejected = 0;
  uint64_t overflow_allowed = 0;
  uint64_t evicted = 0;   // buckets in debt evicted for a new key (kEvict)
  size_t lease_keys = 0;  // keys holding concurrency leases (at most max_keys, apart from `keys`)
  uint64_t lease_overflow_rejected = 0;  // lease acquires denied because lease_keys was full
};

// What a Save wrote.
struct LocalStateSaved {
  size_t buckets = 0;  // token / leaky buckets not full (debts included)
  size_t windows = 0;  // fixed / sliding windows and calendar quotas in progress
  size_t logs = 0;     // sliding_log keys with entries
  size_t bytes = 0;    // the file's size
};

struct LocalStateLoadOptions {
  // Called once for each group (rule) named in the file; false drops that
  // group's entries (tollgated: a rule the policy no longer has). Null: keep
  // all. Entries of the shared group (beyond kMaxGroups) are always kept.
  std::function<bool(std::string_view group)> keep_group;
  size_t max_bytes = size_t{1} << 30;  // a larger file is refused
};

// What a Load installed, and what it left out (each entry counted once).
struct LocalStateLoaded {
  size_t loaded = 0;
  size_t dropped_group = 0;    // keep_group said no
  size_t dropped_expired = 0;  // at rest by now: bucket refilled, window over
  size_t dropped_no_room = 0;  // no free slot (a smaller store, max_keys)
  int64_t saved_wall_ns = 0;   // when the file was written (wall clock)
};

class LeaseTable;

class LocalStore final : public Store {
 public:
  static constexpr size_t kProbeWindow = 64;
  static constexpr size_t kMaxGroups = 1024;

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
    uint32_t group = 0;
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

  // Concurrency leases (lease.h), exact under contention: each key's check
  // and insert run under its shard's mutex. At most max_keys keys hold
  // leases (a separate table from the buckets'); when it is full a new key is
  // denied with retry_after 1 s once keys whose leases all expired are swept.
  // Lease ids are 128 random bits (32 hex digits, OpenSSL's RAND_bytes);
  // a release with an id of another form is kInvalidArgument. Expiry follows
  // the store's clock.
  bool SupportsLeases() const override { return true; }
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) override;
  Result<bool> ReleaseLease(std::string_view key, std::string_view lease_id) override;

  // Key administration (see Store): a CAS on the key's slot (a sliding_log:
  // under its shard's lock). SetRemaining inserts the key when it is absent,
  // and fails with kOverflow when there is no room for it.
  Status ResetKey(std::string_view key, const Limit& limit) override;
  Result<Decision> SetRemaining(std::string_view key, const Limit& limit,
                                int64_t remaining) override;
  // Settlements (Store::Settle): core's Settle on each key by a CAS loop,
  // exact under contention; windows in wall-clock time as for Acquire.
  bool SupportsSettle() const override { return true; }
  Result<std::vector<Settled>> Settle(std::span<const SettleItem> items) override;
  Result<std::vector<Settled>> SettleAt(std::span<const SettleItem> items, int64_t now_ns);

  // Forgets every key (tests, admin).
  void Clear();

  // Writes the state that carries information (see the top of this file).
  // Decisions go on during a save: each shard is scanned under its mutex (no
  // key enters or leaves that shard meanwhile; decisions on its existing keys
  // stay lock-free), each key's state is one atomic read. So the snapshot is
  // consistent per key and per shard's key set; two keys of different shards
  // may be read up to one save's duration apart. The file also holds the
  // store's key-hashing secret (keys are stored by their keyed hash): keep it
  // private (the path form creates it mode 0600).
  // Save(path): the bytes go to a temporary file in the same directory, which
  // is fsync'd and renamed over `path`, then the directory is fsync'd: a crash
  // leaves the old file or the new one, never a mix. Errors name the path and
  // the system call.
  Result<LocalStateSaved> Save(std::ostream& out) const;
  Result<LocalStateSaved> Save(const std::string& path) const;
  // Reads a file written by Save and installs it. The file is parsed and
  // checked whole (magic, version, lengths, bounds, checksum) into a staging
  // image first; any fault refuses it all with kInvalidArgument saying where
  // ("state file <path>: at byte N (record i): why") and nothing is
  // installed. Times move forward: a bucket refills for the time since the
  // save, a window that ended since is dropped. Entries whose rule
  // keep_group refuses are dropped; limits are not in the file: an entry is
  // read with whatever limit its key is next decided with, as after a policy
  // reload. Needs an empty store (nothing decided yet) and no concurrent
  // calls: it adopts the file's key-hashing secret. A missing file is
  // kInvalidArgument too (callers that treat it as a first start check first).
  Result<LocalStateLoaded> Load(std::istream& in, const LocalStateLoadOptions& options = {});
  Result<LocalStateLoaded> Load(const std::string& path, const LocalStateLoadOptions& options = {});
  // Load from the file's bytes (the fuzz target).
  Result<LocalStateLoaded> LoadBytes(std::string_view bytes,
                                     const LocalStateLoadOptions& options = {});

  LocalStoreStats Stats() const;
  std::string Name() const override { return "local"; }

  class Impl;

 private:
  explicit LocalStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<LeaseTable> leases_;
};

// "evict", "allow" or "reject"; false for anything else.
bool ParseOverflowPolicy(std::string_view text, OverflowPolicy* out);

// Applies the query of a "local://?..." URL to `options`: max_keys=N,
// shards=N, overflow=evict|allow|reject, max_keys_per_rule=N (the per-group
// cap, 0 = none). kInvalidArgument names the option that is wrong.
Result<LocalStoreOptions> ParseLocalStoreQuery(std::string_view query, LocalStoreOptions options);

}  // namespace tollgate

#endif  // TOLLGATE_LOCAL_STORE_H_
