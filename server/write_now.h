// Internal: a write that skips the scheduler when the socket takes the bytes.
//
// An asio async_write that completes at once still allocates an operation,
// posts its completion and suspends and resumes the coroutine. Responses of a
// few KiB on a socket with room in its send buffer (nearly always) can be
// written at once instead: WriteNow does one non-blocking send and reports how
// much went out; the caller awaits async_write for the rest, if any.
//
// The socket must be in non-blocking mode (socket.non_blocking(true)), or a
// full send buffer would block the worker thread.
#ifndef TOLLGATE_SERVER_WRITE_NOW_H_
#define TOLLGATE_SERVER_WRITE_NOW_H_

#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/system/error_code.hpp>

namespace tollgate::server {

// Sends what the socket takes now. Would-block is not an error: it writes 0.
template <class ConstBufferSequence>
size_t WriteNow(boost::asio::ip::tcp::socket& socket, const ConstBufferSequence& buffers,
                boost::system::error_code& ec) {
  size_t n = socket.write_some(buffers, ec);
  if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
    ec = {};
    return 0;
  }
  return ec ? 0 : n;
}

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_WRITE_NOW_H_
