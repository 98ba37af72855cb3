#include "runtime/etcd_http.h"

#include <algorithm>

#include "runtime/etcd_reply.h"
#include "tollgate/http_text.h"

namespace tollgate::etcd {

Result<ReplyHead> ParseReplyHead(std::string_view head) {
  const auto refused = [head](std::string_view why) {
    return UnavailableError(std::string(why) + ": " +
                            std::string(head.substr(0, head.find('\r')).substr(0, 100)));
  };
  ReplyHead out;
  if (head.size() < 13 || !head.starts_with("HTTP/1.1 ") || head[12] != ' ') {
    return refused("not an HTTP/1.1 status line");
  }
  for (size_t i = 9; i < 12; ++i) {
    if (head[i] < '0' || head[i] > '9') return refused("not an HTTP/1.1 status line");
    out.status = out.status * 10 + (head[i] - '0');
  }
  if (out.status < 100 || out.status > 599) return refused("not an HTTP/1.1 status line");
  const std::string lower = AsciiLowered(head);
  out.chunked = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
  constexpr std::string_view kLength = "\r\ncontent-length:";
  if (size_t at = lower.find(kLength); at != std::string::npos) {
    if (out.chunked || lower.find(kLength, at + 1) != std::string::npos) {
      return refused("ambiguous framing");
    }
    const size_t end = std::min(lower.find("\r\n", at + 2), lower.size());
    const std::string_view value =
        TrimOws(std::string_view(lower).substr(at + kLength.size(), end - at - kLength.size()));
    size_t length = 0;
    if (value.empty() || value.size() > 8) return refused("bad content-length");
    for (char c : value) {
      if (c < '0' || c > '9') return refused("bad content-length");
      length = length * 10 + size_t(c - '0');
    }
    if (length > kMaxReplyBytes) return refused("content-length too large");
    out.content_length = length;
  }
  return out;
}

bool Dechunk(std::string* raw, std::string* body, bool* done) {
  while (true) {
    const size_t eol = raw->find("\r\n");
    // A line of kMaxChunkHeader bytes may have its CR here and its LF in the next read.
    if (eol == std::string::npos) return raw->size() <= kMaxChunkHeader + 1;
    if (eol == 0 || eol > kMaxChunkHeader) return false;
    size_t size = 0;
    for (size_t i = 0; i < eol && (*raw)[i] != ';'; ++i) {
      const char ch = (*raw)[i];
      const int digit = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                        : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                 : -1;
      if (digit < 0 || size > kMaxReplyBytes) return false;
      size = size * 16 + size_t(digit);
    }
    if (size == 0) {
      *done = true;
      return true;
    }
    if (raw->size() < eol + 2 + size + 2) return size <= kMaxReplyBytes;
    if (raw->compare(eol + 2 + size, 2, "\r\n") != 0) return false;
    body->append(*raw, eol + 2, size);
    raw->erase(0, eol + 2 + size + 2);
  }
}

bool TakeWatchLine(std::string* lines, std::string* line) {
  const size_t eol = lines->find('\n');
  if (eol == std::string::npos) return false;
  line->assign(*lines, 0, eol);
  lines->erase(0, eol + 1);
  return true;
}

}  // namespace tollgate::etcd
