#include "tollgate/local_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstring>
#include <istream>
#include <ostream>

#include <cstdlib>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "local/gcra_step.h"
#include "local/key_hash.h"
#include "local/lease_table.h"
#include "local/state_file.h"
#include "tollgate/algorithm.h"

namespace tollgate {

using internal::Hash128;
using internal::HashSeed;

namespace {

// h1 values with a meaning; real hashes are forced above them.
constexpr uint64_t kEmpty = 0;
constexpr uint64_t kTombstone = 1;
// A state word no algorithm produces: the slot is being reclaimed.
constexpr uint64_t kEvicting = ~uint64_t{0};
// idle_at value meaning "the state word itself is the idle time" (GCRA TAT).
constexpr int64_t kIdleIsState = -1;
// Store-relative time starts here, so that the small unique "fresh" states
// given to new token buckets always lie in the past (bucket full).
constexpr int64_t kTimeOffset = 1'000'000'000'000LL;

struct alignas(32) Slot {
  std::atomic<uint64_t> h1{kEmpty};
  std::atomic<uint64_t> h2{0};
  std::atomic<uint64_t> state{0};
  std::atomic<int64_t> idle_at{0};
};
static_assert(sizeof(Slot) == 32);

// Every shard's slots live in one array, allocated zeroed, 2 MiB-aligned, with
// a hint for transparent huge pages: a 1M-key store spans ~45 MB, and 4 KiB
// pages would add a TLB miss to most decisions. (One array per shard would be
// under 2 MiB each at 1M keys and 64 shards, too small for a huge page.)
struct SlotArrayDeleter {
  void operator()(Slot* p) const { std::free(p); }
};
using SlotArray = std::unique_ptr<Slot[], SlotArrayDeleter>;

// Small stores are 64-byte aligned, so a cache line always holds two whole
// slots. *allocated is the size asked of the allocator (a huge page is
// resident as a whole, so the rounding counts).
SlotArray AllocateSlots(size_t n, size_t* allocated) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = n * sizeof(Slot);
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  *allocated = rounded;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (bytes >= kHuge) madvise(p, rounded, MADV_HUGEPAGE);
  auto* slots = static_cast<Slot*>(p);
  for (size_t i = 0; i < n; ++i) new (&slots[i]) Slot();
  return SlotArray(slots);
}

struct HashOf {
  size_t operator()(const Hash128& h) const { return h.hi ^ (h.lo * 0x9e3779b97f4a7c15ULL); }
};

// Token and leaky buckets: every algorithm that does not count per window (limit.h).
bool IsBucket(Algorithm a) { return !IsWindowAlgorithm(a); }

// Step(), with the token bucket's arithmetic inlined.
StepResult StepFor(const Limit& limit, uint64_t state, int64_t cost, int64_t now) {
  return internal::IsGcra(limit) ? internal::GcraStep(limit, state, cost, now)
                                 : Step(limit, state, cost, now);
}

// Per-item scratch of a batch (hashes, charged states): on the stack for the
// usual few items.
template <typename T>
class BatchBuffer {
 public:
  explicit BatchBuffer(size_t n) {
    if (n > kInline) heap_.resize(n);
  }
  T& operator[](size_t i) { return heap_.empty() ? inline_[i] : heap_[i]; }

 private:
  static constexpr size_t kInline = 16;
  T inline_[kInline]{};
  std::vector<T> heap_;
};

// Where a new key's group comes from: its bytes, or a PreparedKey's group.
struct GroupRef {
  std::string_view key;
  int64_t id = -1;  // resolved already when >= 0
};

// A sliding_log key: its entries, its group and the bytes counted for it.
struct LogKey {
  SlidingLogState state;
  uint16_t group = 0;
  size_t bytes = 0;
};

// Estimated heap bytes of a sliding_log key in the shard's map (libstdc++): the
// hash node with its value and bucket pointer, the deque's map of node
// pointers (8 at first) and one 512-byte deque node per 32 entries (at least
// one, allocated at construction).
size_t LogBytes(const SlidingLogState& state) {
  constexpr size_t kNode = sizeof(std::pair<const Hash128, LogKey>) + 2 * sizeof(void*);
  constexpr size_t kPerDequeNode = 512 / sizeof(SlidingLogState::Entry);
  return kNode + sizeof(void*) + 8 * sizeof(void*) +
         512 * (state.entries.size() / kPerDequeNode + 1);
}

// How full a window is, as a sub-microsecond addition to its idle time: 0
// (unused) to kFullnessSteps ns (at or past its limit; anything less stays
// below). Eviction takes the smallest idle time, as a token bucket's TAT
// ranks buckets by their debt; a window's end alone is the same for every key
// of one window, so a key at 1000/1000 looked no different from one at
// 1/1000 and a flood of new keys freed throttled clients (issue 29). Keys of
// one window are now evicted least used first, and one at its limit only
// when no less-used key is left. A window stays "not at rest" for at most
// kFullnessSteps ns past its end: harmless, a state read then still decides
// by its own window index (windows are at least 1 ms).
constexpr int64_t kFullnessSteps = 1023;

int64_t Fullness(int64_t remaining, int64_t limit) {
  if (remaining <= 0 || limit <= 0) return kFullnessSteps;
  if (remaining >= limit) return 0;
  const int64_t used = limit - remaining;
  if (used <= INT64_MAX / kFullnessSteps) return used * kFullnessSteps / limit;
  return static_cast<int64_t>(static_cast<unsigned __int128>(used) * kFullnessSteps /
                              static_cast<uint64_t>(limit));
}

// A window step's idle time with its fullness (see kFullnessSteps).
int64_t RankedIdleAt(const Limit& limit, const StepResult& r) {
  return r.idle_at + Fullness(r.decision.remaining, limit.burst());
}

}  // namespace

// Invariants:
//  - a key lives in at most one slot, within kProbeWindow slots of its home;
//  - no empty slot lies between a key's home and its slot (slots go from empty
//    to used to tombstone to used, never back to empty, except in Clear());
//  - a slot's state is only reset while its shard mutex is held and after the
//    state word was CAS'd to kEvicting, so a decision racing with reclamation
//    fails its CAS and looks the key up again.
// Thread safety: slots are read and CAS'd without locks; `mu` guards inserts,
// reclamation, `count` changes and `logs`.
struct Shard {
  std::mutex mu;
  Slot* slots = nullptr;  // `capacity` slots inside LocalStore::Impl::arena_
  size_t capacity = 0;
  size_t key_cap = 0;
  size_t fair_share = 0;  // max_keys / shards: admitted past the global cap (see FindOrInsert)
  size_t sweep = 0;       // guarded by mu: where Reclaim's wider search goes next
  std::atomic<size_t> count{0};
  uint64_t fresh_seq = 2;                            // guarded by mu
  std::unordered_map<Hash128, LogKey, HashOf> logs;  // guarded by mu
};

