// Internal: small HTTP helpers for tollgated's own endpoints. The request-side
// text helpers (SplitTarget, ForEachQueryParam, EqualsIgnoreCase) are the
// public leaf tollgate/http_text.h, shared with the middlewares and client.
//
// Responses of tollgated's endpoints are rendered by hand into one reusable
// string (status line, Date, headers, Content-Length, body): no per-header
// allocation on the request path. Gateway responses use Beast's serializer.
#ifndef TOLLGATE_SERVER_HTTP_UTIL_H_
#define TOLLGATE_SERVER_HTTP_UTIL_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/http_text.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"

namespace tollgate::server {

struct Response {
  int status = 200;
  std::string_view content_type;  // "" = none (must be a literal or outlive the response)
  std::string body;
  std::vector<HeaderField> headers;
  bool close = false;  // force Connection: close
  // Wait this long before sending (a leaky-bucket shaper's delay on /v1/auth).
  std::chrono::nanoseconds delay{0};
};

// The reason phrase RFC 9110 recommends for `status` ("Content Too Large").
std::string_view StatusPhrase(int status);

// Appends the whole response to `out` (which is not cleared).
void SerializeResponse(const Response& r, bool keep_alive, const char* date, bool head_only,
                       std::string* out);

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kProblemJson = "application/problem+json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

// An RFC 9457 problem response of type about:blank: the title is the status
// phrase (RFC 9457 4.2.1), the detail "summary: detail" (either may be empty).
// `errors` become {"errors":[{"path","message"}]}.
Response Problem(int status, std::string_view summary, std::string_view detail,
                 const std::vector<ConfigError>& errors = {});

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_HTTP_UTIL_H_
