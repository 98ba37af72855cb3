// The settlement script (Store::Settle on Redis and Redis Cluster; the
// arithmetic is core's Settle, include/tollgate/algorithm.h) and its wire
// format. Pure functions, no I/O.
//
// One call settles one key (EVAL script 1 <key> argv...):
//   ARGV[1] now in ns as a decimal string, or "" to read Redis TIME
//   ARGV[2] kind: 0 token/leaky bucket, 4 fixed window, 5 sliding window
//   bucket: ARGV[3] charge * interval ns, ARGV[4] refund * interval ns,
//           ARGV[5] tolerance + kMaxDebtNs (the debt bound past now), ns
//   window: ARGV[3] window ns, ARGV[4] charge, ARGV[5] refund, ARGV[6] the
//           refunded charge's age ns, ARGV[7] MaxSettleCount, ARGV[8] the
//           digits of a fixed window's count (7 or 13)
// Reply: an array of integers. Bucket: {base_s, base_ns, after_s, after_ns},
// max(TAT, now) - now before and TAT - now after (>= 0). Window: {charged,
// refunded, count after (fixed: used; sliding: prev * 2^20 + curr), rel_s,
// rel_ns}, rel = the end of the key's window - now (> 0).
// The values are the same as the batch script's (gcra_script.h), so a key's
// state is one format whichever script wrote it.
#ifndef TOLLGATE_SRC_REDIS_SETTLE_SCRIPT_H_
#define TOLLGATE_SRC_REDIS_SETTLE_SCRIPT_H_

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/redis_store.h"
#include "tollgate/store.h"

namespace tollgate::redis {

std::string_view SettleScript();

// kInvalidArgument when the script cannot settle `limit` (sliding_log, a
// calendar quota, or what CheckScriptLimit refuses).
Status CheckSettleLimit(const Limit& limit);

// The arguments after the key (ARGV[1..]) for `item`; `now` is "" (Redis
// TIME) or the client's wall clock in ns.
std::vector<std::string> SettleArgs(const SettleItem& item, const std::string& now);

// The Settled a reply means for `item`, type- and range-checked: anything but
// the documented array of integers within range is kScript, naming what was wrong.
Result<Settled> DecodeSettleReply(const SettleItem& item, const RedisReply& reply);

// Runs each item through `run` (one EVAL per item: argv and the Redis key to
// route by) and calls `done` once with every item's result, or the first
// error, when the last reply is in. Items are copied before it returns.
using SettleRun = std::function<void(std::string redis_key, std::vector<std::string> argv,
                                     std::function<void(Result<RedisReply>)> reply)>;
void SettleEachAsync(std::span<const SettleItem> items,
                     const std::function<std::string(std::string_view key, const Limit&)>& key_of,
                     const std::string& now, const SettleRun& run, Store::SettleCallback done);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_SETTLE_SCRIPT_H_