class LocalStore::Impl {
 public:
  explicit Impl(const LocalStoreOptions& o) : options_(o) {
    size_t shards = 1;
    while (shards < std::max<size_t>(o.shards, 1)) shards <<= 1;
    shard_mask_ = shards - 1;
    // Keys spread over shards binomially: give each shard 10% headroom and
    // enforce max_keys with a global count.
    const size_t per_shard = std::max<size_t>((o.max_keys + shards - 1) / shards, 1);
    const size_t key_cap = shards == 1 ? per_shard : per_shard + per_shard / 10 + 16;
    // Even, so that every shard's slots start on a cache line (see Home()).
    shard_capacity_ = (key_cap + key_cap / 4 + kProbeWindow + 1) & ~size_t{1};
    arena_ = AllocateSlots(shards * shard_capacity_, &arena_bytes_);
    slot_group_ = std::make_unique<uint16_t[]>(shards * shard_capacity_);
    group_counts_ = std::make_unique<std::atomic<size_t>[]>(kMaxGroups);
    shards_ = std::vector<Shard>(shards);
    for (size_t i = 0; i < shards; ++i) {
      shards_[i].key_cap = key_cap;
      shards_[i].fair_share = per_shard;
      shards_[i].capacity = shard_capacity_;
      shards_[i].slots = arena_.get() + i * shard_capacity_;
    }
    std::random_device rd;
    for (auto& k : seed_.k) k = (uint64_t{rd()} << 32) ^ rd();
    epoch_ = o.clock->Now();
    // Read once: later wall clock steps (NTP) never move a window boundary.
    wall_shift_ = o.clock->WallNow() - kTimeOffset;
  }

  int64_t Relative(int64_t now) const { return now - epoch_ + kTimeOffset; }

  // Step() at store-relative `now`. Windows are counted in wall-clock time
  // (boundaries on the Unix epoch's grid, as in Redis: a daily window turns at
  // 00:00 UTC, not a day after the process started), advanced by the
  // monotonic clock; idle times stay store-relative.
  StepResult StepAt(const Limit& limit, uint64_t state, int64_t cost, int64_t now) const {
    if (IsBucket(limit.algorithm())) return StepFor(limit, state, cost, now);
    StepResult r = Step(limit, state, cost, now + wall_shift_);
    r.idle_at -= wall_shift_;
    return r;
  }

  Hash128 HashOfKey(std::string_view key) const {
    Hash128 h = internal::HashKey(key, seed_);
    if (h.hi <= kTombstone) h.hi += 2;
    return h;
  }

  Shard& ShardFor(const Hash128& h) { return shards_[h.lo & shard_mask_]; }

  // A key's home is the first slot of a 64-byte line (two slots), so that
  // the line a lookup misses on holds the two slots it reads first: fewer
  // lookups touch a second line than with a home anywhere in a line.
  static size_t Home(size_t capacity, uint64_t h1) {
    return 2 * static_cast<size_t>((static_cast<unsigned __int128>(h1) * (capacity / 2)) >> 64);
  }
  static size_t Home(const Shard& s, uint64_t h1) { return Home(s.capacity, h1); }

  // The key's shard's slots, without touching the Shard (one load fewer on
  // the hot path).
  Slot* ShardSlots(const Hash128& h) const {
    return arena_.get() + (h.lo & shard_mask_) * shard_capacity_;
  }

  static Slot* Find(Shard& s, const Hash128& h) { return Find(s.slots, s.capacity, h); }
  static Slot* Find(Slot* slots, size_t capacity, const Hash128& h) {
    size_t i = Home(capacity, h.hi);
    for (size_t n = 0; n < kProbeWindow; ++n, ++i) {
      if (i >= capacity) i -= capacity;
      Slot& slot = slots[i];
      const uint64_t x = slot.h1.load(std::memory_order_acquire);
      if (x == kEmpty) return nullptr;
      if (x == h.hi && slot.h2.load(std::memory_order_acquire) == h.lo) return &slot;
    }
    return nullptr;
  }

  static int64_t IdleAt(const Slot& slot) {
    const int64_t idle = slot.idle_at.load(std::memory_order_relaxed);
    return idle == kIdleIsState ? static_cast<int64_t>(slot.state.load(std::memory_order_relaxed))
                                : idle;
  }

  uint16_t& GroupOfSlot(const Slot& slot) { return slot_group_[&slot - arena_.get()]; }

  // A key's group: its bytes before the first separator, told apart by a
  // keyed hash; the table is bounded (kMaxGroups), later groups share the last.
  uint16_t GroupOf(std::string_view key) {
    // No separator: the key belongs to the one unnamed group.
    const size_t end = key.find(options_.group_separator);
    const std::string_view prefix = end == std::string_view::npos ? "" : key.substr(0, end);
    const uint64_t id = internal::HashKey(prefix, seed_).lo;
    {
      std::shared_lock<std::shared_mutex> lock(groups_mu_);
      if (auto it = group_ids_.find(id); it != group_ids_.end()) return it->second;
    }
    std::unique_lock<std::shared_mutex> lock(groups_mu_);
    if (auto it = group_ids_.find(id); it != group_ids_.end()) return it->second;
    if (group_ids_.size() >= kMaxGroups - 1) return kMaxGroups - 1;
    const auto next = static_cast<uint16_t>(group_ids_.size());
    group_ids_.emplace(id, next);
    group_names_.emplace_back(prefix.size() <= internal::kMaxGroupName ? prefix : "");
    return next;
  }
  uint16_t Resolve(const GroupRef& g) {
    return g.id >= 0 ? static_cast<uint16_t>(g.id) : GroupOf(g.key);
  }
  bool GroupFull(uint16_t group) const {
    return options_.max_keys_per_group > 0 &&
           group_counts_[group].load(std::memory_order_relaxed) >= options_.max_keys_per_group;
  }

  // Under s.mu: frees a slot of the key's shard, or returns null. At rest
  // only (`in_debt` false): the one idle the longest, of any group unless
  // `own_group`, in the key's probe window. In debt too: the one of `group`
  // closest to rest, in the probe window and, when the window has a free
  // place for the key (the cap, not the window, is full), in kSweepWindows
  // further windows taken in turn around the shard: a client deep in debt is
  // dropped only when none of the keys looked at is closer to rest, never
  // because its neighbourhood happens to hold nothing else (whole shards of up
  // to (1 + kSweepWindows) windows are searched whole).
  static constexpr size_t kSweepWindows = 3;
  Slot* Reclaim(Shard& s, const Hash128& h, int64_t now, uint16_t group, bool own_group,
                bool in_debt) {
    const bool sweep = in_debt && FirstFree(s, h) != nullptr;
    for (int attempt = 0; attempt < 4; ++attempt) {
      Slot* best = nullptr;
      int64_t best_idle = 0;
      auto consider = [&](size_t i, size_t count) {
        for (size_t n = 0; n < count; ++n, ++i) {
          if (i >= s.capacity) i -= s.capacity;
          Slot& slot = s.slots[i];
          if (slot.h1.load(std::memory_order_relaxed) <= kTombstone) continue;
          if ((own_group || in_debt) && GroupOfSlot(slot) != group) continue;
          const int64_t idle = IdleAt(slot);
          if ((in_debt || idle <= now) && (best == nullptr || idle < best_idle)) {
            best = &slot;
            best_idle = idle;
          }
        }
      };
      const size_t home = Home(s, h.hi);
      consider(home, std::min(kProbeWindow, s.capacity));
      if (sweep) {
        // The rest of the shard when it is small, else the next windows in turn.
        if (s.capacity <= (1 + kSweepWindows) * kProbeWindow) {
          consider(home + kProbeWindow, s.capacity > kProbeWindow ? s.capacity - kProbeWindow : 0);
        } else {
          consider(s.sweep % s.capacity, kSweepWindows * kProbeWindow);
          s.sweep += kSweepWindows * kProbeWindow;
        }
      }
      if (best == nullptr) return nullptr;
      uint64_t st = best->state.load(std::memory_order_acquire);
      if (!in_debt && IdleAt(*best) > now) continue;  // charged meanwhile
      if (!best->state.compare_exchange_strong(st, kEvicting, std::memory_order_acq_rel)) continue;
      best->h1.store(kTombstone, std::memory_order_release);
      // The caller takes a free slot at once: the global count does not change.
      s.count.fetch_sub(1, std::memory_order_relaxed);
      group_counts_[GroupOfSlot(*best)].fetch_sub(1, std::memory_order_relaxed);
      (best_idle > now ? evicted_ : reclaimed_).fetch_add(1, std::memory_order_relaxed);
      return best;
    }
    return nullptr;
  }

