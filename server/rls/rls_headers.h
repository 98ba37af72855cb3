// RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-11) for the
// Envoy rate limit service's response_headers_to_add.
//
// A minimal renderer of its own: the policy layer's renderer
// (tollgate/policy_headers.h) did not exist in a linkable form when this was
// written; the mapping is the same (protocols.md section 1): q = capacity,
// w = window seconds (ceil(burst / rate) for buckets), r = whole quota left,
// t = seconds until it is full again (on a rejection: until the cost fits).
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SERVER_RLS_RLS_HEADERS_H_
#define TOLLGATE_SERVER_RLS_RLS_HEADERS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tollgate/decision.h"
#include "tollgate/limit.h"

namespace tollgate::rls {

struct RlsQuotaReport {
  std::string name;  // policy name (rate_limit.name or the rule's stats key)
  int64_t quota = 0;
  int64_t window_seconds = 0;
  int64_t remaining = 0;
  int64_t reset_seconds = 0;
};

RlsQuotaReport MakeRlsQuotaReport(std::string_view name, const Limit& limit, const Decision& d);

// Whole seconds rounded up; 0 for <= 0; saturates.
int64_t CeilSecondsOf(Nanos d);

// "RateLimit-Policy" and "RateLimit" (one member per report), and
// "Retry-After" when retry_after_seconds >= 0. Empty for no reports.
std::vector<std::pair<std::string, std::string>> RenderRlsHeaders(
    std::span<const RlsQuotaReport> reports, int64_t retry_after_seconds);

// An RFC 9651 sf-string body: `"` and `\` escaped, bytes outside 0x20-0x7e -> '?'.
std::string SfStringOf(std::string_view s);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SERVER_RLS_RLS_HEADERS_H_
