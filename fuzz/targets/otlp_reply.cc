// Fuzz target: an OTLP collector's reply to an export as the span exporter
// reads it (trace::CollectorReply, src/trace/otlp_reply.cc): the status line
// and headers, a body by Content-Length, chunked (size lines with extensions,
// trailers) or up to the close, every part bounded.
//
// Input: three bytes of limits (head, chunk-size line, body: small, so the
// bounds are reached), a byte of read sizes, then the bytes a collector sends.
// Properties:
//   - fed in pieces of 1..16 bytes (as socket reads split it) or at once, the
//     reader ends in the same state with the same status, body size and
//     overflow: framing does not depend on how reads fall;
//   - the body never passes its bound; an overflow is a failure; a success
//     is a complete reply with a 2xx status;
//   - after a reply ends, more bytes change nothing.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "trace/otlp_reply.h"

namespace {

using tollgate::trace::CollectorReply;

void Run(CollectorReply& reply, std::string_view bytes, size_t piece, bool close) {
  while (!bytes.empty() && reply.state() == CollectorReply::State::kMore) {
    const size_t n = piece == 0 ? bytes.size() : std::min(piece, bytes.size());
    reply.Feed(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  if (close) reply.Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  tollgate::trace::ReplyLimits limits;
  limits.head_bytes = 64 + in.Byte() * 4;
  limits.chunk_line_bytes = 16 + in.Byte() % 64;
  limits.body_bytes = 1 + in.Byte() * 8;
  const size_t piece = 1 + in.Byte() % 16;
  const bool close = in.Bool();
  const std::string_view bytes = in.Rest();

  CollectorReply whole(limits), split(limits);
  Run(whole, bytes, 0, close);
  Run(split, bytes, piece, close);
  const std::string what = tollgate::fuzz::Quote(bytes);
  FUZZ_CHECK(whole.state() == split.state(), "the state depends on the reads: " + what);
  FUZZ_CHECK(whole.status() == split.status(), "the status depends on the reads: " + what);
  // A failed reply is dropped whole: how much of its body was read before the failure may
  // depend on the piece size (a bound met in one read, a bad line in the next).
  FUZZ_CHECK(
      whole.state() == CollectorReply::State::kFailed || whole.body_size() == split.body_size(),
      "the body depends on the reads: " + what);
  // Which fault ends a failed reply first (a bound or a bad byte) may depend on the reads; either
  // way it fails.
  FUZZ_CHECK(
      whole.state() == CollectorReply::State::kFailed || whole.overflow() == split.overflow(),
      "the overflow depends on the reads: " + what);
  for (const CollectorReply* r : {&whole, &split}) {
    FUZZ_CHECK(r->body_size() <= limits.body_bytes, "a body past its bound: " + what);
    FUZZ_CHECK(!r->overflow() || r->state() == CollectorReply::State::kFailed,
               "an overflow that did not fail: " + what);
    FUZZ_CHECK(!r->success() || (r->status() >= 200 && r->status() < 300),
               "a success without 2xx: " + what);
    FUZZ_CHECK(r->state() != CollectorReply::State::kFailed || !r->error().empty(),
               "a failure without a reason: " + what);
  }
  const auto before = whole.state();
  const size_t body = whole.body_size();
  if (before != CollectorReply::State::kMore) {
    whole.Feed("HTTP/1.1 200 OK\r\n\r\nmore");
    FUZZ_CHECK(whole.state() == before && whole.body_size() == body,
               "bytes after the end changed the reply: " + what);
  }
  return 0;
}
