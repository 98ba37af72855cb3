// A request's body for body:<JSON pointer> sources (docs/configuration.md,
// "Sources"): how a front end hands the policy the JSON body it has read.
//
// The body travels in RequestView::headers as one more pair, made by
// RequestBodyField, whose name is recognised by its address, never by its
// text: no field a client sends can stand in for it (its text,
// ":tollgate-body", is not even a valid HTTP/1 field name, nor an HTTP/2
// pseudo-field). RequestBodyOf finds it. A front end adds it only when it
// has the whole body, the request's Content-Type is JSON (IsJsonContentType)
// and the body is at most kBodyKeyBytes; PolicyReadsBody tells it whether the
// policy reads bodies at all. The policy parses the body lazily, at most once
// per decision, and only for a rule that reads it.
//
// (A RequestView member would say the same more plainly; tollgate/request.h
// is included by every front end and the whole policy layer, so the body
// rides in the header span instead, without changing RequestView's layout.)
//
// Thread safety: pure functions. Ownership: the pair points into the caller's
// body, which must outlive the RequestView it is put in. Implemented in
// tollgate_policy (src/policy/request_fields.cc, request_context.cc).
#ifndef TOLLGATE_REQUEST_BODY_H_
#define TOLLGATE_REQUEST_BODY_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "tollgate/request.h"

namespace tollgate {

class Policy;  // tollgate/policy.h

// The largest body a front end hands over (tollgated's gateway reads one
// ahead of the decision, the middlewares pass the one they read): a larger
// body leaves body: sources absent.
inline constexpr size_t kBodyKeyBytes = 64 * 1024;

// Whether a Content-Type names JSON: application/json or any */*+json media
// type (case-insensitive, parameters ignored). The policy layer's own
// declaration is in src/policy/request_fields.h (the same function).
bool IsJsonContentType(std::string_view content_type);

// The pair that carries `body` in RequestView::headers (append it last).
HeaderPair RequestBodyField(std::string_view body);

// The body a front end put in `request` with RequestBodyField, or nullopt.
std::optional<std::string_view> RequestBodyOf(const RequestView& request);

// Whether a rule of `policy` reads the request body (a body:<JSON pointer>
// source in its limit_keys or match): only then does a front end need to
// read a body ahead of the decision. Constant time.
bool PolicyReadsBody(const Policy& policy);

}  // namespace tollgate

#endif  // TOLLGATE_REQUEST_BODY_H_
