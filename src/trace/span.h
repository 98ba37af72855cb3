// Internal: one finished span as the exporter sends it, and what makes its ids.
//
// Thread safety: Span is a plain value. IdSource and Sampler are safe to share
// between threads (one relaxed atomic).
#ifndef TOLLGATE_TRACE_SPAN_H_
#define TOLLGATE_TRACE_SPAN_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "trace/traceparent.h"

namespace tollgate::trace {

// OTLP's Span.SpanKind and Status.StatusCode values.
enum class SpanKind : int { kInternal = 1, kServer = 2, kClient = 3 };
enum class SpanStatus : int { kUnset = 0, kOk = 1, kError = 2 };

struct Attribute {
  std::string key;
  std::variant<std::string, int64_t, bool> value;
};

struct Span {
  SpanContext context;      // trace id, this span's id, flags
  SpanId parent_span_id{};  // all zero for a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<Attribute> attributes;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;  // with kError only
};

// Random trace and span ids: splitmix64 over an atomic counter seeded once
// (from std::random_device when the seed is 0), so ids are unique per process
// and never all zero. Not cryptographic: ids are identifiers, not secrets.
class IdSource {
 public:
  explicit IdSource(uint64_t seed = 0);
  uint64_t Next();
  TraceId NewTraceId();
  SpanId NewSpanId();

 private:
  std::atomic<uint64_t> state_;
};

// Which decisions are recorded. A root (no valid traceparent) is sampled with
// probability `ratio`; with `parent_based`, a request with a traceparent follows
// its sampled flag, as OpenTelemetry's ParentBased(TraceIdRatioBased) default.
// Without it, the ratio applies to the trace id (the lower 8 bytes against
// ratio * 2^64), so every service with the same ratio keeps the same traces.
class Sampler {
 public:
  Sampler(double ratio, bool parent_based);
  // For a request whose parent is `parent` (null: none); `random` is used for roots.
  bool ShouldSample(const SpanContext* parent, uint64_t random) const;
  bool SamplesRoots() const { return always_ || threshold_ != 0; }
  // The decision for a new trace id (a root, or a parent without parent_based).
  bool Keeps(const TraceId& id) const;

 private:
  uint64_t threshold_;  // sampled when the value < threshold_; all when always_
  bool always_;
  bool parent_based_;
};

}  // namespace tollgate::trace

#endif  // TOLLGATE_TRACE_SPAN_H_
