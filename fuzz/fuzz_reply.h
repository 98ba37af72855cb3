// Hostile RedisReply trees for the targets that fuzz what tollgate makes of a
// script's or command's reply (lease_reply, settle_reply, key_admin_reply):
// the reply arrives parsed (reply_reader.cc, fuzzed by resp_reader), so these
// targets build the parsed tree directly from the input.
//
// AnyReply: any type, strings of any bytes, arrays nested at most kMaxDepth
// deep with at most kMaxElements elements. IntegerArray: an array of `n`
// integers, each within [lo, hi] or (one time in four) any int64, so that the
// decoders' range checks and the arithmetic behind them are both reached.
// AnyScriptLimit: a limit the Redis scripts run (any algorithm but
// sliding_log, sane or extreme constants), shared with script_reply.
#ifndef TOLLGATE_FUZZ_FUZZ_REPLY_H_
#define TOLLGATE_FUZZ_FUZZ_REPLY_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_input.h"
#include "redis/gcra_script.h"
#include "tollgate/limit.h"
#include "tollgate/redis_store.h"
#include "tollgate/status.h"

namespace tollgate::fuzz {

inline constexpr int kMaxDepth = 3;
inline constexpr size_t kMaxElements = 8;

inline RedisReply AnyReply(Input& in, int depth = 0) {
  RedisReply r;
  switch (in.Byte() % 6) {
    case 0:
      r.type = RedisReply::Type::kInteger;
      r.integer = in.Bool() ? in.Range(-2, 3) : in.Int64();
      break;
    case 1:
      r.type = RedisReply::Type::kString;
      r.str = std::string(in.Short(64));
      break;
    case 2:
      r.type = RedisReply::Type::kError;
      r.str = std::string(in.Short(255));
      break;
    case 3:
      r.type = RedisReply::Type::kStatus;
      r.str = std::string(in.Short(16));
      break;
    case 4:
      r.type = RedisReply::Type::kNil;
      break;
    default:
      r.type = RedisReply::Type::kArray;
      if (depth < kMaxDepth) {
        const size_t n = in.Byte() % (kMaxElements + 1);
        for (size_t i = 0; i < n && !in.empty(); ++i) r.elements.push_back(AnyReply(in, depth + 1));
      }
      break;
  }
  return r;
}

inline RedisReply IntegerArray(Input& in, size_t n, int64_t lo, int64_t hi) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  for (size_t i = 0; i < n; ++i) {
    RedisReply e;
    e.type = RedisReply::Type::kInteger;
    e.integer = (in.Byte() & 3) == 0 ? in.Int64() : in.Range(lo, hi);
    r.elements.push_back(e);
  }
  return r;
}

inline std::optional<Limit> AnyScriptLimit(Input& in) {
  LimitSpec spec;
  spec.algorithm = static_cast<Algorithm>(in.Byte() % 4);  // not sliding_log
  const bool window =
      spec.algorithm == Algorithm::kFixedWindow || spec.algorithm == Algorithm::kSlidingWindow;
  spec.burst =
      in.Bool() ? in.Range(1, 100) : in.Range(1, window ? (1 << 20) - 1 : Limit::kMaxBurst);
  static constexpr double kRates[] = {1e-6, 0.5, 1, 10, 1000, 1e6, 1e9};
  spec.rate =
      window ? 0 : std::max<double>(kRates[in.Byte() % 7], static_cast<double>(spec.burst) / 1e9);
  spec.window =
      Nanos(in.Bool() ? in.Range(1'000'000, 366LL * 86400 * 1'000'000'000) : 1'000'000'000);
  if (spec.algorithm == Algorithm::kLeakyBucket && in.Bool()) {
    spec.max_delay = Nanos(in.Bool() ? -1 : in.Range(1, 10'000'000'000));
  }
  auto limit = Limit::Create(spec);
  if (!limit.ok() || !redis::CheckScriptLimit(*limit).ok()) return std::nullopt;
  return *limit;
}

// A reply as a call delivers it: the reply, or (rarely) the call's own failure.
inline Result<RedisReply> AnyCallResult(Input& in, RedisReply reply) {
  if ((in.Byte() & 15) == 0) return Status(StatusCode::kTimeout, "call timed out");
  return reply;
}

}  // namespace tollgate::fuzz

#endif  // TOLLGATE_FUZZ_FUZZ_REPLY_H_
