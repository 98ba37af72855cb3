// Server metrics and the Prometheus text exposition (format 0.0.4, by hand).
//
// ServerMetrics holds the counters the front end owns (HTTP requests by
// endpoint and status, decision latency, store calls and errors, upstream
// failures, connections). Counters live in per-thread shards (one per I/O
// thread, cache-line aligned) so the request path does one uncontended
// relaxed add; Render() sums the shards. Per-rule decision counters come from
// the Enforcer (Enforcer::Counters()), store gauges from the store bundle.
//
// Label values are rule names, endpoints and status codes only: never a client
// key (those are served by GET /v1/top on the admin listener).
//
// Thread safety: Shard methods are called by the shard's own thread (any thread
// may, the counters are atomics); Render() may run concurrently with them.
#ifndef TOLLGATE_SERVER_METRICS_H_
#define TOLLGATE_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::server {

// Writes Prometheus text: HELP/TYPE once per family, escaped label values.
class PrometheusWriter {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // labels: {"rule","free","outcome","allowed"} pairs flattened.
  void Sample(std::string_view name, std::initializer_list<std::string_view> labels, double value);
  void Sample(std::string_view name, std::initializer_list<std::string_view> labels,
              uint64_t value);
  void Sample(std::string_view name, double value) { Sample(name, {}, value); }
  std::string Take() { return std::move(out_); }
  static std::string EscapeLabel(std::string_view v);

 private:
  void Labels(std::initializer_list<std::string_view> labels);
  std::string out_;
};

enum class Endpoint : uint8_t {
  kDecide,
  kAuth,
  kGateway,
  kMetrics,
  kHealth,
  kAdmin,
  kNotFound,
  kInvalid,  // the request could not be parsed or was too large
  kCount
};
std::string_view EndpointName(Endpoint e);

class ServerMetrics {
 public:
  // Upper bounds of the decision latency histogram, in nanoseconds.
  static constexpr std::array<int64_t, 14> kLatencyBoundsNs = {
      25'000,    50'000,     100'000,    250'000,    500'000,     1'000'000,   2'500'000,
      5'000'000, 10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 1'000'000'000};
  static constexpr std::array<int, 13> kStatuses = {200, 204, 400, 401, 403, 404, 405,
                                                    408, 413, 429, 431, 502, 503};
  // index kStatuses.size() = 504, +1 = any other status.
  static constexpr size_t kStatusSlots = kStatuses.size() + 2;
  enum UpstreamError { kConnect, kTimeout, kBroken, kUpstreamErrorCount };
  // Another front end's decision latencies and store calls (the gRPC one),
  // rendered into the same families with the label frontend="...".
  struct LatencyCounts {
    std::array<uint64_t, kLatencyBoundsNs.size() + 1> buckets{};  // not cumulative
    uint64_t sum_ns = 0;
    uint64_t store_calls = 0, store_errors = 0;
  };

  struct alignas(64) Shard {
    std::array<std::array<std::atomic<uint64_t>, kStatusSlots>, size_t(Endpoint::kCount)>
        requests{};
    std::array<std::atomic<uint64_t>, kLatencyBoundsNs.size() + 1> latency{};
    std::atomic<uint64_t> latency_sum_ns{0};
    std::atomic<uint64_t> store_calls{0};
    std::atomic<uint64_t> store_errors{0};
    std::atomic<uint64_t> shaped{0};  // decisions that asked us to delay (leaky bucket)
    std::array<std::atomic<uint64_t>, kUpstreamErrorCount> upstream_errors{};
    std::atomic<uint64_t> upstream_requests{0};

    void CountRequest(Endpoint e, int status) {
      requests[size_t(e)][StatusSlot(status)].fetch_add(1, std::memory_order_relaxed);
    }
    void ObserveDecision(int64_t ns, bool store_error) {
      size_t b = 0;
      while (b < kLatencyBoundsNs.size() && ns > kLatencyBoundsNs[b]) ++b;
      latency[b].fetch_add(1, std::memory_order_relaxed);
      latency_sum_ns.fetch_add(uint64_t(ns < 0 ? 0 : ns), std::memory_order_relaxed);
      store_calls.fetch_add(1, std::memory_order_relaxed);
      if (store_error) store_errors.fetch_add(1, std::memory_order_relaxed);
    }
  };

  explicit ServerMetrics(size_t shards);
  Shard& shard(size_t i) { return shards_[i % shards_.size()]; }
  size_t shard_count() const { return shards_.size(); }

  std::atomic<int64_t> connections_active{0};
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> connections_refused{0};  // over max_connections
  std::atomic<uint64_t> timeouts{0};             // connections closed by a read/idle/write timeout
  std::atomic<uint64_t> rejection_logs_suppressed{0};

  // Appends the server's own families. HTTP decisions carry no frontend label
  // (the series existing dashboards use); `grpc`, when given, is added to
  // tollgate_decision_duration_seconds and tollgate_store_calls_total /
  // tollgate_store_errors_total with frontend="grpc".
  void Render(PrometheusWriter& w, const LatencyCounts* grpc = nullptr) const;

  static size_t StatusSlot(int status) {
    for (size_t i = 0; i < kStatuses.size(); ++i) {
      if (kStatuses[i] == status) return i;
    }
    return status == 504 ? kStatuses.size() : kStatuses.size() + 1;
  }

 private:
  std::vector<Shard> shards_;
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_METRICS_H_
