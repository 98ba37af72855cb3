#include "runtime/etcd_http.h"

#include "runtime/etcd_reply.h"
#include "tollgate/http_text.h"

namespace tollgate::etcd {

Result<bool> ParseReplyHead(std::string_view head) {
  if (!head.starts_with("HTTP/1.1 200 ")) {
    return UnavailableError(std::string(head.substr(0, head.find('\r')).substr(0, 100)));
  }
  const std::string lower = AsciiLowered(head);
  return lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
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
