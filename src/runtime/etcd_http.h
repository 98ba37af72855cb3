// Internal: the HTTP/1.1 framing of etcd's gateway replies as the etcd policy
// source reads them (etcd_watch.cc does the I/O, these pure functions the
// parsing, so fuzz/targets/etcd_framing.cc runs exactly what a reply meets).
//
// Bounds: a response head at most kMaxHeadBytes; a chunk-size line (with any
// extension) at most kMaxChunkHeader bytes; a chunk at most kMaxReplyBytes
// (etcd_reply.h); a body with Content-Length at most kMaxReplyBytes. Errors
// are values: a refused head says why, a malformed chunk is `false`.
//
// Thread safety: pure functions.
#ifndef TOLLGATE_RUNTIME_ETCD_HTTP_H_
#define TOLLGATE_RUNTIME_ETCD_HTTP_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "tollgate/status.h"

namespace tollgate::etcd {

inline constexpr size_t kMaxHeadBytes = 16 * 1024;
inline constexpr size_t kMaxChunkHeader = 16;

// A response head: its status (100-599; a refusal's body says why, etcd_reply.h
// ParseErrorReply) and how its body is framed: chunked, Content-Length, or (neither)
// up to the end of the connection.
struct ReplyHead {
  int status = 0;
  bool chunked = false;
  std::optional<size_t> content_length;
};
// The head without its blank line, or why it is refused (not "HTTP/1.1 NNN ",
// a Content-Length that is not one decimal number up to kMaxReplyBytes, or
// both framings: quoting at most 100 bytes of the status line).
Result<ReplyHead> ParseReplyHead(std::string_view head);

// Moves complete chunks from `raw` to `body`; false on a malformed chunk.
// *done at the last (zero-length) chunk. `raw` keeps an incomplete chunk.
bool Dechunk(std::string* raw, std::string* body, bool* done);

// Moves the first complete line of a watch stream (up to '\n', without it)
// from `lines` to `line`; false while no line is complete.
bool TakeWatchLine(std::string* lines, std::string* line);

}  // namespace tollgate::etcd

#endif  // TOLLGATE_RUNTIME_ETCD_HTTP_H_
