#include "server/metrics.h"

#include "server/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace tollgate::server {
namespace {

void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    out += std::to_string(static_cast<int64_t>(v));
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out += buf;
  }
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string PrometheusWriter::EscapeLabel(std::string_view v) { return PrometheusEscapeLabel(v); }

void PrometheusWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusWriter::Labels(std::initializer_list<std::string_view> labels) {
  if (labels.size() == 0) return;
  out_ += '{';
  bool first = true;
  for (auto it = labels.begin(); it != labels.end(); it += 2) {
    if (!first) out_ += ',';
    first = false;
    out_ += *it;
    out_ += "=\"";
    out_ += EscapeLabel(*(it + 1));
    out_ += '"';
  }
  out_ += '}';
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<std::string_view> labels,
                              double value) {
  out_ += name;
  Labels(labels);
  out_ += ' ';
  AppendNumber(out_, value);
  out_ += '\n';
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<std::string_view> labels,
                              uint64_t value) {
  out_ += name;
  Labels(labels);
  out_ += ' ';
  out_ += std::to_string(value);
  out_ += '\n';
}

std::string_view EndpointName(Endpoint e) {
  switch (e) {
    case Endpoint::kDecide:
      return "decide";
    case Endpoint::kAuth:
      return "auth";
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

void ServerMetrics::Render(PrometheusWriter& w, const LatencyCounts* grpc) const {
  auto sum = [&](auto get) {
    uint64_t total = 0;
    for (const Shard& s : shards_) total += get(s).load(std::memory_order_relaxed);
    return total;
  };

  w.Family("tollgate_http_requests_total", "counter",
           "HTTP requests answered, by endpoint and status code.");
  for (size_t e = 0; e < size_t(Endpoint::kCount); ++e) {
    for (size_t slot = 0; slot < kStatusSlots; ++slot) {
      uint64_t n =
          sum([&](const Shard& s) -> const std::atomic<uint64_t>& { return s.requests[e][slot]; });
      if (n == 0) continue;
      std::string code = slot < kStatuses.size()    ? std::to_string(kStatuses[slot])
                         : slot == kStatuses.size() ? "504"
                                                    : "other";
      w.Sample("tollgate_http_requests_total",
               {"endpoint", EndpointName(Endpoint(e)), "code", code}, n);
    }
  }

  w.Family("tollgate_decision_duration_seconds", "histogram",
           "Time to decide one request (policy match + store call), seconds.");
  // One histogram per front end: HTTP without a label (the series existing
  // dashboards use), gRPC with frontend="grpc".
  auto histogram = [&w](const LatencyCounts& c, bool grpc) {
    auto sample = [&](std::string_view name, std::string_view le, auto value) {
      if (grpc && le.empty()) {
        w.Sample(name, {"frontend", "grpc"}, value);
      } else if (grpc) {
        w.Sample(name, {"frontend", "grpc", "le", le}, value);
      } else if (le.empty()) {
        w.Sample(name, {}, value);
      } else {
        w.Sample(name, {"le", le}, value);
      }
    };
    uint64_t cumulative = 0;
    for (size_t b = 0; b < c.buckets.size(); ++b) {
      cumulative += c.buckets[b];
      std::string le = "+Inf";
      if (b < kLatencyBoundsNs.size()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", double(kLatencyBoundsNs[b]) / 1e9);
        le = buf;
      }
      sample("tollgate_decision_duration_seconds_bucket", le, cumulative);
    }
    sample("tollgate_decision_duration_seconds_sum", "", double(c.sum_ns) / 1e9);
    sample("tollgate_decision_duration_seconds_count", "", cumulative);
  };
  LatencyCounts http;
  for (size_t b = 0; b < http.buckets.size(); ++b) {
    http.buckets[b] =
        sum([&](const Shard& s) -> const std::atomic<uint64_t>& { return s.latency[b]; });
  }
  http.sum_ns =
      sum([](const Shard& s) -> const std::atomic<uint64_t>& { return s.latency_sum_ns; });
  histogram(http, false);
  if (grpc != nullptr) histogram(*grpc, true);

  w.Family("tollgate_store_calls_total", "counter", "Decisions sent to the store.");
  w.Sample("tollgate_store_calls_total", {},
           sum([](const Shard& s) -> const std::atomic<uint64_t>& { return s.store_calls; }));
  if (grpc != nullptr)
    w.Sample("tollgate_store_calls_total", {"frontend", "grpc"}, grpc->store_calls);
  w.Family("tollgate_store_errors_total", "counter",
           "Decisions the store could not make (answered by the failure mode or 503).");
  w.Sample("tollgate_store_errors_total", {},
           sum([](const Shard& s) -> const std::atomic<uint64_t>& { return s.store_errors; }));
  if (grpc != nullptr) {
    w.Sample("tollgate_store_errors_total", {"frontend", "grpc"}, grpc->store_errors);
  }
  w.Family("tollgate_shaped_total", "counter",
           "Allowed decisions delayed by a leaky-bucket shaper before answering.");
  w.Sample("tollgate_shaped_total", {},
           sum([](const Shard& s) -> const std::atomic<uint64_t>& { return s.shaped; }));

  w.Family("tollgate_upstream_requests_total", "counter", "Gateway requests sent upstream.");
  w.Sample("tollgate_upstream_requests_total", {},
           sum([](const Shard& s) -> const std::atomic<uint64_t>& { return s.upstream_requests; }));
  w.Family("tollgate_upstream_errors_total", "counter",
           "Gateway upstream failures by kind (connect -> 502, timeout -> 504, broken -> 502).");
  static constexpr std::string_view kKinds[] = {"connect", "timeout", "broken"};
  for (size_t k = 0; k < kUpstreamErrorCount; ++k) {
    w.Sample(
        "tollgate_upstream_errors_total", {"kind", kKinds[k]},
        sum([&](const Shard& s) -> const std::atomic<uint64_t>& { return s.upstream_errors[k]; }));
  }

  w.Family("tollgate_connections_active", "gauge", "Open client connections.");
  w.Sample("tollgate_connections_active", {},
           double(connections_active.load(std::memory_order_relaxed)));
  w.Family("tollgate_connections_total", "counter", "Client connections accepted.");
  w.Sample("tollgate_connections_total", {}, connections_total.load(std::memory_order_relaxed));
  w.Family("tollgate_connections_refused_total", "counter",
           "Connections closed at accept: a listener's max_connections or max_connections_per_ip "
           "was reached.");
  w.Sample("tollgate_connections_refused_total", {},
           connections_refused.load(std::memory_order_relaxed));
  w.Family("tollgate_connection_timeouts_total", "counter",
           "Connections closed by a read, idle or write timeout.");
  w.Sample("tollgate_connection_timeouts_total", {}, timeouts.load(std::memory_order_relaxed));
}

}  // namespace tollgate::server
