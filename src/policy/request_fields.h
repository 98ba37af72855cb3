// Request fields the key sources cookie:<name>, host, path_param:<name> and
// body:<JSON pointer> read (docs/configuration.md, "Sources"): bounded,
// allocation-light parsers over hostile bytes, each with a fuzz target
// (fuzz/targets/cookie.cc, host.cc, json_body.cc, path_template.cc).
//
// Every reader returns nullopt ("absent") for anything it cannot read within
// its bounds; none throws, none recurses deeper than kMaxBodyDepth, none
// scans more than its byte bound.
//
// Thread safety: pure functions; PathTemplate and JsonPointer are immutable
// values, safe to share.
#ifndef TOLLGATE_SRC_POLICY_REQUEST_FIELDS_H_
#define TOLLGATE_SRC_POLICY_REQUEST_FIELDS_H_

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tollgate {

// Cookie fields: bytes scanned over every Cookie field of a request, pairs
// looked at, and the longest value taken (RFC 6265 6.1 asks user agents for
// at least 4096 bytes a cookie). Past the byte or pair bound the scan stops.
inline constexpr size_t kMaxCookieBytes = 16 * 1024;
inline constexpr size_t kMaxCookiePairs = 256;
inline constexpr size_t kMaxCookieValueBytes = 4096;
// The authority: longer is absent (RFC 1035: 253 for a name, plus a port).
inline constexpr size_t kMaxHostBytes = 262;
// A JSON body read for body: sources: bytes and nesting.
inline constexpr size_t kMaxBodyKeyBytes = 1 << 20;
inline constexpr int kMaxBodyDepth = 32;
// A body: source's pointer and a path template.
inline constexpr size_t kMaxPointerBytes = 256;
inline constexpr size_t kMaxPointerTokens = 16;
inline constexpr size_t kMaxTemplateSegments = 32;

// The value of the first cookie named `name` (case-sensitive, RFC 6265 5.4)
// across `fields`, the request's Cookie fields in order: several fields are
// one list joined by "; " (RFC 7540 8.1.2.5 lets HTTP/2 split it; RFC 6265
// asks for one). Pairs are split on ';', trimmed of spaces and tabs; a pair
// without '=' is skipped; a value wrapped in double quotes loses them. Empty
// or longer than kMaxCookieValueBytes: absent.
std::optional<std::string_view> CookieValue(std::span<const std::string_view> fields,
                                            std::string_view name);
// Whether `name` is a valid cookie name (an RFC 9110 token, 1 to 128 bytes).
bool ValidCookieName(std::string_view name);

// The host of an authority ("Host" or ":authority"): lower-cased, the port
// (":digits", at most 65535) removed, one trailing dot removed. A reg-name
// holds letters, digits, '-', '_' and '.', labels of 1 to 63 bytes; an IPv4
// address stays as written when valid; an IPv6 literal keeps its brackets in
// canonical form ("[2001:db8::1]"). Anything else (userinfo, percent escapes,
// a zone id, empty) is absent.
std::optional<std::string> NormalizeHost(std::string_view authority);

// An RFC 6901 JSON pointer, its reference tokens unescaped ("~1" -> '/',
// "~0" -> '~'). "" is the whole document.
struct JsonPointer {
  std::vector<std::string> tokens;
};
// Parses `text`; false with *error saying why: not "" and not starting with
// '/', a '~' not followed by 0 or 1, longer than kMaxPointerBytes or more
// than kMaxPointerTokens tokens.
bool ParseJsonPointer(std::string_view text, JsonPointer* out, std::string* error);
// Whether a Content-Type names JSON: application/json or any */*+json media
// type (case-insensitive, parameters ignored).
bool IsJsonContentType(std::string_view content_type);
// A body parsed as JSON: nullopt when larger than kMaxBodyKeyBytes, nested
// deeper than kMaxBodyDepth, not JSON, or holding invalid UTF-8.
std::optional<nlohmann::json> ParseJsonBody(std::string_view body);
// The value `pointer` designates in `doc` as text: a string as is, a number
// as JSON writes it, true / false; absent for null, an object, an array, a
// missing member, an array index that is not a decimal without leading zeros
// (RFC 6901 4) or is out of range, and "-".
std::optional<std::string> JsonPointerValue(const nlohmann::json& doc, const JsonPointer& pointer);

// A path template: "/users/{id}/orders". Segments are literal or a named
// parameter "{name}" (letters, digits and '_', 1 to 64, each name once);
// a parameter takes one whole non-empty segment. Matched against the
// normalised path (NormalizePath), segment by segment, literally.
struct PathTemplate {
  std::string text;
  std::vector<std::string> segments;  // literal text, or the parameter name
  std::vector<bool> is_param;
  // The index of parameter `name` in segments, or -1.
  int Find(std::string_view name) const;
};
// Parses `text`; false with *error saying why.
bool ParsePathTemplate(std::string_view text, PathTemplate* out, std::string* error);
// Whether `path` fits `t`; when it does and `param` >= 0, *value (optional)
// is the path's segment at that index.
bool MatchPathTemplate(const PathTemplate& t, std::string_view path, int param = -1,
                       std::string_view* value = nullptr);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_REQUEST_FIELDS_H_
