// ReplyReader: hiredis' RESP reader with the bounds a peer cannot talk past.
//
// hiredis 0.14 (Debian 12) trusts what a header announces: "*<n>" allocates a
// table of n element pointers at once (2^31 elements: 16 GiB), and a bulk
// string or a status line is buffered until it is complete, however long it
// says it is. ReplyReader installs object functions that count what a reply
// builds, and checks what is buffered, so that one reply stays within:
//   - kMaxBulkBytes for one bulk string, status or error line (checked while
//     it is still arriving: the unparsed tail of the buffer),
//   - kMaxReplyObjects objects, counting every announced array slot when its
//     array header arrives (before hiredis allocates the table),
//   - kMaxReplyBytes string bytes in total,
//   - 8 levels of nested arrays (hiredis' own fixed limit).
// A reply past a bound is a protocol error: the reader stops (error() says
// which bound), and the connection must be closed.
//
// Thread safety: none; one reader per connection.
#ifndef TOLLGATE_SRC_REDIS_REPLY_READER_H_
#define TOLLGATE_SRC_REDIS_REPLY_READER_H_

#include <hiredis/hiredis.h>

#include <cstddef>
#include <memory>
#include <string>

namespace tollgate::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class ReplyReader {
 public:
  // The largest reply tollgate asks for is a script reply for
  // kMaxItemsPerCall (2^20) items: 3 MessagePack integers of at most 9 bytes
  // each per item, about 28.3 MiB (node_client.cc checks the fit).
  static constexpr size_t kMaxBulkBytes = size_t{32} << 20;
  // A CLUSTER SHARDS reply of a 1000-node cluster is about 40,000 objects.
  static constexpr size_t kMaxReplyObjects = size_t{1} << 20;
  static constexpr size_t kMaxReplyBytes = size_t{64} << 20;

  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // Appends received bytes. False once the stream is broken (see error()).
  [[nodiscard]] bool Feed(const char* data, size_t n);
  // The next complete reply in *reply, or null when more bytes are needed.
  // False when the stream is not RESP or a reply breaks a bound; the reader
  // then stays failed.
  [[nodiscard]] bool Next(ReplyPtr* reply);
  // Why Feed or Next failed.
  const std::string& error() const { return error_; }

  // Object functions' bookkeeping (public for the C callbacks only).
  bool Charge(size_t objects, size_t bytes);

 private:
  redisReader* reader_;
  std::string error_;
  size_t objects_ = 0;  // of the reply being read
  size_t bytes_ = 0;
};

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_REPLY_READER_H_
