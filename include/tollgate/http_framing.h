// What tollgate's HTTP front ends accept as an HTTP/1.1 message header, beyond what
// Beast's parser checks, so that no message means one thing to tollgated and
// another to the peer behind or in front of it (request smuggling, issue 14).
//
// Beast 1.74 accepts a Transfer-Encoding whose last coding is not chunked
// (then reads no body), `Content-Length: 5, 5`, a Content-Length repeated with
// the same value, Transfer-Encoding beside a Content-Length that comes after
// it, and it unfolds obs-fold lines silently. A lenient peer reads some of
// those differently. CheckFraming looks at the raw header bytes as they
// arrived and refuses, like nginx, any header whose framing is not one of:
//   - no Content-Length and no Transfer-Encoding;
//   - exactly one Content-Length field whose value is 1*19DIGIT;
//   - exactly one Transfer-Encoding field whose value is exactly `chunked`
//     (case-insensitive; other codings such as `gzip, chunked` are refused,
//     because tollgated does not decode them and a peer might not either), in
//     an HTTP/1.1 message, without Content-Length;
// and any header with a bare CR or LF, an obs-fold line, or (requests) no Host
// in HTTP/1.1 or more than one Host field.
//
// ToOriginForm turns an accepted request-target into the origin-form that is
// both decided on and forwarded: an absolute-form target ("http://h/p") gives
// its path and query when its authority equals Host (else refused); the
// asterisk form only for OPTIONS; the authority form and anything else are
// refused. The path is then refused when it holds a backslash, a ';' (path
// parameters), an encoded '/' or '\' (%2F, %5C), an encoded NUL or a '#',
// because upstreams disagree on what those mean; bytes outside ASCII in the
// path are percent-encoded (upper-case hex: "/caf\xC3\xA9" is "/caf%C3%A9",
// the one spelling both forms share); then it is normalised by NormalizePath
// (tollgate/request.h) and the query is kept as sent. A target holding a
// space, a control byte or DEL is refused (Beast refuses them in a request
// line already; a header carrying a target, /v1/auth's X-Original-URI, may
// hold them).
//
// OriginalUriToOriginForm is ToOriginForm for a target that arrives in a
// header (nginx's `$request_uri` in X-Original-URI): the same refusals and the
// same output, with no Host to compare an absolute-form with, so an
// absolute-form is refused (nginx sends origin-form).
//
// All functions are pure and thread-safe; none allocates except ToOriginForm's
// output. Implemented in tollgate_http (src/http/), over Boost.Beast's header-only
// message types (built with BOOST_BEAST_USE_STD_STRING_VIEW, as its users must be). Errors are
// values of HttpFramingError (an error_code enum whose messages say what was refused).
#ifndef TOLLGATE_HTTP_FRAMING_H_
#define TOLLGATE_HTTP_FRAMING_H_

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <string>
#include <string_view>
#include <system_error>

namespace tollgate {

enum class HttpFramingError {
  kOk = 0,
  kIncompleteHeader,  // the bytes do not end with the empty line
  kBareCrOrLf,
  kObsFold,
  kBadFieldLine,  // no ':', empty name, or whitespace before the ':'
  kBadContentLength,
  kDuplicateContentLength,
  kDuplicateTransferEncoding,
  kUnsupportedTransferEncoding,
  kTransferEncodingWithContentLength,
  kTransferEncodingInHttp10,
  kMissingHost,
  kDuplicateHost,
  kAsteriskForm,
  kAuthorityForm,
  kAuthorityNotHost,
  kFragment,
  kBackslash,
  kPathParameter,
  kEncodedSlash,
  kEncodedNul,
  kBadTargetByte,  // a space, control byte or DEL in the target
};

const boost::system::error_category& HttpFramingCategory();
boost::system::error_code make_error_code(HttpFramingError e);

enum class MessageKind { kRequest, kResponse };

// `head`: the message's start line and fields, through the empty line that ends
// them ("...\r\n\r\n"), exactly as received.
HttpFramingError CheckFraming(std::string_view head, MessageKind kind);

// `target` as received, `host` the Host field's value ("" when absent).
// Writes the origin-form target (or "*") to `out` on kOk.
HttpFramingError ToOriginForm(std::string_view method, std::string_view target,
                              std::string_view host, std::string* out);

// Whether `target` is already what ToOriginForm would make of it, so that the
// caller can use it as it is: origin-form, printable ASCII, no '#', and a path
// with no escape, '\', ';', empty segment or segment starting with '.' (the
// query may hold anything printable). Most targets are; one pass, no
// allocation. ToOriginForm(m, t, h, &out) with IsPlainOriginForm(t) gives
// out == t.
bool IsPlainOriginForm(std::string_view target);

// `uri` as received in X-Original-URI, `method` from X-Original-Method.
HttpFramingError OriginalUriToOriginForm(std::string_view method, std::string_view uri,
                                         std::string* out);

// The session's hook: CheckFraming(raw_head, kRequest), then the target of
// `req` replaced by its ToOriginForm. A failed request gets 400 and is closed.
[[nodiscard]] boost::system::error_code AcceptRequestHead(
    std::string_view raw_head, boost::beast::http::request_header<>& req);

}  // namespace tollgate

namespace boost::system {
template <>
struct is_error_code_enum<tollgate::HttpFramingError> : std::true_type {};
}  // namespace boost::system

#endif  // TOLLGATE_HTTP_FRAMING_H_
