// Internal: the bounded reading of an OTLP/HTTP collector's reply to one export.
//
// The exporter feeds CollectorReply the bytes it reads from the socket, as
// they come; the reader frames one HTTP/1.x response (status line, headers,
// then a body by Content-Length, chunked, or up to the close) and stops at
// the first byte past a bound: the head (status line and headers, then the
// trailers of a chunked body) at most `head_bytes`, a chunk-size line with its
// extensions at most `chunk_line_bytes`, the body at most `body_bytes`. A
// reply past a bound is kFailed with overflow(); the reader never holds more
// than those bounds plus the bytes of one Feed. A collector's answer is small
// (OTLP's ExportTraceServiceResponse); nothing it says beyond the status is
// used, so the body is counted, never kept.
//
// Errors are values: state() kFailed and error() says why ("head longer than
// 16384 bytes", "bad chunk size"). Time is the caller's: the exporter reads
// within one deadline per export.
//
// Thread safety: one reader per reply, used by one thread.
#ifndef TOLLGATE_TRACE_OTLP_REPLY_H_
#define TOLLGATE_TRACE_OTLP_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate::trace {

struct ReplyLimits {
  size_t head_bytes = 16 * 1024;
  size_t chunk_line_bytes = 1024;
  size_t body_bytes = 64 * 1024;
};

class CollectorReply {
 public:
  enum class State { kMore, kDone, kFailed };

  explicit CollectorReply(ReplyLimits limits = {}) : limits_(limits) {}

  // The next bytes of the reply; bytes after a complete reply are ignored.
  State Feed(std::string_view bytes);
  // The collector closed the connection: ends a body that runs to the close,
  // fails a reply cut short.
  State Finish();

  State state() const { return state_; }
  bool overflow() const { return overflow_; }  // kFailed because a bound was passed
  const std::string& error() const { return error_; }
  int status() const { return status_; }  // 0 until the status line is read
  bool success() const { return state_ == State::kDone && status_ >= 200 && status_ < 300; }
  uint64_t bytes_fed() const { return bytes_fed_; }
  size_t body_size() const { return body_size_; }

 private:
  enum class Phase { kHead, kLengthBody, kCloseBody, kChunkLine, kChunkData, kChunkEnd, kTrailers };

  State Parse();
  bool ParseHead(std::string_view head);
  bool ParseChunkLine(std::string_view line);
  bool TakeBody(size_t n);
  State Fail(std::string why, bool overflow = false);
  State Done();

  const ReplyLimits limits_;
  State state_ = State::kMore;
  Phase phase_ = Phase::kHead;
  std::string pending_;  // bytes not parsed yet; bounded by the phase's limit + one Feed
  std::string error_;
  int status_ = 0;
  bool overflow_ = false;
  uint64_t bytes_fed_ = 0;
  uint64_t left_ = 0;        // body bytes still due (Content-Length, or the current chunk)
  size_t body_size_ = 0;     // body bytes read so far
  size_t trailer_size_ = 0;  // trailer bytes so far
};

}  // namespace tollgate::trace

#endif  // TOLLGATE_TRACE_OTLP_REPLY_H_
