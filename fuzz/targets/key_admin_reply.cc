// Fuzz target: the key-administration replies (src/redis/key_admin.cc
// CheckResetReply, DecodeOverwriteReply): what a Redis server answers to the
// DEL of a key reset and to the script that forgets and charges a key
// (`tollgate key set`, /v1/keys/set).
//
// Input: a limit the script runs and a cost within its burst, then the
// overwrite's reply: structure-aware (a MessagePack bulk string of one
// {code + 8 * count, rel_s, rel_ns} triple, plausible or any three int64
// values, sometimes cut short or padded) or any reply tree (fuzz_reply.h);
// then the DEL's reply, any tree.
// Properties: a reset is ok exactly for the integer 0 or 1; an overwrite is a
// decision only for a string that holds one triple ValidScriptTriple accepts
// with code 1, and that decision is allowed with non-negative waits, reset and
// delay (no overflow: UBSan); anything else is an error with a message.
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_reply.h"
#include "redis/gcra_script.h"
#include "redis/key_admin.h"

namespace {

using tollgate::Decision;
using tollgate::Limit;
using tollgate::Nanos;
using tollgate::RedisReply;
using tollgate::Result;
using tollgate::fuzz::Input;
namespace redis = tollgate::redis;

RedisReply OverwriteReply(Input& in, const Limit& limit) {
  if (in.Bool()) return tollgate::fuzz::AnyReply(in);
  std::vector<int64_t> triple;
  if (in.Bool()) {  // plausible: code, count, rel within the limit's own scale
    const int64_t code = in.Range(0, 3);
    const int64_t count = in.Range(0, std::min<int64_t>(limit.burst() + 2, int64_t{1} << 41));
    const int64_t rel = in.Range(0, std::max<int64_t>(limit.tolerance_ns(), limit.window_ns()) * 2);
    triple = {code + 8 * count, rel / 1'000'000'000, rel % 1'000'000'000};
  } else {
    triple = {in.Int64(), in.Int64(), in.Int64()};
  }
  const uint8_t shape = in.Byte() & 7;
  if (shape == 0) triple.pop_back();
  if (shape == 1) triple.push_back(in.Int64());
  RedisReply r;
  r.type = RedisReply::Type::kString;
  redis::AppendMsgpackArrayHeader(r.str, triple.size());
  for (int64_t v : triple) redis::AppendMsgpackInt(r.str, v);
  if (shape == 2) r.str += std::string(in.Short(8));  // trailing bytes
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  auto limit = tollgate::fuzz::AnyScriptLimit(in);
  if (!limit) return 0;
  const int64_t cost = in.Bool() ? in.Range(0, 3) : in.Range(0, limit->burst());
  if (cost > limit->burst()) return 0;
  const Result<RedisReply> overwrite =
      tollgate::fuzz::AnyCallResult(in, OverwriteReply(in, *limit));
  Result<Decision> d = redis::DecodeOverwriteReply(overwrite, *limit, cost);
  if (d.ok()) {
    FUZZ_CHECK(overwrite.ok() && overwrite->type == RedisReply::Type::kString,
               "a decision from a reply that is not a string");
    std::vector<int64_t> v;
    FUZZ_CHECK(redis::ParseMsgpackInts(overwrite->str, &v) && v.size() == 3 && (v[0] & 7) == 1,
               "a decision from a reply that is not one applied triple");
    FUZZ_CHECK(d->allowed, "an applied overwrite that is not allowed");
    FUZZ_CHECK(d->retry_after >= Nanos(0), "a negative retry_after");
    FUZZ_CHECK(d->reset_after >= Nanos(0), "a negative reset_after");
    FUZZ_CHECK(d->delay >= Nanos(0), "a negative delay");
  } else {
    FUZZ_CHECK(!d.status().message().empty(), "an error without a message");
  }

  const Result<RedisReply> del = tollgate::fuzz::AnyCallResult(in, tollgate::fuzz::AnyReply(in));
  const bool reset_ok = redis::CheckResetReply(del).ok();
  FUZZ_CHECK(reset_ok == (del.ok() && del->type == RedisReply::Type::kInteger &&
                          (del->integer == 0 || del->integer == 1)),
             "a reset accepted a reply other than 0 or 1");
  return 0;
}
