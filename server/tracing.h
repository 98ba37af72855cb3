// Internal: a request's trace context in tollgated, and the tracer its config asks for.
//
// The decision spans themselves are tollgate::trace::DecisionTracer's
// (tollgate/trace.h). What stays here is what a request brings: its valid
// traceparent, continued (same trace id, its span as parent), and whether its
// sampled flag is to be followed. Only a peer in trusted_proxies decides by its
// traceparent's sampled flag (or, without parent_based, by its trace id): any
// other caller could set the flag (or pick a trace id under the threshold) on
// every request and have each of its decisions recorded, so its decisions are
// sampled as new traces are, while its trace is still continued. In gateway
// mode the upstream receives a traceparent naming the sampled decision span as
// its parent.
//
// Ownership: the server owns the DecisionTracer; snapshots point to it.
// Thread safety: a RequestTrace belongs to one request.
#ifndef TOLLGATE_SERVER_TRACING_H_
#define TOLLGATE_SERVER_TRACING_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/config.h"
#include "tollgate/clock.h"
#include "tollgate/status.h"
#include "tollgate/trace.h"

namespace tollgate::server {

using trace::DecisionTracer;

// The trace context a request names (a valid traceparent), copied out of the
// parser's message so that it outlives it, and whether its sampled flag is to
// be followed (`from_trusted_peer`: the TCP peer is in trusted_proxies).
class RequestTrace {
 public:
  void From(std::optional<std::string_view> traceparent, bool from_trusted_peer);
  const trace::SpanContext* parent() const { return parent_ ? &*parent_ : nullptr; }
  bool parent_trusted() const { return parent_trusted_; }
  std::string_view id() const { return parent_ ? std::string_view(hex_, 32) : std::string_view(); }

  // After a sampled decision: its span, which the gateway names to the upstream
  // as the parent (the traceparent it forwards). Unsampled decisions set
  // nothing and the request's own traceparent passes unchanged.
  void SetDecisionSpan(const trace::SpanContext& span) {
    upstream_traceparent_ = trace::FormatTraceparent(span);
  }
  // The traceparent to send upstream instead of the request's; "" for none.
  std::string_view upstream_traceparent() const { return upstream_traceparent_; }

 private:
  std::optional<trace::SpanContext> parent_;
  bool parent_trusted_ = false;
  char hex_[32] = {};
  std::string upstream_traceparent_;
};

// The tracer `config`'s tracing section asks for; null (and no error) when
// tracing.endpoint is empty: tracing off.
Result<std::unique_ptr<DecisionTracer>> MakeDecisionTracer(const ServerConfig& config,
                                                           const Clock* clock);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_TRACING_H_
