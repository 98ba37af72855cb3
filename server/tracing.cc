#include "server/tracing.h"

#include <utility>

#include "tollgate/store_spec.h"

namespace tollgate::server {

void RequestTrace::From(std::optional<std::string_view> traceparent, bool from_trusted_peer) {
  parent_ = traceparent ? trace::ParseTraceparent(*traceparent) : std::nullopt;
  parent_trusted_ = parent_ && from_trusted_peer;
  if (parent_) trace::HexEncode(parent_->trace_id.data(), parent_->trace_id.size(), hex_);
}

Result<std::unique_ptr<DecisionTracer>> DecisionTracer::Create(const ServerConfig& c,
                                                               const Clock* clock) {
  if (c.trace_endpoint.empty()) return std::unique_ptr<DecisionTracer>();
  trace::ExporterOptions o;
  o.endpoint = c.trace_endpoint;
  o.service_name = c.trace_service_name;
  o.max_queue = c.trace_max_queue;
  o.max_batch = c.trace_max_batch;
  o.flush_interval = c.trace_flush_interval;
  o.timeout = c.trace_timeout;
  auto exporter = trace::OtlpHttpExporter::Create(std::move(o));
  if (!exporter.ok()) return exporter.status();
  const Result<StoreScheme> scheme = StoreSchemeOf(c.store);
  std::string kind(StoreSchemeName(scheme.ok() ? *scheme : StoreScheme::kLocal));
  return std::make_unique<DecisionTracer>(
      std::move(*exporter), clock, trace::Sampler(c.trace_sample_ratio, c.trace_parent_based),
      std::move(kind));
}

DecisionTracer::DecisionTracer(std::unique_ptr<trace::OtlpHttpExporter> exporter,
                               const Clock* clock, trace::Sampler sampler, std::string store_kind)
    : exporter_(std::move(exporter)),
      clock_(clock),
      sampler_(sampler),
      store_kind_(std::move(store_kind)),
      redis_(store_kind_ != "local") {}

DecisionTracer::Active DecisionTracer::Begin(const trace::SpanContext* parent,
                                             bool parent_trusted) {
  Active a;
  if (parent && parent_trusted) {
    a.sampled = sampler_.ShouldSample(parent, 0);
  } else {
    // A new trace, or an untrusted caller's: its flag and trace id are its own choice.
    a.sampled = sampler_.SamplesRoots() && sampler_.ShouldSample(nullptr, ids_.Next());
  }
  if (!a.sampled) return a;
  a.context.trace_id = parent ? parent->trace_id : ids_.NewTraceId();
  a.context.span_id = ids_.NewSpanId();
  a.context.flags = 1;
  if (parent) a.parent = parent->span_id;
  a.start_wall_ns = clock_->WallNow();
  a.start_ns = clock_->Now();
  return a;
}

void DecisionTracer::End(const Active& a, const CheckOutcome& outcome) {
  if (!a.sampled) return;
  const int64_t end_ns = clock_->Now();
  const auto wall = [&](int64_t mono) { return a.start_wall_ns + (mono - a.start_ns); };
  trace::Span decision;
  decision.context = a.context;
  decision.parent_span_id = a.parent;
  decision.name = "tollgate.decision";
  decision.kind = trace::SpanKind::kServer;
  decision.start_unix_ns = a.start_wall_ns;
  decision.end_unix_ns = wall(end_ns);
  std::string rule;
  int64_t cost = 0;
  if (outcome.denied_rule >= 0 && size_t(outcome.denied_rule) < outcome.rules.size()) {
    rule = outcome.rules[outcome.denied_rule].rule;
  }
  for (const RuleOutcome& r : outcome.rules) {
    if (outcome.denied_rule < 0) rule += (rule.empty() ? "" : ",") + r.rule;
    cost += r.cost;
  }
  decision.attributes = {{"tollgate.rule", std::move(rule)},
                         {"tollgate.verdict", std::string(VerdictName(outcome.verdict))},
                         {"tollgate.store", store_kind_},
                         {"tollgate.cost", cost},
                         {"tollgate.enforced", outcome.enforced},
                         {"http.response.status_code", int64_t{outcome.http_status}}};
  if (!outcome.status.ok()) {
    decision.status = trace::SpanStatus::kError;
    decision.status_message = outcome.status.ToString();
  }
  if (redis_ && outcome.store_start_ns != 0) {
    trace::Span store;
    store.context = {a.context.trace_id, ids_.NewSpanId(), a.context.flags};
    store.parent_span_id = a.context.span_id;
    store.name = "EVALSHA";
    store.kind = trace::SpanKind::kClient;
    store.start_unix_ns = wall(outcome.store_start_ns);
    store.end_unix_ns = wall(outcome.store_end_ns);
    store.attributes = {{"db.system", std::string("redis")},
                        {"db.operation", std::string("EVALSHA")}};
    store.status = decision.status;
    store.status_message = decision.status_message;
    exporter_->Enqueue(std::move(store));
  }
  exporter_->Enqueue(std::move(decision));
}

void DecisionTracer::Render(PrometheusWriter& w) const {
  const trace::OtlpHttpExporter::Stats s = exporter_->stats();
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
  w.Sample("tollgate_trace_queue_capacity", double(exporter_->options().max_queue));
}

}  // namespace tollgate::server
