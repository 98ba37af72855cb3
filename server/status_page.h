// Internal: the status page on the admin listener (docs/operations.md,
// "Status page"), and the JSON document it reads.
//
//   GET /ui, /ui/app.js, /ui/app.css,  the page: four files embedded in the
//       /ui/icon.svg
//                                      binary (server/ui/, generated into
//                                      ui_assets.cc at build time), no token
//                                      (they hold no data; the Host check
//                                      applies as to every admin request)
//   GET /v1/status[?raw=1]             one JSON document (an API of its own,
//                                      "status_api": 1): the caller's scope,
//                                      readiness, policy, store (what it
//                                      writes of itself on /metrics: keys,
//                                      evictions, breaker; the decisions'
//                                      latency percentiles), the outcome
//                                      names, every rule with its limit, mode
//                                      and cumulative decision counters, the
//                                      rollback view, the /v1/top sketch
//                                      (admin token, read scope suffices)
//
// The page asks for an admin token once, keeps it in the tab's
// sessionStorage and sends it as Authorization: Bearer on every fetch; its
// actions (trip and clear a rollback guard, look up and reset a key) are the
// existing admin endpoints, behind the same checks (token scope, Origin,
// Sec-Fetch-Site, Content-Type: server/admin_guard.h). The page's own
// responses carry a Content-Security-Policy that allows only its own script,
// style and same-origin fetches (no inline script, no other origin, no
// framing), and the script renders every value from the server as text
// (textContent, never innerHTML): identities are client data.
//
// Identities in /v1/status are shown as /v1/top shows them: hashed unless
// identities.raw or ?raw=1 from a caller MayShowRaw allows.
//
// Thread safety: pure functions of their arguments and the runtime's
// thread-safe objects.
#ifndef TOLLGATE_SERVER_STATUS_PAGE_H_
#define TOLLGATE_SERVER_STATUS_PAGE_H_

#include <string_view>

#include "server/http_util.h"
#include "server/runtime.h"
#include "server/secrets.h"

namespace tollgate::server {

// What the page's responses allow: its own files, fetches to its own origin.
inline constexpr std::string_view kUiContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The embedded file served at `path` ("/ui", "/ui/app.js", "/ui/app.css",
// "/ui/icon.svg")
// with its security headers (the policy above, nosniff, no referrer, no
// caching), or a 404 problem for any other path.
Response HandleUiAsset(std::string_view path);

// GET /v1/status. `caller`: the admin token the request presented (null:
// none, or no token configured); `may_show_raw`: MayShowRaw of the request.
// ?raw=1 without `may_show_raw` is a 403 (RawNeedsToken); any other
// parameter a 400.
Response HandleStatus(const Runtime& s, std::string_view query, const AdminToken* caller,
                      bool may_show_raw);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_STATUS_PAGE_H_
