// Fuzz target: the RESP reader every Redis connection reads with
// (src/redis/reply_reader.cc, hiredis' reader with bounds) and every handler
// tollgate runs on a reply (topology parsers, redirections and retryable
// errors, script reply and SCRIPT LOAD checks).
//
// Input: the bytes a Redis server (or anything listening where Redis should
// be) sends; the seed files are replies captured from Redis 7.0.
// Properties: reading all at once and reading in pieces (1-13 bytes, sizes
// derived from the input's length) give the same replies and the same
// failure; a failure says
// why; every handler holds its invariants on every reply (fuzz_resp.h).
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_resp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t seed = static_cast<uint32_t>(size) * 2654435761u;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  std::vector<tollgate::redis::ReplyPtr> whole, pieces;
  const bool whole_ok = tollgate::fuzz::ReadAll(
      bytes, [] { return size_t{0}; }, &whole);
  const bool pieces_ok = tollgate::fuzz::ReadAll(
      bytes,
      [&seed] {
        seed = seed * 1103515245u + 12345u;
        return size_t{1} + (seed >> 16) % 13;
      },
      &pieces);
  FUZZ_CHECK(whole_ok == pieces_ok, "reading in pieces changed the outcome");
  FUZZ_CHECK(whole.size() == pieces.size(),
             "reading in pieces changed the reply count: " + std::to_string(whole.size()) + " vs " +
                 std::to_string(pieces.size()));
  for (size_t i = 0; i < whole.size(); ++i) {
    FUZZ_CHECK(tollgate::fuzz::SameReply(whole[i].get(), pieces[i].get()),
               "reading in pieces changed reply " + std::to_string(i));
    tollgate::fuzz::HandleReply(whole[i].get());
  }
  return 0;
}
