// Server metrics: the counters tollgated's HTTP front end owns.
//
// ServerMetrics holds HTTP requests by endpoint and status, decision latency
// with store calls and errors (tollgate::DecisionLatency), upstream failures
// and connections. Counters live in per-thread shards (one per I/O thread,
// cache-line aligned) so the request path does one uncontended relaxed add;
// Render() sums the shards. The Prometheus writer and the latency histogram
// are the runtime's (tollgate/metrics.h), shared with the Envoy adapter;
// per-rule decision counters come from the Enforcer (Enforcer::Counters()),
// store gauges from the store bundle.
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

#include "server/spoe_metrics.h"
#include "tollgate/metrics.h"
#include "tollgate/tls.h"

namespace tollgate::server {

using tollgate::PrometheusWriter;

enum class Endpoint : uint8_t {
  kDecide,
  kAuth,
  kRelease,
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
  static constexpr std::array<int, 14> kStatuses = {200, 204, 400, 401, 403, 404, 405,
                                                    408, 413, 429, 431, 500, 502, 503};
  // index kStatuses.size() = 504, +1 = any other status.
  static constexpr size_t kStatusSlots = kStatuses.size() + 2;
  enum UpstreamError { kConnect, kTimeout, kBroken, kUpstreamErrorCount };
  // A gateway client that left mid-response: the upstream finished within the
  // abort drain (its reported cost settles), or did not (abort_cost).
  enum ClientAbort { kAbortFinished, kAbortCut, kClientAbortCount };
  // Another front end's decision latencies and store calls (the gRPC one),
  // rendered into the same families with the label frontend="...".
  using LatencyCounts = tollgate::LatencyCounts;

  struct alignas(64) Shard {
    std::array<std::array<std::atomic<uint64_t>, kStatusSlots>, size_t(Endpoint::kCount)>
        requests{};
    DecisionLatency decisions;
    std::atomic<uint64_t> shaped{0};  // decisions that asked us to delay (leaky bucket)
    std::array<std::atomic<uint64_t>, kUpstreamErrorCount> upstream_errors{};
    std::atomic<uint64_t> upstream_requests{0};
    std::array<std::atomic<uint64_t>, kClientAbortCount> client_aborts{};
    SpoeCounters spoe;  // the SPOE agent's (server/spoe_metrics.h)

    void CountRequest(Endpoint e, int status) {
      requests[size_t(e)][StatusSlot(status)].fetch_add(1, std::memory_order_relaxed);
    }
    void ObserveDecision(int64_t ns, bool store_error) {
      decisions.Observe(ns);
      decisions.ObserveStoreCall(store_error);
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
  // Key administration (server/key_admin.h), by action (get, reset, set) and
  // result (ok, error: refused or failed).
  std::array<std::array<std::atomic<uint64_t>, 2>, 3> key_actions{};
  // TLS handshakes by listener (main, admin) and result (tollgate/tls.h).
  std::array<std::array<std::atomic<uint64_t>, size_t(TlsHandshakeResult::kCount)>, 2>
      tls_handshakes{};
  void CountHandshake(bool admin, TlsHandshakeResult r) {
    tls_handshakes[admin ? 1 : 0][size_t(r)].fetch_add(1, std::memory_order_relaxed);
  }
  // Certificate reloads (SIGHUP, a file change) by listener (main, admin,
  // grpc: TlsListenerIndex) and result (ok, failed: the current one kept).
  static constexpr std::array<std::string_view, 3> kTlsListeners = {"main", "admin", "grpc"};
  std::array<std::array<std::atomic<uint64_t>, 2>, kTlsListeners.size()> tls_reloads{};
  void CountTlsReload(size_t listener, bool ok) {
    tls_reloads[listener][ok ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
  }
  // The label slot of a listener's config path ("tls", "admin.tls", "grpc.tls").
  static size_t TlsListenerIndex(std::string_view path) {
    return path == "admin.tls" ? 1 : path == "grpc.tls" ? 2 : 0;
  }

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