  // Under s.mu: the first empty or tombstone slot of the key's window, or null.
  static Slot* FirstFree(Shard& s, const Hash128& h) {
    size_t i = Home(s, h.hi);
    for (size_t n = 0; n < kProbeWindow; ++n, ++i) {
      if (i >= s.capacity) i -= s.capacity;
      if (s.slots[i].h1.load(std::memory_order_relaxed) <= kTombstone) return &s.slots[i];
    }
    return nullptr;
  }

  // Finds or inserts the key's slot; null when there is no room (see the
  // overflow policy in local_store.h).
  Slot* FindOrInsert(Shard& s, const Hash128& h, const GroupRef& gref, const Limit& limit,
                     int64_t now) {
    if (Slot* slot = Find(s, h)) return slot;
    std::lock_guard<std::mutex> lock(s.mu);
    if (Slot* slot = Find(s, h)) return slot;
    const uint16_t group = Resolve(gref);
    const bool group_full = GroupFull(group);
    Slot* target = nullptr;
    // Reserve a place in the global count first: shards insert concurrently.
    // A shard holding less than its share of max_keys admits the key past the
    // global cap (within its key_cap headroom, allocated already): keys never
    // spread evenly, and a sparse shard that had to evict would drop the few
    // clients it holds, throttled ones included, while the full shards keep
    // thousands closer to rest. The total stays within max_keys plus the
    // shards' headroom (local_store.h).
    bool reserved = false;
    const size_t held = s.count.load(std::memory_order_relaxed);
    if (!group_full && held < s.key_cap) {
      reserved = total_keys_.fetch_add(1, std::memory_order_relaxed) < options_.max_keys ||
                 held < s.fair_share;
      if (!reserved) total_keys_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (reserved) {
      target = FirstFree(s, h);
      if (target == nullptr) total_keys_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (target == nullptr) {
      Slot* freed = Reclaim(s, h, now, group, group_full, false);
      if (freed == nullptr && options_.overflow == OverflowPolicy::kEvict) {
        freed = Reclaim(s, h, now, group, true, true);
      }
      if (freed == nullptr) return nullptr;
      // The freed slot is a tombstone now; an empty slot may come before it
      // in the window, and Find() stops at the first empty one: the key goes
      // to the first free slot (the freed one at the latest, or the free place
      // the window had when the victim came from elsewhere in the shard).
      target = FirstFree(s, h);
    }
    GroupOfSlot(*target) = group;
    group_counts_[group].fetch_add(1, std::memory_order_relaxed);
    // A unique fresh state per insert: a decision racing with the reclamation
    // of this slot can never CAS successfully against the new key's state.
    const bool bucket = IsBucket(limit.algorithm());
    target->state.store(bucket ? s.fresh_seq++ : 0, std::memory_order_relaxed);
    target->idle_at.store(bucket ? kIdleIsState : 0, std::memory_order_relaxed);
    target->h2.store(h.lo, std::memory_order_release);
    target->h1.store(h.hi, std::memory_order_release);
    s.count.fetch_add(1, std::memory_order_relaxed);
    return target;
  }

  Decision Overflow(const Limit& limit) {
    Decision d;
    d.limit = limit.burst();
    // kEvict lands here only when the key's group has nothing to evict in its
    // probe window: storage pressure must not block traffic.
    if (options_.overflow != OverflowPolicy::kReject) {
      overflow_allowed_.fetch_add(1, std::memory_order_relaxed);
      d.allowed = true;
      d.remaining = limit.burst();
    } else {
      overflow_rejected_.fetch_add(1, std::memory_order_relaxed);
      d.retry_after = std::chrono::seconds(1);
    }
    return d;
  }

  static void NoteIdle(Slot& slot, int64_t idle) {
    int64_t cur = slot.idle_at.load(std::memory_order_relaxed);
    while (cur != kIdleIsState && cur < idle &&
           !slot.idle_at.compare_exchange_weak(cur, idle, std::memory_order_release,
                                               std::memory_order_relaxed)) {
    }
  }

  // One word-sized decision; `charge` false only evaluates.
  // `charged`, when not null, receives the state word a successful charge wrote
  // (Refund needs it to know which window the charge went into).
  Decision Decide(const Hash128& h, const GroupRef& group, const Limit& limit, int64_t cost,
                  int64_t now, bool charge, bool* overflowed, uint64_t* charged = nullptr) {
    Shard& s = ShardFor(h);
    for (;;) {
      Slot* slot = FindOrInsert(s, h, group, limit, now);
      if (slot == nullptr) {
        *overflowed = true;
        return Overflow(limit);
      }
      uint64_t st = slot->state.load(std::memory_order_acquire);
      for (;;) {
        if (st == kEvicting || slot->h1.load(std::memory_order_acquire) != h.hi ||
            slot->h2.load(std::memory_order_acquire) != h.lo) {
          break;  // reclaimed under us: look the key up again
        }
        // A window state past its idle time carries no information: decide
        // from a fresh one. (Window indexes are stored modulo 2^24 or 2^40, so
        // a key idle long enough could otherwise look like a clock step back
        // and keep its old counts.) idle_at is raised before a CAS publishes
        // a state, so a state read here is never newer than the idle_at after it.
        const bool window = !IsBucket(limit.algorithm());
        const uint64_t base =
            window && slot->idle_at.load(std::memory_order_acquire) <= now ? 0 : st;
        StepResult r = StepAt(limit, base, charge ? cost : 0, now);
        if (!charge && cost > 0) {
          // Would it fit? Reported as the state without the charge.
          StepResult would = StepAt(limit, base, cost, now);
          if (would.decision.allowed) {
            would.decision.remaining = r.decision.remaining;
            would.decision.reset_after = r.decision.reset_after;
            would.decision.delay = Nanos(0);
          }
          return would.decision;
        }
        if (!r.changed) return r.decision;
        if (window) NoteIdle(*slot, RankedIdleAt(limit, r));  // before the CAS (see above)
        if (slot->state.compare_exchange_weak(st, r.state, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
          if (charged != nullptr) *charged = r.state;
          return r.decision;
        }
      }
    }
  }

  // One settlement (core's Settle) by the same CAS loop as Decide(); windows
  // in wall-clock time like StepAt. A key the cap leaves no room for settles
  // nothing (an under-charge; the admission that created it normally holds it).
  Settled SettleOne(const Hash128& h, const GroupRef& group, const Limit& limit, const SettleOp& op,
                    int64_t now) {
    Settled out;
    Shard& s = ShardFor(h);
    const bool window = !IsBucket(limit.algorithm());
    const int64_t shift = window ? wall_shift_ : 0;
    SettleOp at = op;
    at.charged_at_ns += shift;
    for (;;) {
      Slot* slot = FindOrInsert(s, h, group, limit, now);
      if (slot == nullptr) {
        out.decision.limit = limit.burst();
        return out;
      }
      uint64_t st = slot->state.load(std::memory_order_acquire);
      for (;;) {
        if (st == kEvicting || slot->h1.load(std::memory_order_acquire) != h.hi ||
            slot->h2.load(std::memory_order_acquire) != h.lo) {
          break;  // reclaimed under us: look the key up again
        }
        const uint64_t base =
            window && slot->idle_at.load(std::memory_order_acquire) <= now ? 0 : st;
        SettleResult r = ::tollgate::Settle(limit, base, at, now + shift);
        r.step.idle_at -= shift;
        out.charged = r.charged;
        out.refunded = r.refunded;
        out.decision = r.step.decision;
        if (!r.step.changed) return out;
        if (window) NoteIdle(*slot, RankedIdleAt(limit, r.step));  // before the CAS (see Decide)
        if (slot->state.compare_exchange_weak(st, r.step.state, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
          return out;
        }
      }
    }
  }

  Result<std::vector<Settled>> SettleBatch(std::span<const SettleItem> items, int64_t now) {
    for (size_t i = 0; i < items.size(); ++i) {
      const SettleItem& item = items[i];
      if (item.limit == nullptr || item.charge < 0 || item.refund < 0 || item.age.count() < 0) {
        return InvalidArgument("items[" + std::to_string(i) +
                               "]: needs a limit, a charge and refund >= 0 and an age >= 0");
      }
      if (item.limit->algorithm() == Algorithm::kSlidingLog) {
        return InvalidArgument("items[" + std::to_string(i) +
                               "]: sliding_log limits cannot be settled after the response");
      }
    }
    std::vector<Settled> out(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const SettleItem& item = items[i];
      const SettleOp op{item.charge, item.refund, now - item.age.count()};
      out[i] = SettleOne(HashOfKey(item.key), GroupRef{item.key}, *item.limit, op, now);
    }
    return out;
  }

  // Gives back a charge made by Decide (batch rollback after a race).
  // `charged` is the state word that charge wrote. A bucket's charge is an
  // increment of its TAT and can be taken back whenever. A window's charge
  // counts only in the window it went into: once another caller has moved the
  // key into a later window, taking the cost from that window's count would
  // grant what was never charged there, so the refund is dropped (the charge
  // then expires with its window: an under-grant, never an over-grant).
  void Refund(const Hash128& h, const Limit& limit, int64_t cost, uint64_t charged) {
    Shard& s = ShardFor(h);
    Slot* slot = Find(s, h);
    if (slot == nullptr || cost <= 0) return;
    const bool bucket = IsBucket(limit.algorithm());
    // Window states: the window index sits above the counts.
    const bool fixed = limit.algorithm() == Algorithm::kFixedWindow;
    const int window_shift = fixed ? FixedWindowCountBits(limit) : 40;
    const uint64_t count_mask = (uint64_t{1} << (fixed ? window_shift : 20)) - 1;
    uint64_t st = slot->state.load(std::memory_order_acquire);
    for (;;) {
      if (st == kEvicting) return;
      uint64_t next = st;
      if (bucket) {
        next = st - static_cast<uint64_t>(limit.IncrementFor(cost));
      } else {
        if ((st >> window_shift) != (charged >> window_shift)) return;  // window moved on
        const uint64_t count = st & count_mask;
        next = st - std::min<uint64_t>(count, static_cast<uint64_t>(cost));
      }
      if (slot->state.compare_exchange_weak(st, next, std::memory_order_acq_rel)) return;
    }
  }

  // Under s.mu: erases a sliding_log key to make room, among the first
  // kProbeWindow of the map (in hash order), with Reclaim()'s choice.
  bool EraseLog(Shard& s, const Limit& limit, int64_t now, uint16_t group, bool own_group,
                bool in_debt) {
    auto best = s.logs.end();
    int64_t best_idle = 0, best_rank = 0;
    size_t n = 0;
    for (auto j = s.logs.begin(); j != s.logs.end() && n < kProbeWindow; ++j, ++n) {
      if ((own_group || in_debt) && j->second.group != group) continue;
      int64_t idle = 0;
      SlidingLogState copy = j->second.state;
      const Decision d = StepLog(limit, copy, 0, now, &idle);
      // Ranked like a window slot: the least used of those idle soonest.
      const int64_t rank = idle + Fullness(d.remaining, limit.burst());
      if ((in_debt || idle <= now) && (best == s.logs.end() || rank < best_rank)) {
        best = j;
        best_idle = idle;
        best_rank = rank;
      }
    }
    if (best == s.logs.end()) return false;
    group_counts_[best->second.group].fetch_sub(1, std::memory_order_relaxed);
    log_bytes_.fetch_sub(best->second.bytes, std::memory_order_relaxed);
    log_keys_.fetch_sub(1, std::memory_order_relaxed);
    s.logs.erase(best);
    (best_idle > now ? evicted_ : reclaimed_).fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Keeps the byte count of a sliding_log key current after its entries changed.
  void Recount(LogKey& key) {
    const size_t bytes = LogBytes(key.state);
    if (bytes != key.bytes) {
      log_bytes_.fetch_add(bytes - key.bytes, std::memory_order_relaxed);  // modulo 2^64
      key.bytes = bytes;
    }
  }

  Decision DecideLog(const Hash128& h, const GroupRef& gref, const Limit& limit, int64_t cost,
                     int64_t now, bool charge, bool* overflowed) {
    Shard& s = ShardFor(h);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.logs.find(h);
    if (it == s.logs.end()) {
      const uint16_t group = Resolve(gref);
      const bool group_full = GroupFull(group);
      if (group_full || s.logs.size() >= s.key_cap) {
        bool room = EraseLog(s, limit, now, group, group_full, false);
        if (!room && options_.overflow == OverflowPolicy::kEvict) {
          room = EraseLog(s, limit, now, group, true, true);
        }
        if (!room) {
          *overflowed = true;
          return Overflow(limit);
        }
      }
      it = s.logs.emplace(h, LogKey{}).first;
      it->second.group = group;
      group_counts_[group].fetch_add(1, std::memory_order_relaxed);
      log_keys_.fetch_add(1, std::memory_order_relaxed);
      Recount(it->second);
    }
    SlidingLogState& state = it->second.state;
    if (charge) {
      const Decision d = StepLog(limit, state, cost, now);
      Recount(it->second);
      return d;
    }
    SlidingLogState copy = state;
    Decision would = StepLog(limit, copy, cost, now);
    if (would.allowed && cost > 0) {
      // As in Decide(): it would fit, reported as the state without the charge.
      copy = state;
      const Decision uncharged = StepLog(limit, copy, 0, now);
      would.remaining = uncharged.remaining;
      would.reset_after = uncharged.reset_after;
    }
    return would;
  }

  // Removes the entry a batch's charge added: the newest one with its time and
  // cost (another caller may have appended after it, with another cost).
  void RefundLog(const Hash128& h, int64_t cost, int64_t at) {
    Shard& s = ShardFor(h);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.logs.find(h);
    if (it == s.logs.end() || cost <= 0) return;
    auto& entries = it->second.state.entries;
    for (auto e = entries.rbegin(); e != entries.rend(); ++e) {
      if (e->at_ns == at && e->cost == cost) {
        it->second.state.total -= e->cost;
        entries.erase(std::next(e).base());
        Recount(it->second);
        return;
      }
      if (e->at_ns < at) return;  // older than the charge: it has expired already
    }
  }

  // Key administration (Store::ResetKey / SetRemaining): replaces the key's
  // state with a fresh one charged `cost` (0: forgotten), in one CAS on the
  // slot (or under the shard's lock for a sliding_log), so a decision racing
  // with it lands wholly before or after. `insert` false: an absent key is
  // left absent (a reset of a key never seen). Ok with the state's decision.
  Result<Decision> Overwrite(const Hash128& h, const GroupRef& gref, const Limit& limit,
                             int64_t cost, int64_t now, bool insert) {
    if (limit.algorithm() == Algorithm::kSlidingLog) return OverwriteLog(h, gref, limit, cost, now);
    Shard& s = ShardFor(h);
    const bool bucket = IsBucket(limit.algorithm());
    const StepResult r = StepAt(limit, 0, cost, now);
    if (cost > 0 && !r.changed) {
      return InvalidArgument("remaining: a fresh key cannot be charged " + std::to_string(cost));
    }
    for (;;) {
      Slot* slot = insert ? FindOrInsert(s, h, gref, limit, now) : Find(s, h);
      if (slot == nullptr) {
        if (!insert) return r.decision;  // nothing stored: already fresh
        return Status(StatusCode::kOverflow, "local store: no room for the key (max_keys)");
      }
      uint64_t next = r.changed ? r.state : 0;
      if (bucket && !r.changed) {
        // A unique fresh state, as an insert gives (see FindOrInsert).
        std::lock_guard<std::mutex> lock(s.mu);
        next = s.fresh_seq++;
      }
      uint64_t st = slot->state.load(std::memory_order_acquire);
      if (st == kEvicting || slot->h1.load(std::memory_order_acquire) != h.hi ||
          slot->h2.load(std::memory_order_acquire) != h.lo) {
        if (!insert) return r.decision;  // reclaimed: the key is gone already
        continue;
      }
      if (!bucket) NoteIdle(*slot, RankedIdleAt(limit, r));  // before the CAS, as in Decide()
      if (slot->state.compare_exchange_strong(st, next, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
        return r.decision;
      }
    }
  }

  Result<Decision> OverwriteLog(const Hash128& h, const GroupRef& gref, const Limit& limit,
                                int64_t cost, int64_t now) {
    if (cost > 0) {
      // Makes sure the key has a log (a peek inserts it, or overflows).
      bool overflowed = false;
      DecideLog(h, gref, limit, 0, now, true, &overflowed);
      if (overflowed) {
        return Status(StatusCode::kOverflow, "local store: no room for the key (max_keys)");
      }
    }
    Shard& s = ShardFor(h);
    std::lock_guard<std::mutex> lock(s.mu);
    SlidingLogState fresh;
    auto it = s.logs.find(h);
    if (it == s.logs.end()) {
      if (cost > 0) {  // reclaimed between the two steps
        return Status(StatusCode::kOverflow, "local store: no room for the key (max_keys)");
      }
      return StepLog(limit, fresh, 0, now);
    }
    it->second.state = std::move(fresh);
    const Decision d = StepLog(limit, it->second.state, cost, now);
    Recount(it->second);
    return d;
  }

  // The common case, kept small enough to inline into the public calls: a
  // token bucket on a key that is already in its slot. Everything else
  // (new keys, other algorithms, a reclamation race) takes One().
  [[gnu::always_inline]] Decision Hot(const Hash128& h, const GroupRef& group, const Limit& limit,
                                      int64_t cost, int64_t now) {
    if (internal::IsGcra(limit)) [[likely]] {
      if (Slot* slot = Find(ShardSlots(h), shard_capacity_, h)) [[likely]] {
        uint64_t st = slot->state.load(std::memory_order_acquire);
        // Decide()'s loop; buckets keep their idle time in the state word.
        while (st != kEvicting && slot->h1.load(std::memory_order_acquire) == h.hi &&
               slot->h2.load(std::memory_order_acquire) == h.lo) {
          int64_t tat_after;
          if (!internal::GcraCharge(limit, st, cost, now, &tat_after)) [[unlikely]] {
            return internal::GcraStep(limit, st, cost, now).decision;
          }
          // The decision is computed after the CAS: its arithmetic then
          // overlaps the locked instruction's latency instead of preceding it.
          if (slot->state.compare_exchange_weak(st, static_cast<uint64_t>(tat_after),
                                                std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
            return internal::GcraAllowed(limit, tat_after, now);
          }
        }
      }
    }
    return One(h, group, limit, cost, now, true);
  }

  // Starts loading the key's home slot (the first one its probe reads).
  void Prefetch(const Hash128& h) {
    __builtin_prefetch(ShardSlots(h) + Home(shard_capacity_, h.hi), 1);
  }

  [[gnu::noinline]] Decision One(const Hash128& h, const GroupRef& group, const Limit& limit,
                                 int64_t cost, int64_t now, bool charge,
                                 uint64_t* charged = nullptr) {
    bool overflowed = false;
    return limit.algorithm() == Algorithm::kSlidingLog
               ? DecideLog(h, group, limit, cost, now, charge, &overflowed)
               : Decide(h, group, limit, cost, now, charge, &overflowed, charged);
  }

  Result<BatchDecision> Batch(std::span<const AcquireItem> items, int64_t now) {
    BatchDecision out;
    out.decisions.resize(items.size());
    BatchBuffer<Hash128> hashes(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].limit == nullptr || items[i].cost < 0) {
        return InvalidArgument("items[" + std::to_string(i) + "]: needs a limit and a cost >= 0");
      }
      hashes[i] = HashOfKey(items[i].key);
      Prefetch(hashes[i]);  // the items' cache misses overlap instead of queueing
    }
    // Phase 1: would every item fit? Nothing is charged.
    for (size_t i = 0; i < items.size(); ++i) {
      out.decisions[i] =
          One(hashes[i], GroupRef{items[i].key}, *items[i].limit, items[i].cost, now, false);
      if (!out.decisions[i].allowed && out.denied_index < 0) out.denied_index = static_cast<int>(i);
    }
    if (out.denied_index >= 0) return out;
    // Phase 2: charge in order; a race that makes an item no longer fit rolls back the others.
    BatchBuffer<uint64_t> charged(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      Decision d = One(hashes[i], GroupRef{items[i].key}, *items[i].limit, items[i].cost, now, true,
                       &charged[i]);
      if (!d.allowed) {
        for (size_t j = 0; j < i; ++j) {
          if (items[j].limit->algorithm() == Algorithm::kSlidingLog) {
            RefundLog(hashes[j], items[j].cost, now);
          } else {
            Refund(hashes[j], *items[j].limit, items[j].cost, charged[j]);
          }
        }
        for (size_t j = 0; j < items.size(); ++j) {
          out.decisions[j] =
              One(hashes[j], GroupRef{items[j].key}, *items[j].limit, items[j].cost, now, false);
        }
        out.decisions[i].allowed = false;
        out.denied_index = static_cast<int>(i);
        return out;
      }
      out.decisions[i] = d;
    }
    out.allowed = true;
    return out;
  }

  Status Each(std::span<const AcquireItem> items, std::span<Decision> out, int64_t now) {
    if (out.size() != items.size()) return InvalidArgument("out: needs one decision per item");
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].limit == nullptr || items[i].cost < 0) {
        return InvalidArgument("items[" + std::to_string(i) + "]: needs a limit and a cost >= 0");
      }
    }
    // Hash and prefetch a group, then decide it: a decision's CAS is a full
    // fence, so without the prefetches each key's cache miss would wait for
    // the previous decision.
    constexpr size_t kGroup = 16;
    Hash128 hashes[kGroup];
    for (size_t base = 0; base < items.size(); base += kGroup) {
      const size_t n = std::min(kGroup, items.size() - base);
      for (size_t i = 0; i < n; ++i) {
        hashes[i] = HashOfKey(items[base + i].key);
        Prefetch(hashes[i]);
      }
      for (size_t i = 0; i < n; ++i) {
        const AcquireItem& item = items[base + i];
        out[base + i] = Hot(hashes[i], GroupRef{item.key}, *item.limit, item.cost, now);
      }
    }
    return Status::Ok();
  }

  void Clear() {
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mu);
      for (size_t i = 0; i < s.capacity; ++i) {
        s.slots[i].h1.store(kEmpty, std::memory_order_relaxed);
        s.slots[i].h2.store(0, std::memory_order_relaxed);
        s.slots[i].state.store(0, std::memory_order_relaxed);
        s.slots[i].idle_at.store(0, std::memory_order_relaxed);
      }
      total_keys_.fetch_sub(s.count.load(std::memory_order_relaxed), std::memory_order_relaxed);
      s.count.store(0, std::memory_order_relaxed);
      for (const auto& [h, key] : s.logs) {
        group_counts_[key.group].fetch_sub(1, std::memory_order_relaxed);
        log_bytes_.fetch_sub(key.bytes, std::memory_order_relaxed);
        log_keys_.fetch_sub(1, std::memory_order_relaxed);
      }
      s.logs.clear();
    }
    for (size_t g = 0; g < kMaxGroups; ++g) group_counts_[g].store(0, std::memory_order_relaxed);
  }

