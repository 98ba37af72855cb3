// Internal: a streamed body relayed piece by piece through one buffer, as the
// gateway streams a request up and a response back (server/proxy.cc): a
// buffer_body message between Beast's parser, which reads into the buffer, and
// Beast's serializer, which writes what was read on.
//
// OpenRelayPiece offers the parser the whole buffer before a read;
// CloseRelayPiece hands the serializer the bytes the read gave (`more` while
// the parser is not done), with null data when it gave none: the serializer
// writes an empty piece as a zero-size chunk, which is a chunked body's last
// chunk, so the rest of the body (or a stray last chunk) would reach the peer
// as the start of another message. A read gives no body bytes when the body is
// empty or its last chunk comes after a full buffer (found by
// fuzz_chunked_relay on a request whose only chunk is the last).
// EndRelayPieces: the parser is done, the serializer ends the body.
//
// Pure functions on the caller's message; the buffer must outlive the write.
#ifndef TOLLGATE_SERVER_RELAY_BODY_H_
#define TOLLGATE_SERVER_RELAY_BODY_H_

#include <boost/beast/http/buffer_body.hpp>
#include <cstddef>

namespace tollgate::server {

inline void OpenRelayPiece(boost::beast::http::buffer_body::value_type& body, char* buf,
                           size_t capacity) {
  body.data = buf;
  body.size = capacity;
}

// After the read: the parser left `size` as the room it did not fill.
inline void CloseRelayPiece(boost::beast::http::buffer_body::value_type& body, char* buf,
                            size_t capacity, bool more) {
  body.size = capacity - body.size;
  body.data = body.size > 0 ? buf : nullptr;
  body.more = more;
}

inline void EndRelayPieces(boost::beast::http::buffer_body::value_type& body) {
  body.data = nullptr;
  body.size = 0;
  body.more = false;
}

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_RELAY_BODY_H_
