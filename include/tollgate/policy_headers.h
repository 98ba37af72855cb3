// Rendering of rate-limit response headers, Retry-After with jitter, and the
// RFC 9457 problem+json bodies. The Enforcer uses these to fill CheckOutcome;
// they are public so front ends (e.g. the Envoy adapter's
// response_headers_to_add) can render the same fields from their own numbers.
//
// Mapping (docs/configuration.md, "Headers"): a policy's quota q = burst
// (capacity); w = window seconds (window algorithms) or ceil(burst / rate);
// r = whole tokens available now; t = seconds until the bucket is full again
// (on a rejection: until the cost fits).
//
// Thread safety: pure functions. Errors: none; names are rendered as
// structured-field Strings with every non-printable byte replaced.
#ifndef TOLLGATE_POLICY_HEADERS_H_
#define TOLLGATE_POLICY_HEADERS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/decision.h"
#include "tollgate/limit.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"

namespace tollgate {

// One policy's state as reported in headers.
struct QuotaReport {
  std::string name;            // policy (rule) name
  int64_t quota = 0;           // q: capacity
  int64_t window_seconds = 0;  // w: > 0
  int64_t remaining = 0;       // r: >= 0
  int64_t reset_seconds = 0;   // t: >= 0
};

// Builds the report for one rule's decision (mapping above).
QuotaReport MakeQuotaReport(std::string_view name, const Limit& limit, const Decision& d);

// Whole seconds, rounded up; 0 for <= 0. Saturates for huge values.
int64_t CeilSeconds(Nanos d);

// The rate-limit headers of `style` for `reports` (all applied policies on an
// allow; only the denying one on a reject). For the single-value styles
// (draft03, x-ratelimit) the report with the least remaining quota is used.
// `wall_now_ns` is only read by kXRateLimitEpoch.
std::vector<HeaderField> RenderRateLimitHeaders(HeaderStyle style,
                                                std::span<const QuotaReport> reports,
                                                int64_t wall_now_ns);
// Every style of `styles` in order, from the same reports (so the fields agree
// with each other). Each header name is emitted at most once: a style whose
// fields another style already produced (x-ratelimit after x-ratelimit-epoch)
// is skipped; ParseHeaderStyles refuses such lists up front.
std::vector<HeaderField> RenderRateLimitHeaders(std::span<const HeaderStyle> styles,
                                                std::span<const QuotaReport> reports,
                                                int64_t wall_now_ns);

// Retry-After in delta seconds: ceil((wait + floor(wait * jitter * u)) / 1s)
// with u in [0,1) derived from (seed, identity) only, so the same client
// always gets the same offset and it never points earlier than `wait`.
// At least 1 for a positive wait. kNever is not accepted (returns -1).
int64_t RetryAfterSeconds(Nanos wait, std::string_view identity, double jitter, uint64_t seed);
// The u above, exposed for tests: a stable value in [0, 1).
double JitterUnit(std::string_view identity, uint64_t seed);

// Sent on an admitted request that a soft rule ("soft": true) found over its
// limit: the names of those rules, comma-separated ("plan-soft"). Beside it the
// rule's RateLimit fields say r=0. Not "Warning" (obsoleted by RFC 9111).
inline constexpr std::string_view kSoftExceededHeader = "X-RateLimit-Soft-Exceeded";

// RFC 9457 bodies (application/problem+json).
enum class ProblemKind {
  kQuotaExceeded,             // 429
  kTemporaryReducedCapacity,  // 503: the store could not decide
  kForbidden,                 // 403: a deny rule matched (type about:blank, RFC 9457 4.2.1)
};
std::string ProblemJson(ProblemKind kind, std::string_view type_base,
                        std::span<const std::string> violated_policies, std::string_view detail,
                        int64_t retry_after_seconds);

// Escapes `s` as the content of a structured-field String (RFC 9651 sf-string):
// `"` and `\` escaped, bytes outside 0x20-0x7e replaced by '?'.
std::string SfString(std::string_view s);

}  // namespace tollgate

#endif  // TOLLGATE_POLICY_HEADERS_H_