  // The state file's image (LocalStore::Save): buckets by their TAT and
  // sliding-log entries through "now" on both clocks (the time left is what
  // carries over), windows by their wall-clock idle time (their index is on
  // the wall-clock grid already).
  std::string SaveImage(LocalStateSaved* saved) {
    const int64_t now_rel = Relative(options_.clock->Now());
    const int64_t now_wall = options_.clock->WallNow();
    internal::StateWriter w(now_wall, seed_);
    {
      std::shared_lock<std::shared_mutex> lock(groups_mu_);
      for (size_t id = 0; id < group_names_.size(); ++id) {
        w.Group(static_cast<uint16_t>(id), group_names_[id]);
      }
    }
    std::vector<internal::StateImage::LogEntry> entries;
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mu);
      for (size_t i = 0; i < s.capacity; ++i) {
        Slot& slot = s.slots[i];
        const uint64_t h1 = slot.h1.load(std::memory_order_acquire);
        if (h1 <= kTombstone) continue;
        const uint64_t h2 = slot.h2.load(std::memory_order_acquire);
        // The state before its idle time (Decide raises idle_at before a CAS).
        const uint64_t st = slot.state.load(std::memory_order_acquire);
        const int64_t idle = slot.idle_at.load(std::memory_order_acquire);
        if (st == kEvicting) continue;
        const uint16_t group = GroupOfSlot(slot);
        if (idle == kIdleIsState) {
          const auto tat = static_cast<int64_t>(st);
          if (tat <= now_rel) continue;  // full: nothing to keep
          w.Bucket(h1, h2, group, tat - now_rel + now_wall);
          ++saved->buckets;
        } else {
          if (idle <= now_rel) continue;  // the window is over
          w.Window(h1, h2, group, st, idle + wall_shift_);
          ++saved->windows;
        }
      }
      for (const auto& [h, key] : s.logs) {
        if (key.state.entries.empty()) continue;
        entries.clear();
        for (const auto& e : key.state.entries) {
          const int64_t at_wall = e.at_ns - now_rel + now_wall;
          // An entry older than the file format can place near this save (36
          // years: a file loaded then saved much later) counts in no window:
          // dropped, so that every file this store writes loads again.
          if (static_cast<__int128>(now_wall) - at_wall > internal::kMaxStateSpanNs) continue;
          entries.push_back({at_wall, e.cost});
        }
        if (entries.empty()) continue;
        w.Log(h.hi, h.lo, key.group, entries);
        ++saved->logs;
      }
    }
    std::string bytes = w.Finish();
    saved->bytes = bytes.size();
    return bytes;
  }

  size_t KeyCount() const {
    return total_keys_.load(std::memory_order_relaxed) + log_keys_.load(std::memory_order_relaxed);
  }

  // Installs a decoded image into this empty store (LocalStore::Load).
  LocalStateLoaded LoadImage(const internal::StateImage& image,
                             const LocalStateLoadOptions& options) {
    LocalStateLoaded out;
    out.saved_wall_ns = image.saved_wall_ns;
    const int64_t now_rel = Relative(options_.clock->Now());
    const int64_t now_wall = options_.clock->WallNow();
    seed_ = image.seed;
    // The file's groups, renumbered: ids follow this store's group table.
    constexpr uint16_t kShared = kMaxGroups - 1;
    std::vector<int32_t> remap(kMaxGroups, -1);  // file id -> our id; -1: dropped
    remap[kShared] = kShared;
    {
      std::unique_lock<std::shared_mutex> lock(groups_mu_);
      group_ids_.clear();
      group_names_.clear();
      for (const auto& g : image.groups) {
        if (options.keep_group && !options.keep_group(g.name)) continue;
        const uint64_t id = internal::HashKey(g.name, seed_).lo;
        auto [it, added] = group_ids_.emplace(id, static_cast<uint16_t>(group_names_.size()));
        if (added) group_names_.push_back(g.name);
        remap[g.id] = it->second;
      }
    }
    // A time more than the format's span from now (a file written far from
    // this clock, or crafted) is dropped as expired: what is left is within
    // 2^60 ns of now, so no offset below can overflow.
    auto near_now = [now_wall](int64_t wall) {
      const __int128 d = static_cast<__int128>(wall) - now_wall;
      return d <= internal::kMaxStateSpanNs && d >= -internal::kMaxStateSpanNs;
    };
    for (const auto& x : image.words) {
      if (remap[x.group] < 0) {
        ++out.dropped_group;
        continue;
      }
      if (!near_now(x.wall)) {
        ++out.dropped_expired;
        continue;
      }
      const auto group = static_cast<uint16_t>(remap[x.group]);
      uint64_t state = x.state;
      int64_t idle = kIdleIsState;
      if (x.bucket) {
        if (x.wall <= now_wall) {
          ++out.dropped_expired;
          continue;
        }
        state = static_cast<uint64_t>(now_rel + (x.wall - now_wall));
      } else {
        idle = x.wall - wall_shift_;
        if (idle <= now_rel) {
          ++out.dropped_expired;
          continue;
        }
      }
      const Hash128 h{x.hi, x.lo};
      Shard& s = ShardFor(h);
      std::lock_guard<std::mutex> lock(s.mu);
      Slot* target = nullptr;
      if (!GroupFull(group) && s.count.load(std::memory_order_relaxed) < s.key_cap &&
          total_keys_.load(std::memory_order_relaxed) < options_.max_keys) {
        target = FirstFree(s, h);
      }
      if (target == nullptr) {
        ++out.dropped_no_room;
        continue;
      }
      GroupOfSlot(*target) = group;
      group_counts_[group].fetch_add(1, std::memory_order_relaxed);
      target->state.store(state, std::memory_order_relaxed);
      target->idle_at.store(idle, std::memory_order_relaxed);
      target->h2.store(h.lo, std::memory_order_release);
      target->h1.store(h.hi, std::memory_order_release);
      s.count.fetch_add(1, std::memory_order_relaxed);
      total_keys_.fetch_add(1, std::memory_order_relaxed);
      ++out.loaded;
    }
    for (const auto& l : image.logs) {
      if (remap[l.group] < 0) {
        ++out.dropped_group;
        continue;
      }
      const auto group = static_cast<uint16_t>(remap[l.group]);
      const Hash128 h{l.hi, l.lo};
      Shard& s = ShardFor(h);
      std::lock_guard<std::mutex> lock(s.mu);
      if (GroupFull(group) || s.logs.size() >= s.key_cap) {
        ++out.dropped_no_room;
        continue;
      }
      LogKey key;
      key.group = group;
      for (const auto& e : l.entries) {
        if (!near_now(e.at_wall)) continue;  // older than any window, or crafted
        key.state.entries.push_back({now_rel + (e.at_wall - now_wall), e.cost});
        key.state.total += e.cost;
      }
      if (key.state.entries.empty()) {
        ++out.dropped_expired;
        continue;
      }
      auto it = s.logs.emplace(h, std::move(key)).first;
      group_counts_[group].fetch_add(1, std::memory_order_relaxed);
      log_keys_.fetch_add(1, std::memory_order_relaxed);
      Recount(it->second);
      ++out.loaded;
    }
    return out;
  }

  LocalStoreStats Stats() const {
    LocalStoreStats st;
    for (const auto& s : shards_) {
      st.capacity_slots += s.capacity;
    }
    st.keys = total_keys_.load(std::memory_order_relaxed);
    st.max_keys = options_.max_keys;
    st.log_keys = log_keys_.load(std::memory_order_relaxed);
    st.log_bytes = log_bytes_.load(std::memory_order_relaxed);
    st.bytes = arena_bytes_ + shards_.size() * shard_capacity_ * sizeof(uint16_t) +
               kMaxGroups * sizeof(std::atomic<size_t>) + shards_.size() * sizeof(Shard) +
               st.log_bytes;
    st.evicted = evicted_.load(std::memory_order_relaxed);
    st.reclaimed = reclaimed_.load(std::memory_order_relaxed);
    st.overflow_rejected = overflow_rejected_.load(std::memory_order_relaxed);
    st.overflow_allowed = overflow_allowed_.load(std::memory_order_relaxed);
    return st;
  }

  const LocalStoreOptions options_;

 private:
  SlotArray arena_;  // every shard's slots
  size_t shard_capacity_ = 0;
  size_t arena_bytes_ = 0;
  std::vector<Shard> shards_;
  size_t shard_mask_ = 0;
  HashSeed seed_{};
  int64_t epoch_ = 0;
  int64_t wall_shift_ = 0;             // store-relative time + wall_shift_ = wall time (windows)
  std::atomic<size_t> total_keys_{0};  // word-sized keys over all shards
  std::atomic<uint64_t> reclaimed_{0};
  std::atomic<uint64_t> overflow_rejected_{0};
  std::atomic<uint64_t> overflow_allowed_{0};
  std::atomic<uint64_t> evicted_{0};
  std::unique_ptr<uint16_t[]> slot_group_;               // per slot; written under its shard's mu
  std::unique_ptr<std::atomic<size_t>[]> group_counts_;  // keys per group (slots and logs)
  std::shared_mutex groups_mu_;                          // guards group_ids_
  std::unordered_map<uint64_t, uint16_t> group_ids_;     // hash of a group's bytes -> id
  std::vector<std::string> group_names_;  // by id (guarded by groups_mu_); "" when too long
  std::atomic<size_t> log_keys_{0};
  std::atomic<size_t> log_bytes_{0};
};

