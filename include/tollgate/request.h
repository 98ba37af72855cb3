// RequestView: a framework-neutral, borrowed view of one HTTP request.
//
// Front ends (tollgated, the middlewares, the Envoy adapter) fill one in and
// hand it to the policy layer; nothing in it is owned, so it is valid only for
// the duration of the call it is passed to. The accessors are implemented in
// tollgate_base (src/base/request.cc), the leaf every front end links, on the
// helpers of tollgate/http_text.h.
#ifndef TOLLGATE_REQUEST_H_
#define TOLLGATE_REQUEST_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {

using HeaderPair = std::pair<std::string_view, std::string_view>;

struct RequestView {
  std::string_view method;              // "GET"
  std::string_view path;                // "/api/items", without the query
  std::string_view query;               // raw query string, without '?'
  std::string_view peer_address;        // the TCP peer's IP ("10.0.0.7", "::1"), no port
  std::span<const HeaderPair> headers;  // as received; names compare case-insensitively

  // First value of header `name` (case-insensitive), if present.
  std::optional<std::string_view> Header(std::string_view name) const;
  // Every value of header `name`, in order (repeated fields, e.g. X-Forwarded-For).
  std::vector<std::string_view> Headers(std::string_view name) const;
  // First value of query parameter `name`, percent-decoded ('+' is a space), if
  // present. A parameter without '=' has the empty value.
  std::optional<std::string> QueryParam(std::string_view name) const;
};

// A response header the front end must add.
struct HeaderField {
  std::string name;
  std::string value;
  friend bool operator==(const HeaderField&, const HeaderField&) = default;
};

// The request path as rules see it (match and limit keys) and as tollgated's
// gateway forwards it: the query (and any fragment) cut off; percent-encoded
// unreserved characters (RFC 3986 2.3: ALPHA DIGIT - . _ ~) decoded, other
// escapes kept with upper-case hex, a '%' that starts no escape encoded as
// "%25" (so normalising twice changes nothing); repeated slashes collapsed;
// "." and ".." segments resolved, never above the root. Case is kept. A path
// not starting with '/' (e.g. "*") is only cut and decoded. Used so "//api/",
// "/./api/", "/a/../api/" and "/%61pi/" all meet a prefix "/api/" and share
// the bucket of "/api/". docs/configuration.md, "Path normalisation".
std::string NormalizePath(std::string_view path);

}  // namespace tollgate

#endif  // TOLLGATE_REQUEST_H_
