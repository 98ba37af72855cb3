#include "server/metrics.h"

#include <span>
#include <string>
#include <vector>

namespace tollgate::server {

std::string_view EndpointName(Endpoint e) {
  switch (e) {
    case Endpoint::kDecide:
      return "decide";
    case Endpoint::kAuth:
      return "auth";
    case Endpoint::kRelease:
      return "release";
    case Endpoint::kGateway:
      return "gateway";
    case Endpoint::kMetrics:
      return "metrics";
    case Endpoint::kHealth:
      return "health";
    case Endpoint::kAdmin:
      return "admin";
    case Endpoint::kNotFound:
      return "not_found";
    case Endpoint::kInvalid:
      return "invalid";
    case Endpoint::kCount:
      break;
  }
  return "other";
}

ServerMetrics::ServerMetrics(size_t shards) : shards_(shards == 0 ? 1 : shards) {}

namespace {

using Shard = ServerMetrics::Shard;
using Counter = std::atomic<uint64_t>;

// The sum over the shards of the counter `get` picks out of each.
template <typename Get>
uint64_t Sum(std::span<const Shard> shards, Get get) {
  uint64_t total = 0;
  for (const Shard& s : shards) total += get(s).load(std::memory_order_relaxed);
  return total;
}

void RenderRequests(PrometheusWriter& w, std::span<const Shard> shards) {
  w.Family("tollgate_http_requests_total", "counter",
           "HTTP requests answered, by endpoint and status code.");
  const auto& statuses = ServerMetrics::kStatuses;
  for (size_t e = 0; e < size_t(Endpoint::kCount); ++e) {
    for (size_t slot = 0; slot < ServerMetrics::kStatusSlots; ++slot) {
      uint64_t n =
          Sum(shards, [&](const Shard& s) -> const Counter& { return s.requests[e][slot]; });
      if (n == 0) continue;
      std::string code = slot < statuses.size()    ? std::to_string(statuses[slot])
                         : slot == statuses.size() ? "504"
                                                   : "other";
      w.Sample("tollgate_http_requests_total",
               {"endpoint", EndpointName(Endpoint(e)), "code", code}, n);
    }
  }
}

// Decision latency and store calls: HTTP without a label (the series existing dashboards use),
// gRPC with frontend="grpc".
void RenderDecisions(PrometheusWriter& w, std::span<const Shard> shards,
                     const ServerMetrics::LatencyCounts* grpc) {
  w.Family("tollgate_decision_duration_seconds", "histogram",
           "Time to decide one request (policy match + store call), seconds.");
  ServerMetrics::LatencyCounts http;
  for (const Shard& s : shards) s.decisions.AddTo(http);
  RenderDecisionLatency(w, http, "");
  if (grpc != nullptr) RenderDecisionLatency(w, *grpc, "grpc");

  w.Family("tollgate_store_calls_total", "counter", "Decisions sent to the store.");
  w.Sample("tollgate_store_calls_total", {}, http.store_calls);
  if (grpc != nullptr)
    w.Sample("tollgate_store_calls_total", {"frontend", "grpc"}, grpc->store_calls);
  w.Family("tollgate_store_errors_total", "counter",
           "Decisions the store could not make (answered by the failure mode or 503).");
  w.Sample("tollgate_store_errors_total", {}, http.store_errors);
  if (grpc != nullptr) {
    w.Sample("tollgate_store_errors_total", {"frontend", "grpc"}, grpc->store_errors);
  }
  w.Family("tollgate_shaped_total", "counter",
           "Allowed decisions delayed by a leaky-bucket shaper before answering.");
  w.Sample("tollgate_shaped_total", {},
           Sum(shards, [](const Shard& s) -> const Counter& { return s.shaped; }));
}

void RenderGateway(PrometheusWriter& w, std::span<const Shard> shards) {
  w.Family("tollgate_upstream_requests_total", "counter", "Gateway requests sent upstream.");
  w.Sample("tollgate_upstream_requests_total", {},
           Sum(shards, [](const Shard& s) -> const Counter& { return s.upstream_requests; }));
  w.Family("tollgate_upstream_errors_total", "counter",
           "Gateway upstream failures by kind (connect -> 502, timeout -> 504, broken -> 502).");
  static constexpr std::string_view kKinds[] = {"connect", "timeout", "broken"};
  for (size_t k = 0; k < ServerMetrics::kUpstreamErrorCount; ++k) {
    w.Sample("tollgate_upstream_errors_total", {"kind", kKinds[k]},
             Sum(shards, [&](const Shard& s) -> const Counter& { return s.upstream_errors[k]; }));
  }

  w.Family("tollgate_gateway_client_aborts_total", "counter",
           "Gateway clients that left mid-response, by how the upstream's drain ended "
           "(finished: its reported cost settled; cut: abort_cost charged).");
  static constexpr std::string_view kDrains[] = {"finished", "cut"};
  for (size_t d = 0; d < ServerMetrics::kClientAbortCount; ++d) {
    w.Sample("tollgate_gateway_client_aborts_total", {"drain", kDrains[d]},
             Sum(shards, [&](const Shard& s) -> const Counter& { return s.client_aborts[d]; }));
  }
}

void RenderKeyActions(PrometheusWriter& w, const ServerMetrics& m) {
  w.Family("tollgate_admin_key_actions_total", "counter",
           "Key administration requests (/v1/keys/*) by action and result (error: refused "
           "input, unknown rule or a failed store call).");
  static constexpr std::string_view kActions[] = {"get", "reset", "set"};
  for (size_t a = 0; a < m.key_actions.size(); ++a) {
    w.Sample("tollgate_admin_key_actions_total", {"action", kActions[a], "result", "ok"},
             m.key_actions[a][0].load(std::memory_order_relaxed));
    w.Sample("tollgate_admin_key_actions_total", {"action", kActions[a], "result", "error"},
             m.key_actions[a][1].load(std::memory_order_relaxed));
  }
}

void RenderConnections(PrometheusWriter& w, const ServerMetrics& m) {
  w.Family("tollgate_connections_active", "gauge", "Open client connections.");
  w.Sample("tollgate_connections_active", {},
           double(m.connections_active.load(std::memory_order_relaxed)));
  w.Family("tollgate_connections_total", "counter", "Client connections accepted.");
  w.Sample("tollgate_connections_total", {}, m.connections_total.load(std::memory_order_relaxed));
  w.Family("tollgate_connections_refused_total", "counter",
           "Connections closed at accept: a listener's max_connections or max_connections_per_ip "
           "was reached.");
  w.Sample("tollgate_connections_refused_total", {},
           m.connections_refused.load(std::memory_order_relaxed));
  w.Family("tollgate_connection_timeouts_total", "counter",
           "Connections closed by a read, idle or write timeout.");
  w.Sample("tollgate_connection_timeouts_total", {}, m.timeouts.load(std::memory_order_relaxed));
  w.Family("tollgate_tls_handshakes_total", "counter",
           "TLS handshakes on the main and admin listeners by result (ok, or why they failed).");
  for (size_t l = 0; l < m.tls_handshakes.size(); ++l) {
    for (size_t r = 0; r < m.tls_handshakes[l].size(); ++r) {
      w.Sample("tollgate_tls_handshakes_total",
               {"listener", l == 0 ? "main" : "admin", "result",
                TlsHandshakeResultName(TlsHandshakeResult(r))},
               m.tls_handshakes[l][r].load(std::memory_order_relaxed));
    }
  }
  w.Family("tollgate_tls_reloads_total", "counter",
           "Certificate reloads (SIGHUP or a changed file) by listener and result: ok, or failed "
           "(the files did not load; the current certificate stays).");
  for (size_t l = 0; l < m.tls_reloads.size(); ++l) {
    for (size_t r = 0; r < 2; ++r) {
      w.Sample("tollgate_tls_reloads_total",
               {"listener", ServerMetrics::kTlsListeners[l], "result", r == 0 ? "ok" : "failed"},
               m.tls_reloads[l][r].load(std::memory_order_relaxed));
    }
  }
}

}  // namespace

void ServerMetrics::Render(PrometheusWriter& w, const LatencyCounts* grpc) const {
  RenderRequests(w, shards_);
  RenderDecisions(w, shards_, grpc);
  RenderGateway(w, shards_);
  RenderKeyActions(w, *this);
  RenderConnections(w, *this);
  std::vector<const SpoeCounters*> spoe;
  for (const Shard& s : shards_) spoe.push_back(&s.spoe);
  RenderSpoeMetrics(w, spoe);
}

}  // namespace tollgate::server
