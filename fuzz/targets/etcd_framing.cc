// Fuzz target: the HTTP/1.1 framing of etcd's gateway replies as the etcd
// policy source reads them (src/runtime/etcd_http.cc): the response head,
// chunked bodies (Dechunk) and the lines of a /v3/watch stream, then each
// line through ParseWatchLine, the same steps as EtcdWatch::WatchOnce.
//
// Input: a mode byte and a read-size byte, then the bytes. Mode 0: a response
// head (without its blank line); 1: a chunked body; 2: a watch stream,
// chunked; 3: a watch stream, not chunked.
// Properties:
//   - a head is accepted only with an HTTP/1.1 status line (100-599), never
//     with both chunked and Content-Length framing nor a length past
//     kMaxReplyBytes; a refusal quotes at most 100 bytes;
//   - a chunked body fed in pieces of 1..32 bytes (as reads split it) gives the
//     same body, end and failure as fed at once; the body is never larger
//     than the input; a chunk-size line longer than kMaxChunkHeader fails;
//   - a watch stream's lines are the stream's own bytes split at '\n' (none
//     holds one), the pending text stays within kMaxReplyBytes as WatchOnce
//     checks, and a parsed reply has at most kMaxEvents events and no negative
//     revision.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "runtime/etcd_http.h"
#include "runtime/etcd_reply.h"

namespace etcd = tollgate::etcd;
using tollgate::fuzz::Quote;

namespace {

struct Dechunked {
  bool ok = true;
  bool done = false;
  std::string body;
};

Dechunked DechunkInPieces(std::string_view bytes, size_t piece) {
  Dechunked out;
  std::string raw;
  while (out.ok && !out.done && !bytes.empty()) {
    const size_t n = piece == 0 ? bytes.size() : std::min(piece, bytes.size());
    raw.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    out.ok = etcd::Dechunk(&raw, &out.body, &out.done);
  }
  return out;
}

void WatchStream(std::string_view bytes, size_t piece, bool chunked) {
  std::string raw, lines, line;
  bool done = false;
  while (!bytes.empty() && !done) {
    const size_t n = std::min(piece, bytes.size());
    raw.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    if (chunked) {
      if (!etcd::Dechunk(&raw, &lines, &done)) return;
    } else {
      lines.append(raw);
      raw.clear();
    }
    while (etcd::TakeWatchLine(&lines, &line)) {
      FUZZ_CHECK(line.find('\n') == std::string::npos, "a line holds a newline");
      auto reply = etcd::ParseWatchLine(line);
      if (!reply.ok()) return;
      FUZZ_CHECK(reply->events.size() <= etcd::kMaxEvents, "too many events");
      FUZZ_CHECK(reply->revision >= 0 && reply->compact_revision >= 0, "negative revision");
    }
    if (lines.size() > etcd::kMaxReplyBytes) return;  // WatchOnce's bound
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t mode = in.Byte() % 4;
  const size_t piece = 1 + in.Byte() % 32;
  const std::string_view bytes = in.Rest();
  if (mode == 0) {
    auto head = etcd::ParseReplyHead(bytes);
    if (head.ok()) {
      FUZZ_CHECK(bytes.starts_with("HTTP/1.1 ") && head->status >= 100 && head->status <= 599,
                 "a head accepted without a status line");
      FUZZ_CHECK(!(head->chunked && head->content_length), "both framings accepted");
      FUZZ_CHECK(head->content_length.value_or(0) <= etcd::kMaxReplyBytes, "a large length");
    } else {
      FUZZ_CHECK(head.status().message().size() <= 130, "a long refusal");
    }
  } else if (mode == 1) {
    const Dechunked whole = DechunkInPieces(bytes, 0);
    const Dechunked split = DechunkInPieces(bytes, piece);
    FUZZ_CHECK(whole.ok == split.ok && whole.done == split.done && whole.body == split.body,
               "the chunked body depends on the reads: " + Quote(bytes));
    FUZZ_CHECK(whole.body.size() <= bytes.size(), "a body larger than its input");
    const size_t eol = bytes.find("\r\n");
    if (eol != std::string_view::npos && eol > etcd::kMaxChunkHeader) {
      FUZZ_CHECK(!whole.ok, "a long chunk-size line accepted: " + Quote(bytes));
    }
  } else {
    WatchStream(bytes, piece, mode == 2);
  }
  return 0;
}