Result<std::unique_ptr<LocalStore>> LocalStore::Create(const LocalStoreOptions& options) {
  if (options.clock == nullptr) return InvalidArgument("clock: must not be null");
  if (options.max_keys < 1) return InvalidArgument("max_keys: must be at least 1");
  if (options.max_keys > (size_t{1} << 32)) return InvalidArgument("max_keys: must be <= 2^32");
  if (options.shards < 1 || options.shards > 65536) {
    return InvalidArgument("shards: must be between 1 and 65536");
  }
  return std::unique_ptr<LocalStore>(new LocalStore(std::make_unique<Impl>(options)));
}

LocalStore::LocalStore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)),
      leases_(std::make_unique<LeaseTable>(impl_->options_.max_keys, impl_->options_.shards)) {}
LocalStore::~LocalStore() = default;

Decision LocalStore::Acquire(std::string_view key, const Limit& limit, int64_t cost) {
  return AcquireAt(key, limit, cost, impl_->options_.clock->Now());
}

Decision LocalStore::AcquireAt(std::string_view key, const Limit& limit, int64_t cost,
                               int64_t now_ns) {
  return impl_->Hot(impl_->HashOfKey(key), GroupRef{key}, limit, cost < 0 ? 0 : cost,
                    impl_->Relative(now_ns));
}

