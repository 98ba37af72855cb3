// Fuzz target: the settlement script's replies (src/redis/settle_script.cc
// DecodeSettleReply, SettleEachAsync): what a Redis server answers to the
// EVAL that settles a key after the response (a cost charged, a refund).
//
// Input: 1-3 settlement items (any limit the script settles: token, leaky,
// fixed or sliding window; a charge, a refund, an age), each with its reply:
// structure-aware (4 bucket or 5 window integers, mostly in range) or any
// reply tree (fuzz_reply.h), sometimes a failed call.
// Properties: SettleEachAsync calls back exactly once, with one result per
// item or an error; a reply that is not the documented array of integers in
// range is kScript (kServer-like text kept for an error reply), never a
// settlement; a settlement decodes without overflow (UBSan) into 0 <= charged
// <= charge and 0 <= refunded <= refund and a decision with non-negative
// waits.
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_reply.h"
#include "redis/settle_script.h"
#include "tollgate/algorithm.h"

namespace {

using tollgate::Algorithm;
using tollgate::Limit;
using tollgate::Nanos;
using tollgate::RedisReply;
using tollgate::Result;
using tollgate::Settled;
using tollgate::SettleItem;
using tollgate::fuzz::Input;
namespace redis = tollgate::redis;

bool IsBucket(const Limit& limit) {
  return limit.algorithm() == Algorithm::kTokenBucket ||
         limit.algorithm() == Algorithm::kLeakyBucket;
}

RedisReply SettleReply(Input& in, const SettleItem& item) {
  if (in.Bool()) return tollgate::fuzz::AnyReply(in);
  const Limit& limit = *item.limit;
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  auto push = [&](int64_t lo, int64_t hi) {
    RedisReply e;
    e.type = RedisReply::Type::kInteger;
    e.integer = (in.Byte() & 7) == 0 ? in.Int64() : in.Range(lo, hi);
    r.elements.push_back(e);
  };
  const int64_t span_s =
      std::max<int64_t>(limit.tolerance_ns(), limit.window_ns()) / 1'000'000'000 + 2;
  if (IsBucket(limit)) {
    push(0, span_s);
    push(0, 999'999'999);
    push(0, span_s);
    push(0, 999'999'999);
  } else {
    const int64_t max = tollgate::MaxSettleCount(limit);
    push(0, item.charge + 1);
    push(0, item.refund + 1);
    push(0, limit.algorithm() == Algorithm::kSlidingWindow ? (max << 20) | max : max);
    push(0, span_s);
    push(0, 999'999'999);
  }
  if ((in.Byte() & 7) == 0) r.elements.pop_back();  // a short array
  return r;
}

void CheckSettled(const Settled& s, const SettleItem& item) {
  FUZZ_CHECK(s.charged >= 0 && s.charged <= item.charge,
             "charged " + std::to_string(s.charged) + " of " + std::to_string(item.charge));
  FUZZ_CHECK(s.refunded >= 0 && s.refunded <= item.refund,
             "refunded " + std::to_string(s.refunded) + " of " + std::to_string(item.refund));
  FUZZ_CHECK(s.decision.retry_after >= Nanos(0), "a negative retry_after");
  FUZZ_CHECK(s.decision.reset_after >= Nanos(0), "a negative reset_after");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  std::vector<Limit> limits;
  std::vector<std::string> keys;
  const size_t n = 1 + in.Byte() % 3;
  for (size_t i = 0; i < n && !in.empty(); ++i) {
    auto limit = tollgate::fuzz::AnyScriptLimit(in);
    if (!limit || !redis::CheckSettleLimit(*limit).ok()) continue;
    limits.push_back(*limit);
    keys.push_back("k" + std::to_string(i));
  }
  if (limits.empty()) return 0;
  std::vector<SettleItem> items;
  for (size_t i = 0; i < limits.size(); ++i) {
    SettleItem item{keys[i], &limits[i]};
    const int64_t scale = in.Bool() ? 10 : limits[i].burst() * 4;
    item.charge = in.Range(0, scale);
    item.refund = in.Range(0, scale);
    item.age = Nanos(in.Bool() ? in.Range(0, 10'000'000'000) : in.Range(0, INT64_MAX));
    items.push_back(item);
  }
  std::vector<Result<RedisReply>> replies;
  for (const SettleItem& item : items) {
    replies.push_back(tollgate::fuzz::AnyCallResult(in, SettleReply(in, item)));
  }
  // Each reply alone.
  for (size_t i = 0; i < items.size(); ++i) {
    if (!replies[i].ok()) continue;
    Result<Settled> s = redis::DecodeSettleReply(items[i], *replies[i]);
    if (s.ok()) {
      FUZZ_CHECK(replies[i]->type == RedisReply::Type::kArray, "a settlement from a non-array");
      CheckSettled(*s, items[i]);
    } else {
      FUZZ_CHECK(!s.status().message().empty(), "an error without a message");
    }
  }
  // The whole batch, as the stores run it.
  size_t runs = 0;
  int done = 0;
  redis::SettleEachAsync(
      items, [](std::string_view key, const Limit&) { return std::string(key); }, "",
      [&](std::string redis_key, std::vector<std::string> argv,
          std::function<void(Result<RedisReply>)> reply) {
        FUZZ_CHECK(runs < items.size() && redis_key == keys[runs], "a run for another key");
        FUZZ_CHECK(!argv.empty(), "an empty argv");
        reply(replies[runs++]);
      },
      [&](Result<std::vector<Settled>> all) {
        ++done;
        if (!all.ok()) return;
        FUZZ_CHECK(all->size() == items.size(), "one result per item");
        for (size_t i = 0; i < items.size(); ++i) CheckSettled((*all)[i], items[i]);
      });
  FUZZ_CHECK(done == 1, "SettleEachAsync: one callback");
  return 0;
}
