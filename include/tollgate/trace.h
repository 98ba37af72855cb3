// tollgate/trace.h: OpenTelemetry spans of decisions, as a front end uses them.
//
// A front end brackets each decision with DecisionTracer::Begin and End. A
// decision span ("tollgate.decision", kind SERVER) carries tollgate.rule,
// tollgate.verdict, tollgate.store, tollgate.cost, tollgate.enforced and
// http.response.status_code; when the store is Redis (one server or a cluster)
// a child span ("EVALSHA", kind CLIENT) covers the store calls, with
// db.system=redis and db.operation=EVALSHA. A request's valid traceparent is
// continued (same trace id, its span as parent); a missing or malformed one
// starts a new trace. Sampling: the ratio for new traces, the parent's flag with
// parent_based, and only for a parent the front end trusts (Begin's
// `parent_trusted`): any other caller's flag and trace id are its own choice, so
// its decisions are sampled as new traces are (the ratio, on a random draw of
// our own) while its trace is still continued. Spans go to an OTLP/HTTP JSON
// exporter (src/trace/exporter.h): a bounded queue, never waits, no retries.
//
// ParseTraceparent is the one parser of the W3C `traceparent` header (spans and
// the trace id in logs). It is strict, as W3C Trace Context level 1 asks of a
// receiver: lowercase hex only, no all-zero ids, version "ff" invalid, version
// "00" exactly 55 bytes, a later version at least 55 bytes with '-' after the
// flags; anything else is "no parent". It never reads past the input and
// refuses headers over 512 bytes.
//
// Errors: DecisionTracer::Create and CheckCollectorUrl return kInvalidArgument
// naming the part of the endpoint that is wrong (only plain http://).
// Ownership: a DecisionTracer owns its exporter and thread; the clock is
// borrowed and must outlive it.
// Thread safety: SpanContext is a plain value and the functions are pure;
// DecisionTracer's Begin, End, Render and stats may be called from any thread.
#ifndef TOLLGATE_TRACE_H_
#define TOLLGATE_TRACE_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/metrics.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"

namespace tollgate::trace {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct SpanContext {
  TraceId trace_id{};
  SpanId span_id{};
  uint8_t flags = 0;  // bit 0: sampled

  bool sampled() const { return (flags & 1) != 0; }
};

// The parent a request names, or nullopt when the header is malformed.
std::optional<SpanContext> ParseTraceparent(std::string_view header);
// "00-<trace id>-<span id>-<flags>", 55 bytes.
std::string FormatTraceparent(const SpanContext& context);
// Lowercase hex of `size` bytes into `out` (2 * size chars).
void HexEncode(const uint8_t* bytes, size_t size, char* out);

// Ok when `url` is an endpoint DecisionTracer::Create accepts
// (http://host[:port][/path]; port 4318 and /v1/traces by default).
Status CheckCollectorUrl(std::string_view url);

struct TracerOptions {
  std::string endpoint;  // the OTLP/HTTP collector (CheckCollectorUrl)
  std::string service_name = "tollgated";
  size_t max_queue = 2048;  // spans waiting; more are dropped
  size_t max_batch = 512;   // spans per export
  std::chrono::milliseconds flush_interval{1000};
  std::chrono::milliseconds timeout{2000};  // one export: connect + send + response
  double sample_ratio = 1.0;                // of new traces, [0, 1]
  bool parent_based = true;                 // follow a trusted parent's sampled flag
  std::string store_kind = "local";         // tollgate.store: "local", "redis", "redis-cluster"
};

class DecisionTracer {
 public:
  // A decision being traced (sampled) or not.
  struct Active {
    bool sampled = false;
    SpanContext context;  // the decision span's ids
    SpanId parent{};      // the request's span, zero for a new trace
    int64_t start_wall_ns = 0;
    int64_t start_ns = 0;  // Clock::Now() at Begin
  };
  struct Stats {
    uint64_t exported = 0;           // spans the collector accepted (2xx)
    uint64_t dropped = 0;            // spans refused because the queue was full
    uint64_t failed = 0;             // spans in batches that failed
    uint64_t queued = 0;             // spans waiting now
    uint64_t oversized_replies = 0;  // collector replies dropped past a bound
  };

  // Validates the options, resolves the collector once and starts the exporter.
  static Result<std::unique_ptr<DecisionTracer>> Create(TracerOptions options, const Clock* clock);
  ~DecisionTracer();
  DecisionTracer(const DecisionTracer&) = delete;
  DecisionTracer& operator=(const DecisionTracer&) = delete;

  // `parent`: the request's context (null: none); `parent_trusted`: follow its
  // sampled flag, else sample as a new trace and continue it.
  Active Begin(const SpanContext* parent, bool parent_trusted);
  // Queues the decision's spans (nothing when not sampled). Never waits.
  void End(const Active& active, const CheckOutcome& outcome);

  // tollgate_trace_spans_total{outcome=...}, tollgate_trace_replies_oversized_total,
  // tollgate_trace_queue_spans and tollgate_trace_queue_capacity.
  void Render(PrometheusWriter& w) const;
  Stats stats() const;

 private:
  class Impl;
  explicit DecisionTracer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::trace

#endif  // TOLLGATE_TRACE_H_