LocalStore::PreparedKey LocalStore::Prepare(std::string_view key) const {
  const Hash128 h = impl_->HashOfKey(key);
  return {h.hi, h.lo, impl_->GroupOf(key)};
}

Decision LocalStore::AcquireAt(const PreparedKey& key, const Limit& limit, int64_t cost,
                               int64_t now_ns) {
  return impl_->Hot(
      Hash128{key.hi, key.lo},
      GroupRef{{}, static_cast<int64_t>(std::min<uint32_t>(key.group, kMaxGroups - 1))}, limit,
      cost < 0 ? 0 : cost, impl_->Relative(now_ns));
}

Result<BatchDecision> LocalStore::Acquire(std::span<const AcquireItem> items) {
  return AcquireAt(items, impl_->options_.clock->Now());
}

Result<BatchDecision> LocalStore::AcquireAt(std::span<const AcquireItem> items, int64_t now_ns) {
  return impl_->Batch(items, impl_->Relative(now_ns));
}

Status LocalStore::ResetKey(std::string_view key, const Limit& limit) {
  const int64_t now = impl_->Relative(impl_->options_.clock->Now());
  Result<Decision> r = impl_->Overwrite(impl_->HashOfKey(key), GroupRef{key}, limit, 0, now,
                                        /*insert=*/false);
  return r.ok() ? Status::Ok() : r.status();
}

