// Internal: bounds on the chunked framing that Beast 1.74's parser leaves
// open: the chunk extensions (parsed and dropped, never limited) and the
// trailer section (parsed whole from the read buffer, never limited).
//
// Memory is bounded by the session's read buffer (ReadBufferLimit): a chunk
// line or trailer section that does not fit fails the read. These limits are
// the configured, smaller ones:
//   - every chunk extension of one body together: max_chunk_extension_bytes
//     (over -> http::error::bad_chunk_extension, a 400);
//   - the last-chunk line plus the trailer fields: max_trailer_bytes
//     (over -> http::error::header_limit, a 431).
//
// Use: `ChunkLimits limits(config, buffer); parser.on_chunk_header(limits);`
// where `buffer` is the dynamic buffer the parser is fed from (the trailer is
// measured there); both must outlive the parser's reads.
#ifndef TOLLGATE_SERVER_CHUNK_LIMITS_H_
#define TOLLGATE_SERVER_CHUNK_LIMITS_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <string_view>

#include "server/config.h"

namespace tollgate::server {

class ChunkLimits {
 public:
  ChunkLimits(const ServerConfig& config, const boost::beast::flat_buffer& buffer)
      : extension_bytes_left_(config.max_chunk_extension_bytes),
        max_trailer_bytes_(config.max_trailer_bytes),
        buffer_(buffer) {}

  void operator()(std::uint64_t size, boost::beast::string_view extensions,
                  boost::beast::error_code& ec) {
    if (extensions.size() > extension_bytes_left_) {
      ec = boost::beast::http::error::bad_chunk_extension;
      return;
    }
    extension_bytes_left_ -= extensions.size();
    if (size != 0) return;
    // The last chunk: the parser found the end of the trailer section in the
    // buffer it was given, which starts at this chunk's line (after the CRLF
    // ending the previous chunk's data, if any).
    const auto* data = static_cast<const char*>(buffer_.data().data());
    std::string_view rest(data, buffer_.size());
    size_t end = rest.find("\r\n\r\n", rest.starts_with("\r\n") ? 2 : 0);
    if (end != std::string_view::npos && end + 4 > max_trailer_bytes_) {
      ec = boost::beast::http::error::header_limit;
    }
  }

 private:
  size_t extension_bytes_left_;
  size_t max_trailer_bytes_;
  const boost::beast::flat_buffer& buffer_;
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_CHUNK_LIMITS_H_
