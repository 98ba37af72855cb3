// RedactUrl: the one form in which a URL that may carry a secret (a store URL
// redis://, rediss://, redis[s]-cluster://, an etcd:// source, the OTLP
// collector's http:// endpoint, the admin URL) appears in an error, a log
// line or an admin view.
//
// What it hides, on any input (it parses nothing; hostile bytes are fine):
//  - user info: everything between "://" and the LAST '@' of the URL (a
//    password may hold a raw '/', '?' or '@'). "user:secret@" becomes
//    "user:***@"; "secret@" (Redis' password shorthand) becomes "***@". A URL
//    with '@' only in a query value loses a bit more than it must: the safe
//    side.
//  - the values of sensitive parameters (after the last '@', every piece
//    between '?' and '&' that reads "name=value"): a name that holds "pass",
//    "pwd", "token", "secret" or "auth", or is "key" or "apikey"/"api_key"
//    (ASCII case-insensitive), keeps its name: "token=***".
// Then bytes outside printable ASCII become '?' and the result is cut to
// `max_bytes` (with "..." when cut), so a hostile URL cannot flood a log.
// Without "://" before the first '@', the whole text up to the last '@' is
// taken as user info.
//
// Thread safety: pure function.
#ifndef TOLLGATE_SRC_BASE_REDACT_H_
#define TOLLGATE_SRC_BASE_REDACT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tollgate::base {

inline constexpr std::string_view kRedacted = "***";

std::string RedactUrl(std::string_view url, size_t max_bytes = 200);

// A piece of `url` (a view into it: a port, an option, one of several
// endpoints) for an error message: the piece itself, at most 64 printable
// bytes, when it lies after the URL's last '@' (so it holds no user info),
// with sensitive parameters' values hidden as RedactUrl hides them; else the
// whole URL as RedactUrl shows it.
std::string RedactUrlPiece(std::string_view url, std::string_view piece);

// True for a query parameter name whose value RedactUrl hides.
bool IsSensitiveQueryName(std::string_view name);

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_REDACT_H_