Result<Decision> LocalStore::SetRemaining(std::string_view key, const Limit& limit,
                                          int64_t remaining) {
  if (Status st = CheckRemaining(limit, remaining); !st.ok()) return st;
  const int64_t now = impl_->Relative(impl_->options_.clock->Now());
  return impl_->Overwrite(impl_->HashOfKey(key), GroupRef{key}, limit, limit.burst() - remaining,
                          now, /*insert=*/true);
}

Status LocalStore::AcquireEach(std::span<const AcquireItem> items, std::span<Decision> out) {
  return AcquireEachAt(items, out, impl_->options_.clock->Now());
}

Status LocalStore::AcquireEachAt(std::span<const AcquireItem> items, std::span<Decision> out,
                                 int64_t now_ns) {
  return impl_->Each(items, out, impl_->Relative(now_ns));
}

Result<LeaseDecision> LocalStore::AcquireLease(std::string_view key, const LeaseLimit& limit) {
  return leases_->Acquire(key, limit, impl_->options_.clock->Now());
}

Result<std::vector<Settled>> LocalStore::Settle(std::span<const SettleItem> items) {
  return SettleAt(items, impl_->options_.clock->Now());
}

Result<std::vector<Settled>> LocalStore::SettleAt(std::span<const SettleItem> items,
                                                  int64_t now_ns) {
  return impl_->SettleBatch(items, impl_->Relative(now_ns));
}

