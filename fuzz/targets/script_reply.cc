// Fuzz target: the batch script's reply (src/redis/gcra_script.cc
// ParseMsgpackInts, ValidScriptTriple, DecodeDecision; node_client.cc
// DecodeJob): what a Redis server answers to EVALSHA, decoded into decisions.
//
// Input: a mode byte. Mode 0: the rest is a reply bulk string (MessagePack).
// Otherwise, structure-aware: 1-4 items, each a limit (any algorithm the
// script runs, sane or extreme constants), a cost, and a reply triple that is
// either plausible or any three int64 values; the triples are encoded as the
// script would, decoded, checked, and decoded into a BatchDecision.
// Properties: MessagePack integers round-trip; a reply that passes
// ValidScriptTriple decodes without overflow (UBSan) into decisions with
// non-negative waits, reset and delay, allowed exactly for codes 1 and 3.
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_reply.h"
#include "redis/gcra_script.h"
#include "redis/node_client.h"

namespace {

using tollgate::Decision;
using tollgate::Limit;
using tollgate::fuzz::Input;
namespace redis = tollgate::redis;

void RoundTrip(std::string_view bytes) {
  std::vector<int64_t> values;
  if (!redis::ParseMsgpackInts(bytes, &values)) return;
  std::string again;
  redis::AppendMsgpackArrayHeader(again, values.size());
  for (int64_t v : values) redis::AppendMsgpackInt(again, v);
  std::vector<int64_t> back;
  FUZZ_CHECK(redis::ParseMsgpackInts(again, &back) && back == values,
             "MessagePack integers do not round-trip");
}

void CheckDecision(const Decision& d, const Limit& limit, const redis::ScriptItem& item,
                   const int64_t* triple, int64_t code) {
  const std::string what =
      limit.ToString() + " kind " + std::to_string(static_cast<int>(item.kind)) + " inc " +
      std::to_string(item.increment) + " thr " + std::to_string(item.threshold) + " triple " +
      std::to_string(triple[0]) + "," + std::to_string(triple[1]) + "," +
      std::to_string(triple[2]) + ": retry " + std::to_string(d.retry_after.count()) + " reset " +
      std::to_string(d.reset_after.count()) + " delay " + std::to_string(d.delay.count());
  const bool allowed = code == 1 || code == 3;
  FUZZ_CHECK(d.allowed == allowed, "allowed for code " + std::to_string(code) + ": " + what);
  FUZZ_CHECK(d.reset_after.count() >= 0, "negative reset_after: " + what);
  FUZZ_CHECK(d.delay.count() >= 0, "negative delay: " + what);
  FUZZ_CHECK(d.retry_after.count() >= 0, "negative retry_after: " + what);
  if (allowed && item.kind != redis::ItemKind::kWindowIndex) {
    FUZZ_CHECK(d.retry_after.count() == 0, "an allowed decision with a wait: " + what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  if (in.Byte() == 0) {
    RoundTrip(in.Rest());
    return 0;
  }
  redis::NodeJob job;
  job.dry_run = in.Bool();
  std::vector<int64_t> triples;
  const size_t n = 1 + in.Byte() % 4;
  for (size_t i = 0; i < n && !in.empty(); ++i) {
    auto limit = tollgate::fuzz::AnyScriptLimit(in);
    if (!limit) continue;
    const int64_t cost = in.Bool() ? in.Range(0, 3) : in.Range(0, limit->burst() + 2);
    redis::ScriptItem item = redis::MakeScriptItem(*limit, cost);
    if (item.kind >= redis::ItemKind::kFixedWindow && (in.Byte() & 7) == 0) {
      item.kind = redis::ItemKind::kWindowIndex;
    }
    job.keys.push_back("k");
    job.limits.push_back(*limit);
    job.items.push_back(item);
    if (in.Bool()) {  // plausible: code, count, rel within the limit's own scale
      const int64_t code = in.Range(0, 3);
      const int64_t count = item.kind >= redis::ItemKind::kFixedWindow ? in.Range(0, 1 << 21) : 0;
      const int64_t rel =
          in.Range(0, std::max<int64_t>(limit->tolerance_ns(), limit->window_ns()) * 2);
      triples.push_back(code + 8 * count);
      triples.push_back(rel / 1'000'000'000);
      triples.push_back(rel % 1'000'000'000);
    } else {
      for (int k = 0; k < 3; ++k) triples.push_back(in.Int64());
    }
  }
  if (job.items.empty()) return 0;
  std::string wire;
  redis::AppendMsgpackArrayHeader(wire, triples.size());
  for (int64_t v : triples) redis::AppendMsgpackInt(wire, v);
  RoundTrip(wire);
  std::vector<int64_t> values;
  FUZZ_CHECK(redis::ParseMsgpackInts(wire, &values) && values == triples, "encode/decode");
  // OnScriptReply's check: one bad triple refuses the whole reply.
  for (size_t i = 0; i < job.items.size(); ++i) {
    if (!redis::ValidScriptTriple(job.items[i], values[3 * i], values[3 * i + 1],
                                  values[3 * i + 2])) {
      return 0;
    }
  }
  const tollgate::BatchDecision batch = redis::DecodeJob(job, values.data());
  FUZZ_CHECK(batch.decisions.size() == job.items.size(), "one decision per item");
  bool all = true;
  for (size_t i = 0; i < job.items.size(); ++i) {
    const int64_t code = values[3 * i] & 7;
    all = all && code == 1;
    CheckDecision(batch.decisions[i], job.limits[i], job.items[i], &values[3 * i],
                  job.dry_run && code == 1 ? 3 : code);
  }
  FUZZ_CHECK(batch.allowed == all, "batch allowed disagrees with its items");
  return 0;
}
