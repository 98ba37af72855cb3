// The batch script and its wire format (pure functions, no I/O).
//
// One script call decides any number of groups; a group is one caller's batch
// and is all-or-nothing. Arguments:
//   KEYS    the distinct Redis keys of the call (or none, see ARGV[2])
//   ARGV[1] now in ns as a decimal string, or "" to read Redis TIME
//   ARGV[2] K: 0 when the keys are in KEYS; else K keys follow in ARGV (cluster:
//           undeclared keys of several slots of one node, allow-cross-slot-keys)
//   then    E, the number of distinct entries, then E entries (a limit + cost
//           shape): GCRA kinds 0-3 as `kind, increment ns, threshold ns`;
//           window kinds 4-5 as `kind, cost, window ns, burst`; a calendar
//           window as `7, cost, "base,b0,...,bn", burst`: window base + i is
//           [b_i, b_{i+1}) in whole seconds, windows around the client's clock
//           (CalendarBoundaries); the script picks the one holding its now
//           and then treats the entry as kind 4 (the state is the same)
//   then    one argument: the groups, a MessagePack array of integers
//           (decoded by cmsgpack in C, not by tonumber per argument). An item
//           is one number, key index * 2^21 + entry index (both 1-based;
//           kPackedItemBase). A value >= 2^21 is a group of that one item,
//           charged; else it is a count n followed by n items; a negative n is
//           a dry run: the group is decided but nothing is written
// Reply: one bulk string, a MessagePack array of 3 integers per item, in
// order: head, rel_s, rel_ns.
// head = code + 8 * count: count is 0 for GCRA items, `used` for a fixed
// window, prev * 2^20 + curr for a sliding window (the counts after the item).
// rel, split into seconds and nanoseconds, is tat_after - now (>= 0) for GCRA
// items and (end of the item's window) - now (> 0) for window items. code is 1
// allowed (charged), 0 denied; in a denied group 3 means "this item alone would
// fit" and 2 marks the item at which the items stopped fitting together; for
// both, the state reported is the one the item alone would leave (the client
// reports it uncharged; 2 as denied with retry_after 0, like LocalStore).
//
// Times are held in Lua as two exact limbs (seconds, nanoseconds < 1e9), so
// every value below 2^63 ns stays exact in Lua's doubles; see docs/redis.md.
#ifndef TOLLGATE_SRC_REDIS_GCRA_SCRIPT_H_
#define TOLLGATE_SRC_REDIS_GCRA_SCRIPT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/decision.h"
#include "tollgate/limit.h"
#include "tollgate/status.h"