Result<bool> LocalStore::ReleaseLease(std::string_view key, std::string_view lease_id) {
  return leases_->Release(key, lease_id, impl_->options_.clock->Now());
}

void LocalStore::Clear() {
  impl_->Clear();
  leases_->Clear();
}

Result<LocalStateSaved> LocalStore::Save(std::ostream& out) const {
  LocalStateSaved saved;
  const std::string bytes = impl_->SaveImage(&saved);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) return InternalError("state: the stream refused the write");
  return saved;
}

namespace {

Status FileError(std::string_view what, const std::string& path, int err) {
  return Status(StatusCode::kInternal,
                "state file " + path + ": " + std::string(what) + ": " + std::strerror(err));
}

}  // namespace

Result<LocalStateSaved> LocalStore::Save(const std::string& path) const {
  LocalStateSaved saved;
  const std::string bytes = impl_->SaveImage(&saved);
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgument("state file " + path + ": not a file name");
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return FileError("open its directory", path, errno);
  static std::atomic<uint64_t> sequence{0};
  const std::string tmp = "." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(sequence.fetch_add(1));
  int err = 0;
  const char* step = "create the temporary file";
  const int fd =
      ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    err = errno;
  } else {
    step = "write";
    for (size_t done = 0; done < bytes.size() && err == 0;) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno != EINTR) err = errno;
      if (n > 0) done += static_cast<size_t>(n);
    }
    if (err == 0 && ::fsync(fd) != 0) {
      err = errno;
      step = "fsync";
    }
    if (::close(fd) != 0 && err == 0) {
      err = errno;
      step = "close";
    }
    if (err == 0 && ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
      err = errno;
      step = "rename";
    }
    if (err != 0) ::unlinkat(dir_fd, tmp.c_str(), 0);
  }
  // The rename is durable once the directory is.
  if (err == 0 && ::fsync(dir_fd) != 0) {
    err = errno;
    step = "fsync its directory";
  }
  ::close(dir_fd);
  if (err != 0) return FileError(step, path, err);
  return saved;
}

Result<LocalStateLoaded> LocalStore::LoadBytes(std::string_view bytes,
                                               const LocalStateLoadOptions& options) {
  if (impl_->KeyCount() != 0) {
    return InvalidArgument("state: Load needs an empty store (load before the first decision)");
  }
  internal::StateLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.max_groups = kMaxGroups - 1;
  // One record per key at most, plus the meta record and the groups.
  limits.max_records = 2 * impl_->options_.max_keys + kMaxGroups + 1;
  auto image = internal::DecodeState(bytes, limits);
  if (!image.ok()) return image.status();
  return impl_->LoadImage(*image, options);
}

Result<LocalStateLoaded> LocalStore::Load(std::istream& in, const LocalStateLoadOptions& options) {
  std::string bytes;
  char buf[65536];
  while (in && bytes.size() <= options.max_bytes) {
    in.read(buf, sizeof(buf));
    bytes.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return InvalidArgument("state: the stream failed");
  return LoadBytes(bytes, options);
}

Result<LocalStateLoaded> LocalStore::Load(const std::string& path,
                                          const LocalStateLoadOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return InvalidArgument("state file " + path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  std::string bytes;
  int err = 0;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("state file " + path + ": not a regular file");
  } else {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n <= 0) break;
      bytes.append(buf, static_cast<size_t>(n));
      if (bytes.size() > options.max_bytes) break;  // refused below, by size
    }
  }
  ::close(fd);
  if (err != 0) {
    return InvalidArgument("state file " + path + ": cannot read: " + std::strerror(err));
  }
  auto loaded = LoadBytes(bytes, options);
  if (!loaded.ok()) {
    return Status(loaded.status().code(), "state file " + path + ": " + loaded.status().message());
  }
  return loaded;
}

LocalStoreStats LocalStore::Stats() const {
  LocalStoreStats stats = impl_->Stats();
  stats.lease_keys = leases_->keys();
  stats.lease_overflow_rejected = leases_->overflow_rejected();
  return stats;
}

}  // namespace tollgate
