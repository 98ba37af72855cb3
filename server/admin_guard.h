// Internal: what keeps a web page from driving the admin listener (CSRF) and
// from reading it through DNS rebinding, as one pure check the session runs
// for every admin request (server/endpoints.h, CheckAdminRequest), never per
// handler.
//
// The threat: a browser on the operator's machine reaches a loopback admin
// listener. Any page may send it a "simple" request without asking first (a
// form POST, fetch with mode "no-cors": GET or POST, Content-Type text/plain,
// application/x-www-form-urlencoded or multipart/form-data, no custom
// header); and a page whose name it rebinds to 127.0.0.1 (evil.example) sends
// same-origin requests, answers readable, with Host: evil.example. So, token
// or not (defence in depth; the only defence when no token is configured):
//
//   every admin request      Host is an IP literal, "localhost", the admin
//                            listener's own host name or a name in
//                            admin.allowed_hosts; else 421 (a rebinding page
//                            sends its own name). A request without Host
//                            (HTTP/1.0; no browser sends one) passes.
//   a state-changing one     Sec-Fetch-Site cross-site or same-site: 403.
//   (any method but GET,     Origin present and not the Host's own origin
//   HEAD)                    (http or https, same host and port; "null"
//                            included): 403.
//                            A JSON body (RouteResult::json_body) without
//                            Content-Type: application/json: 415.
//                            Without an admin token configured, a bodyless
//                            one needs Content-Type: application/json too
//                            (403): a header no page can send cross-origin
//                            without a CORS preflight, which tollgated never
//                            grants. With a token, the session has checked
//                            it before (a page cannot know it, and sending
//                            Authorization needs a preflight too).
//
// Header values are compared as RFC 9110 says: field names and media types
// case-insensitively; a field sent twice (Origin, Content-Type) is refused.
//
// Thread safety: pure functions of their arguments.
#ifndef TOLLGATE_SERVER_ADMIN_GUARD_H_
#define TOLLGATE_SERVER_ADMIN_GUARD_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/config.h"
#include "server/route.h"
#include "tollgate/request.h"

namespace tollgate::server {

// Why an admin request is refused: the status (403, 415, 421) and a detail
// for the problem+json answer.
struct AdminRefusal {
  int status = 403;
  std::string detail;
};

// The host names (lower case) the admin listener answers besides IP literals
// and "localhost": admin.allowed_hosts and the admin listener's own host when
// it is a name.
std::vector<std::string> AdminHostNames(const ServerConfig& config);

// The session's one check (CheckAdminRequest) runs these in order, the token
// check between them. nullopt: the request may proceed.
// Every admin request: its Host (421).
std::optional<AdminRefusal> ScreenAdminHost(const RequestView& request,
                                            std::span<const std::string> host_names);
// A state-changing admin request (any method but GET and HEAD; others pass):
// Sec-Fetch-Site and Origin (403), Content-Type (415, or 403 when bodyless
// without a token). `token_configured`: the listener has a token, which the
// caller has checked already.
std::optional<AdminRefusal> ScreenAdminChange(const RequestView& request, const RouteResult& route,
                                              bool token_configured);

// The parts, for tests and the fuzz target.
// A Host field value ("127.0.0.1:9090", "[::1]:9090", "localhost") the
// admin listener answers: its host is an IP literal, "localhost" or one of
// `host_names`; a malformed value (bad port, unclosed bracket) is not.
bool IsAdminHost(std::string_view host_field, std::span<const std::string> host_names);
// Whether `origin` (an Origin field value) is the origin of a request sent to
// `host_field`: scheme http or https, the same host (case-insensitive) and
// port (the scheme's default when absent on either side).
bool SameOrigin(std::string_view origin, std::string_view host_field);
// "application/json", any case, with or without parameters ("; charset=utf-8").
bool IsJsonMediaType(std::string_view content_type);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_ADMIN_GUARD_H_
