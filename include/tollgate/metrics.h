// Metrics shared by every front end: the Prometheus text writer and the
// decision-latency histogram, declared once.
//
//   PrometheusWriter w;
//   w.Family("tollgate_x_total", "counter", "What it counts.");
//   w.Sample("tollgate_x_total", {"rule", name}, uint64_t{3});
//   std::string text = w.Take();
//
// The text is exposition format 0.0.4 (../shared/specs/protocols.md section 6):
// HELP/TYPE once per family, label values escaped (backslash, quote, newline).
// DecisionLatency counts what tollgate_decision_duration_seconds,
// tollgate_store_calls_total and tollgate_store_errors_total export, for HTTP
// (per I/O thread shard, server/metrics.h) and for the Envoy adapter
// (server/rls); RenderDecisionLatency writes one front end's histogram.
//
// Thread safety: a PrometheusWriter belongs to one thread. DecisionLatency's
// methods may run from any threads at once (relaxed atomics); a Snapshot taken
// meanwhile may see a call's bucket without its sum, which Prometheus tolerates.
#ifndef TOLLGATE_METRICS_H_
#define TOLLGATE_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tollgate {

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
  void Line(std::string_view name, std::initializer_list<std::string_view> labels,
            std::string_view value);
  std::string out_;
};

// Upper bounds of the decision latency histogram, in nanoseconds.
inline constexpr std::array<int64_t, 14> kDecisionLatencyBoundsNs = {
    25'000,    50'000,     100'000,    250'000,    500'000,     1'000'000,   2'500'000,
    5'000'000, 10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 1'000'000'000};

// A snapshot of DecisionLatency (or the sum of several).
struct LatencyCounts {
  std::array<uint64_t, kDecisionLatencyBoundsNs.size() + 1> buckets{};  // not cumulative; +Inf last
  uint64_t sum_ns = 0;
  // Decisions sent to the store, and those it could not make (an error or a
  // failure mode's answer).
  uint64_t store_calls = 0, store_errors = 0;
};

class DecisionLatency {
 public:
  // One decision that took `ns` (a call's start to its answer).
  void Observe(int64_t ns);
  // One decision sent to the store; `store_error` when it could not decide.
  void ObserveStoreCall(bool store_error);
  // Adds this histogram's counts to `into`.
  void AddTo(LatencyCounts& into) const;
  LatencyCounts Snapshot() const {
    LatencyCounts out;
    AddTo(out);
    return out;
  }

 private:
  std::array<std::atomic<uint64_t>, kDecisionLatencyBoundsNs.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
  std::atomic<uint64_t> store_calls_{0};
  std::atomic<uint64_t> store_errors_{0};
};

// The samples of tollgate_decision_duration_seconds (bucket, sum, count) for
// one front end: no label when `frontend` is empty (HTTP, the series existing
// dashboards use), else frontend="<frontend>". The caller writes the Family line.
void RenderDecisionLatency(PrometheusWriter& w, const LatencyCounts& counts,
                           std::string_view frontend);

}  // namespace tollgate

#endif  // TOLLGATE_METRICS_H_
