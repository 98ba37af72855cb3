// RESP helpers for the Redis fuzz targets: RESP2 text builders, a structural
// comparison of reply trees, every handler tollgate runs on a reply, and the
// invariants of a parsed topology.
#ifndef TOLLGATE_FUZZ_FUZZ_RESP_H_
#define TOLLGATE_FUZZ_FUZZ_RESP_H_

#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <hiredis/hiredis.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "redis/cluster_slots.h"
#include "redis/gcra_script.h"
#include "redis/node_client.h"
#include "redis/reply_reader.h"

namespace tollgate::fuzz {

inline std::string RespArray(size_t n) { return "*" + std::to_string(n) + "\r\n"; }
inline std::string RespBulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}
inline std::string RespInt(int64_t v) { return ":" + std::to_string(v) + "\r\n"; }

inline bool SameReply(const redisReply* a, const redisReply* b) {
  if (a == nullptr || b == nullptr) return a == b;
  if (a->type != b->type) return false;
  switch (a->type) {
    case REDIS_REPLY_INTEGER:
      return a->integer == b->integer;
    case REDIS_REPLY_ARRAY:
      if (a->elements != b->elements) return false;
      for (size_t i = 0; i < a->elements; ++i) {
        if (!SameReply(a->element[i], b->element[i])) return false;
      }
      return true;
    case REDIS_REPLY_NIL:
      return true;
    default:
      return std::string_view(a->str, a->len) == std::string_view(b->str, b->len);
  }
}

// Reads every reply of `bytes`, fed in pieces of the sizes `piece` gives (0:
// all at once). Returns whether the stream stayed valid.
template <typename PieceFn>
bool ReadAll(std::string_view bytes, PieceFn piece, std::vector<redis::ReplyPtr>* out) {
  redis::ReplyReader reader;
  size_t at = 0;
  while (at < bytes.size()) {
    size_t n = piece();
    if (n == 0 || n > bytes.size() - at) n = bytes.size() - at;
    if (!reader.Feed(bytes.data() + at, n)) return false;
    at += n;
    for (;;) {
      redis::ReplyPtr r;
      if (!reader.Next(&r)) {
        FUZZ_CHECK(!reader.error().empty(), "a failed read without a reason");
        return false;
      }
      if (r == nullptr) break;
      out->push_back(std::move(r));
    }
  }
  return true;
}

inline void CheckSlotMap(const Result<redis::SlotMap>& map, std::string_view what) {
  if (!map.ok()) {
    FUZZ_CHECK(!map.status().message().empty(), std::string(what) + ": refused without a reason");
    return;
  }
  FUZZ_CHECK(map->masters.size() == map->replicas.size(), std::string(what) + ": replica lists");
  FUZZ_CHECK(map->masters.size() <= static_cast<size_t>(redis::kClusterSlots),
             std::string(what) + ": more masters than slots");
  std::set<std::string> seen;
  for (const std::string& m : map->masters) {
    FUZZ_CHECK(seen.insert(m).second, std::string(what) + ": master listed twice: " + Quote(m));
    const size_t colon = m.rfind(':');
    FUZZ_CHECK(colon != std::string::npos && redis::ValidHost(m.substr(0, colon)),
               std::string(what) + ": master endpoint " + Quote(m));
  }
  for (int16_t o : map->owner) {
    FUZZ_CHECK(o >= -1 && o < static_cast<int>(map->masters.size()),
               std::string(what) + ": slot owner out of range");
  }
  FUZZ_CHECK(map->covered() >= 0 && map->covered() <= redis::kClusterSlots, "covered");
}

inline void CheckRedirect(std::string_view text) {
  for (std::string_view kind : {std::string_view("MOVED"), std::string_view("ASK")}) {
    int slot = -1;
    std::string endpoint;
    if (!redis::ParseRedirect(text, kind, &slot, &endpoint)) continue;
    FUZZ_CHECK(slot >= 0 && slot < redis::kClusterSlots, "redirect slot out of range");
    const size_t colon = endpoint.rfind(':');
    FUZZ_CHECK(colon != std::string::npos && redis::ValidHost(endpoint.substr(0, colon)),
               "redirect endpoint " + Quote(endpoint));
  }
  (void)redis::RetryableClusterError(text);
  const Status st = redis::ErrorReplyStatus("fuzz:1", text);
  FUZZ_CHECK(!st.ok() && st.message().size() < 400, "error reply status");
}

// Every handler tollgate runs on a reply, whatever the reply is.
inline void HandleReply(const redisReply* r) {
  (void)redis::ToRedisReply(r);
  CheckSlotMap(redis::ParseClusterSlots(r, "seed.host"), "CLUSTER SLOTS");
  CheckSlotMap(redis::ParseClusterShards(r, "seed.host", false), "CLUSTER SHARDS");
  CheckSlotMap(redis::ParseClusterShards(r, "", true), "CLUSTER SHARDS (tls)");
  if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS) {
    CheckRedirect(std::string_view(r->str, r->len));
  }
  if (r->type == REDIS_REPLY_STRING) {
    const std::string_view s(r->str, r->len);
    (void)redis::IsScriptSha(s);
    std::vector<int64_t> values;
    if (redis::ParseMsgpackInts(s, &values)) {
      FUZZ_CHECK(values.size() <= s.size(), "more integers than bytes");
    }
  }
}

}  // namespace tollgate::fuzz

#endif  // TOLLGATE_FUZZ_FUZZ_RESP_H_
