// RequestContext: the values one request offers to rules (client IP, headers,
// query, verified JWT claims, cookies, host, path parameters, JSON body
// fields), computed lazily once per request: the body is parsed the first
// time a body: source is read, never for a request no such rule looks at.
//
// Thread safety: one per request, used by one thread.
#ifndef TOLLGATE_SRC_POLICY_REQUEST_CONTEXT_H_
#define TOLLGATE_SRC_POLICY_REQUEST_CONTEXT_H_

#include <optional>
#include <string>

#include "policy/client_ip.h"
#include "policy/jwt.h"
#include "policy/policy_impl.h"
#include "policy/request_fields.h"
#include "tollgate/request.h"

namespace tollgate {

// NormalizePath (the path rules see) is declared in tollgate/request.h.

class RequestContext {
 public:
  RequestContext(const RequestView& request, const ClientIpResolver& ip, const JwtVerifier& jwt,
                 int64_t wall_now_s)
      : request_(request), ip_(ip), jwt_(jwt), wall_now_s_(wall_now_s) {}

  // The raw value of `source` (trimmed), or nullopt when it is absent or empty.
  std::optional<std::string> Value(const Source& source);
  bool Matches(const Condition& condition);

  const std::string& ClientIp();
  const JwtClaims& Claims();
  // NormalizePath(request.path), computed once.
  const std::string& Path();
  // The request body parsed as JSON (RequestBodyOf, when the Content-Type
  // is JSON and ParseJsonBody takes it), parsed once; null when there is none.
  const nlohmann::json* Body();

 private:
  const RequestView& request_;
  const ClientIpResolver& ip_;
  const JwtVerifier& jwt_;
  const int64_t wall_now_s_;
  std::optional<std::string> client_ip_;
  std::optional<JwtClaims> claims_;
  std::optional<std::string> path_;
  bool body_parsed_ = false;
  std::optional<nlohmann::json> body_;
};

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_REQUEST_CONTEXT_H_
