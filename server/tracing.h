// Internal: tollgated's OpenTelemetry spans, one per decision.
//
// A decision span ("tollgate.decision", kind SERVER) carries tollgate.rule,
// tollgate.verdict, tollgate.store and tollgate.cost; when the store is Redis
// (one server or a cluster) a child span ("EVALSHA", kind CLIENT) covers the
// store calls, with db.system=redis and db.operation=EVALSHA. A request's valid
// traceparent is continued (same trace id, its span as parent); a missing or
// malformed one starts a new trace. In gateway mode the upstream receives a
// traceparent naming the sampled decision span as its parent. Sampling: trace::Sampler (ratio for
// new traces, the parent's flag with parent_based). Only a peer in
// trusted_proxies decides by its traceparent's sampled flag (or, without
// parent_based, by its trace id): any other caller could set the flag (or pick
// a trace id under the threshold) on every request and have each of its
// decisions recorded, so its decisions are sampled as new traces are (the
// ratio, on a random draw of our own), while its trace is still continued (its
// trace id, its span as the parent). Spans go to an OtlpHttpExporter
// (src/trace/exporter.h): bounded queue, never waits.
//
// Ownership: the server owns the DecisionTracer; snapshots point to it.
// Thread safety: Begin, End and stats may be called from any thread.
#ifndef TOLLGATE_SERVER_TRACING_H_
#define TOLLGATE_SERVER_TRACING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/config.h"
#include "tollgate/clock.h"
#include "tollgate/metrics.h"
#include "tollgate/policy.h"
#include "trace/exporter.h"
#include "trace/span.h"
#include "trace/traceparent.h"

namespace tollgate::server {

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

class DecisionTracer {
 public:
  // A decision being traced (sampled) or not.
  struct Active {
    bool sampled = false;
    trace::SpanContext context;  // the decision span's ids
    trace::SpanId parent{};      // the request's span, zero for a new trace
    int64_t start_wall_ns = 0;
    int64_t start_ns = 0;  // Clock::Now() at Begin
  };

  // Null (and no error) when config.trace_endpoint is empty: tracing off.
  static Result<std::unique_ptr<DecisionTracer>> Create(const ServerConfig& config,
                                                        const Clock* clock);
  // For tests and benchmarks: spans to `exporter`, the store named `store_kind`
  // ("local", "redis", "redis-cluster").
  DecisionTracer(std::unique_ptr<trace::OtlpHttpExporter> exporter, const Clock* clock,
                 trace::Sampler sampler, std::string store_kind);

  // `parent`: the request's context (null: none); `parent_trusted`: follow its
  // sampled flag (a trusted proxy's), else sample as a new trace and continue it.
  Active Begin(const trace::SpanContext* parent, bool parent_trusted);
  // Queues the decision's spans (nothing when not sampled). Never waits.
  void End(const Active& active, const CheckOutcome& outcome);

  // tollgate_trace_spans_total{outcome=...}, tollgate_trace_replies_oversized_total and
  // tollgate_trace_queue_spans.
  void Render(PrometheusWriter& w) const;
  trace::OtlpHttpExporter::Stats stats() const { return exporter_->stats(); }

 private:
  std::unique_ptr<trace::OtlpHttpExporter> exporter_;
  const Clock* clock_;
  trace::Sampler sampler_;
  trace::IdSource ids_;
  const std::string store_kind_;
  const bool redis_;
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_TRACING_H_
