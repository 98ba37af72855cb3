// HTTP framing checks shared by the server-side fuzz targets: whatever
// tollgated writes must be exactly one message to a strict HTTP/1.1 parser
// (Beast's), with the framing the writer meant.
#ifndef TOLLGATE_FUZZ_FUZZ_HTTP_H_
#define TOLLGATE_FUZZ_FUZZ_HTTP_H_

#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <boost/beast/http.hpp>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "server/http_util.h"

namespace tollgate::fuzz {

namespace http = boost::beast::http;

// `wire` must parse as one complete response consuming every byte, with
// `status`, and (unless `head` or a status without a body) the body `body`,
// framed by a Content-Length (never by closing the connection).
inline void CheckOneResponse(std::string_view wire, int status, std::string_view body, bool head) {
  http::response_parser<http::string_body> p;
  p.eager(true);
  p.skip(head);
  p.header_limit(1 << 20);
  p.body_limit(64 << 20);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < wire.size() && !p.is_done()) {
    const size_t n = p.put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
    if (ec == http::error::need_more && n == 0) break;
    if (ec && ec != http::error::need_more) break;
    used += n;
  }
  if (!p.is_done() && !ec) {
    p.put_eof(ec);  // a close-delimited body ends here
  }
  FUZZ_CHECK(!ec || ec == http::error::need_more,
             "response does not parse: " + ec.message() + " in " + Quote(wire, 2000));
  FUZZ_CHECK(p.is_done(), "response incomplete: " + Quote(wire, 2000));
  FUZZ_CHECK(used == wire.size(),
             "bytes after the response (a second message): " + Quote(wire.substr(used), 500));
  FUZZ_CHECK(p.get().result_int() == static_cast<unsigned>(status),
             "status changed: " + std::to_string(p.get().result_int()));
  if (!head && status != 204 && status != 304 && status >= 200) {
    FUZZ_CHECK(p.get().body() == body, "body changed: " + Quote(p.get().body()));
    // Framed by its own length, so the connection can carry the next message.
    FUZZ_CHECK(!p.chunked() && p.content_length() && *p.content_length() == body.size(),
               "response not framed by Content-Length: " + Quote(wire, 2000));
  }
}

// Serializes `r` as tollgated does and checks the bytes.
inline void CheckSerialized(const server::Response& r, bool keep_alive, bool head) {
  std::string out;
  server::SerializeResponse(r, keep_alive, "Sun, 06 Nov 1994 08:49:37 GMT", head, &out);
  CheckOneResponse(out, r.status, r.body, head);
}

}  // namespace tollgate::fuzz

#endif  // TOLLGATE_FUZZ_FUZZ_HTTP_H_
