// DecisionTracer (tollgate/trace.h): a decision's spans, built from its
// CheckOutcome and queued on an OtlpHttpExporter.
#include <string>
#include <utility>

#include "tollgate/trace.h"
#include "trace/exporter.h"
#include "trace/span.h"
#include "trace/traceparent.h"

namespace tollgate::trace {

class DecisionTracer::Impl {
 public:
  Impl(std::unique_ptr<OtlpHttpExporter> exporter, const Clock* clock, const TracerOptions& o)
      : exporter(std::move(exporter)),
        clock(clock),
        sampler(o.sample_ratio, o.parent_based),
        store_kind(o.store_kind),
        redis(store_kind != "local") {}

  const std::unique_ptr<OtlpHttpExporter> exporter;
  const Clock* const clock;
  const Sampler sampler;
  IdSource ids;
  const std::string store_kind;
  const bool redis;
};

namespace {

// tollgate.rule: the rule that denied, else every rule decided ("a,b").
std::string RuleAttribute(const CheckOutcome& outcome) {
  if (outcome.denied_rule >= 0) {
    if (size_t(outcome.denied_rule) >= outcome.rules.size()) return "";
    return outcome.rules[outcome.denied_rule].rule;
  }
  std::string rule;
  for (const RuleOutcome& r : outcome.rules) rule += (rule.empty() ? "" : ",") + r.rule;
  return rule;
}

int64_t TotalCost(const CheckOutcome& outcome) {
  int64_t cost = 0;
  for (const RuleOutcome& r : outcome.rules) cost += r.cost;
  return cost;
}

}  // namespace

Status CheckCollectorUrl(std::string_view url) { return ParseCollectorUrl(url).status(); }

Result<std::unique_ptr<DecisionTracer>> DecisionTracer::Create(TracerOptions options,
                                                               const Clock* clock) {
  ExporterOptions o;
  o.endpoint = options.endpoint;
  o.service_name = options.service_name;
  o.max_queue = options.max_queue;
  o.max_batch = options.max_batch;
  o.flush_interval = options.flush_interval;
  o.timeout = options.timeout;
  auto exporter = OtlpHttpExporter::Create(std::move(o));
  if (!exporter.ok()) return exporter.status();
  return std::unique_ptr<DecisionTracer>(
      new DecisionTracer(std::make_unique<Impl>(std::move(*exporter), clock, options)));
}

DecisionTracer::DecisionTracer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DecisionTracer::~DecisionTracer() = default;

DecisionTracer::Active DecisionTracer::Begin(const SpanContext* parent, bool parent_trusted) {
  Impl& t = *impl_;
  Active a;
  if (parent && parent_trusted) {
    a.sampled = t.sampler.ShouldSample(parent, 0);
  } else {
    // A new trace, or an untrusted caller's: its flag and trace id are its own choice.
    a.sampled = t.sampler.SamplesRoots() && t.sampler.ShouldSample(nullptr, t.ids.Next());
  }
  if (!a.sampled) return a;
  a.context.trace_id = parent ? parent->trace_id : t.ids.NewTraceId();
  a.context.span_id = t.ids.NewSpanId();
  a.context.flags = 1;
  if (parent) a.parent = parent->span_id;
  a.start_wall_ns = t.clock->WallNow();
  a.start_ns = t.clock->Now();
  return a;
}

void DecisionTracer::End(const Active& a, const CheckOutcome& outcome) {
  if (!a.sampled) return;
  Impl& t = *impl_;
  const int64_t end_ns = t.clock->Now();
  const auto wall = [&](int64_t mono) { return a.start_wall_ns + (mono - a.start_ns); };
  Span decision;
  decision.context = a.context;
  decision.parent_span_id = a.parent;
  decision.name = "tollgate.decision";
  decision.kind = SpanKind::kServer;
  decision.start_unix_ns = a.start_wall_ns;
  decision.end_unix_ns = wall(end_ns);
  decision.attributes = {{"tollgate.rule", RuleAttribute(outcome)},
                         {"tollgate.verdict", std::string(VerdictName(outcome.verdict))},
                         {"tollgate.store", t.store_kind},
                         {"tollgate.cost", TotalCost(outcome)},
                         {"tollgate.enforced", outcome.enforced},
                         {"http.response.status_code", int64_t{outcome.http_status}}};
  if (!outcome.status.ok()) {
    decision.status = SpanStatus::kError;
    decision.status_message = outcome.status.ToString();
  }
  if (t.redis && outcome.store_start_ns != 0) {
    Span store;
    store.context = {a.context.trace_id, t.ids.NewSpanId(), a.context.flags};
    store.parent_span_id = a.context.span_id;
    store.name = "EVALSHA";
    store.kind = SpanKind::kClient;
    store.start_unix_ns = wall(outcome.store_start_ns);
    store.end_unix_ns = wall(outcome.store_end_ns);
    store.attributes = {{"db.system", std::string("redis")},
                        {"db.operation", std::string("EVALSHA")}};
    store.status = decision.status;
    store.status_message = decision.status_message;
    t.exporter->Enqueue(std::move(store));
  }
  t.exporter->Enqueue(std::move(decision));
}

DecisionTracer::Stats DecisionTracer::stats() const {
  const OtlpHttpExporter::Stats s = impl_->exporter->stats();
  return {s.exported, s.dropped, s.failed, s.queued, s.oversized_replies};
}

void DecisionTracer::Render(PrometheusWriter& w) const {
  const Stats s = stats();
  w.Family("tollgate_trace_spans_total", "counter",
           "Spans by outcome: exported (the collector took them), dropped (queue full), "
           "failed (the collector refused, timed out or was down)");
  w.Sample("tollgate_trace_spans_total", {"outcome", "exported"}, s.exported);
  w.Sample("tollgate_trace_spans_total", {"outcome", "dropped"}, s.dropped);
  w.Sample("tollgate_trace_spans_total", {"outcome", "failed"}, s.failed);
  w.Family("tollgate_trace_replies_oversized_total", "counter",
           "Collector replies dropped past a bound (head, chunk-size line or body; their "
           "batches failed)");
  w.Sample("tollgate_trace_replies_oversized_total", {}, s.oversized_replies);
  w.Family("tollgate_trace_queue_spans", "gauge", "Spans waiting for the exporter");
  w.Sample("tollgate_trace_queue_spans", double(s.queued));
  w.Family("tollgate_trace_queue_capacity", "gauge", "Spans the exporter queue holds at most");
  w.Sample("tollgate_trace_queue_capacity", double(impl_->exporter->options().max_queue));
}

}  // namespace tollgate::trace
