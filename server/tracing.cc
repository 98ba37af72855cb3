#include "server/tracing.h"

#include <utility>

#include "tollgate/store_spec.h"

namespace tollgate::server {

void RequestTrace::From(std::optional<std::string_view> traceparent, bool from_trusted_peer) {
  parent_ = traceparent ? trace::ParseTraceparent(*traceparent) : std::nullopt;
  parent_trusted_ = parent_ && from_trusted_peer;
  if (parent_) trace::HexEncode(parent_->trace_id.data(), parent_->trace_id.size(), hex_);
}

Result<std::unique_ptr<DecisionTracer>> MakeDecisionTracer(const ServerConfig& c,
                                                           const Clock* clock) {
  if (c.trace_endpoint.empty()) return std::unique_ptr<DecisionTracer>();
  trace::TracerOptions o;
  o.endpoint = c.trace_endpoint;
  o.service_name = c.trace_service_name;
  o.max_queue = c.trace_max_queue;
  o.max_batch = c.trace_max_batch;
  o.flush_interval = c.trace_flush_interval;
  o.timeout = c.trace_timeout;
  o.sample_ratio = c.trace_sample_ratio;
  o.parent_based = c.trace_parent_based;
  const Result<StoreScheme> scheme = StoreSchemeOf(c.store);
  o.store_kind = std::string(StoreSchemeName(scheme.ok() ? *scheme : StoreScheme::kLocal));
  return DecisionTracer::Create(std::move(o), clock);
}

}  // namespace tollgate::server