namespace tollgate::redis {

// The Lua source of the script.
std::string_view GcraScript();
// The Lua the batch and settle scripts open with: replication, E9, and exact
// arithmetic on (s, n) time limbs (split, divmod, mul).
std::string_view LimbsLua();
// The same script with the Redis 7 shebang `#!lua flags=allow-cross-slot-keys`,
// so one call may touch keys of several slots held by the same cluster node.
const std::string& GcraClusterScript();

enum class ItemKind : int {
  kGcra = 0,           // allowed iff max(TAT, now) + inc <= now + threshold (tolerance)
  kShaper = 1,         // allowed iff max(TAT, now) <= now + threshold (max_delay)
  kNever = 2,          // cost > burst: never allowed, reports state
  kPeek = 3,           // cost 0: always allowed, reports state, writes nothing
  kFixedWindow = 4,    // allowed iff used + cost <= burst in the current window
  kSlidingWindow = 5,  // allowed iff prev * (w - elapsed) / w + curr + cost <= burst
  // Reports the window index held by its key's state at that point of its
  // group (charged: the window the preceding window item went into); must
  // follow a window item on the same key in the same group; writes nothing.
  // DecodeDecision puts the index in reset_after. Cluster cross-node refunds.
  kWindowIndex = 6,
};

struct ScriptItem {
  ItemKind kind;
  int64_t increment;  // ns (GCRA); the cost, at most burst + 1 (windows)
  int64_t threshold;  // ns: tolerance or max_delay (GCRA); the window length (windows)
  int64_t burst = 0;  // windows only
  // A fixed window aligned to this calendar (sent as kind 7); owned by the
  // Limit the job keeps beside the item.
  const Calendar* calendar = nullptr;
};

// Kind 7's boundary argument: "base,b0,...,b4", the calendar's windows from
// the one before `wall_now_ns`'s to two after it (base = the first one's
// index), so a Redis clock up to a whole window away from the client's still
// finds its window; farther, the script answers an error.
std::string CalendarBoundaries(const Calendar& calendar, int64_t wall_now_ns);

// Digits of a window count in the stored value: 7 (sliding windows, and fixed
// windows up to kMaxNarrowWindowCount), 13 (fixed windows above, up to 2^40).
inline constexpr int64_t kMaxNarrowWindowCount = 9'999'999;
int WindowCountDigits(const Limit& limit);

// Window algorithms keep (window index, counts) instead of a TAT, under a key
// that names the algorithm and the window length ("|fw:<ns>", "|sw:<ns>";
// "|fq:<ns>" for a fixed window of 13-digit counts), so
// a changed window length or algorithm never reads a state of another shape.
// A calendar quota's key names its calendar instead ("|fc:day@Europe/Berlin",
// "|fcq:..." for 13-digit counts), so every instance agrees on it.
// '|' never appears in an escaped or hashed key, so suffixed keys cannot
// collide with other keys. Empty for the GCRA algorithms.
std::string StateKeySuffix(const Limit& limit);

// kInvalidArgument when the script cannot decide `limit` (sliding_log, or
// constants the script cannot represent exactly).
Status CheckScriptLimit(const Limit& limit);
// What the script must do for `cost` against `limit` (limit must pass CheckScriptLimit).
ScriptItem MakeScriptItem(const Limit& limit, int64_t cost);
// The Decision core's Step() would have produced, from the script's answer
// (code and count are the reply head's code and head >> 3).
Decision DecodeDecision(const Limit& limit, const ScriptItem& item, int64_t code, int64_t rel_ns,
                        int64_t count = 0);

// Whether one reply triple (head, rel_s, rel_ns) is something the script can
// send for `item`: head >= 0 with code (head & 7) in 0..3 and count (head >> 3)
// below 2^41 (a sliding window's prev * 2^20 + curr, each below 2^21); rel_s
// in [0, kMaxReplySeconds] and rel_ns in [0, 1e9); and the code fits the item:
// a peek or a window index always fits (1, or 3 in a denied group), a kNever
// item never does (0), a denied GCRA item is over its threshold (rel +
// increment > threshold; a shaper: rel > threshold) and an allowed shaper item
// was charged (rel >= increment). A triple that passes keeps rel = rel_s * 1e9
// + rel_ns below 2^62 ns (146 years), so DecodeDecision neither overflows nor
// reports a negative wait, whatever the server sends.
inline constexpr int64_t kMaxReplySeconds = (int64_t{1} << 62) / 1'000'000'000 - 1;
bool ValidScriptTriple(const ScriptItem& item, int64_t head, int64_t rel_s, int64_t rel_ns);

// One entry's arguments in the layout above, each passed to `emit` as an
// int64_t or a std::string (a calendar window's boundaries, read at
// `clock`'s WallNow): shared by the batched call and key administration.
template <typename Emit>
void EmitEntryArgs(const ScriptItem& e, const Clock& clock, Emit&& emit) {
  if (e.kind == ItemKind::kFixedWindow && e.calendar != nullptr) {  // kind 7
    emit(int64_t{7});
    emit(e.increment);
    emit(CalendarBoundaries(*e.calendar, clock.WallNow()));
    emit(e.burst);
    return;
  }
  emit(static_cast<int64_t>(e.kind));
  emit(e.increment);
  emit(e.threshold);
  if (e.kind >= ItemKind::kFixedWindow) emit(e.burst);
}

// Whether `sha` is what SCRIPT LOAD returns: 40 lower-case hex digits.
bool IsScriptSha(std::string_view sha);

// The MessagePack subset of the wire: an array of integers.
void AppendMsgpackArrayHeader(std::string& out, size_t n);
void AppendMsgpackInt(std::string& out, int64_t v);
// Parses an array of integers; false when `in` is anything else.
bool ParseMsgpackInts(std::string_view in, std::vector<int64_t>* out);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_GCRA_SCRIPT_H_
