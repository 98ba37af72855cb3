// Cost of OpenTelemetry tracing per decision: an Enforcer decision on the
// local store (one rule, a hot key), bracketed the way tollgated brackets it
// (server/endpoints.cc: trace::DecisionTracer::Begin, Check, End), with tracing off,
// on but not sampled, and sampled (spans built and queued for a collector
// that answers, tests/testing/otlp_collector.h). Figures: docs/benchmarks.md.
//   build/bench/trace/trace_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "testing/otlp_collector.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"
#include "tollgate/trace.h"

namespace tollgate {
namespace {

using trace::DecisionTracer;

struct Setup {
  std::unique_ptr<LocalStore> store;
  std::unique_ptr<Enforcer> enforcer;
  explicit Setup(bool time_store_calls) {
    LocalStoreOptions o;
    o.max_keys = 1 << 16;
    store = std::move(*LocalStore::Create(o));
    EnforcerOptions e;
    e.time_store_calls = time_store_calls;
    enforcer = std::move(
        *Enforcer::Create(*PolicyStore::FromText(R"({"name": "ip", "limit_keys": ["ip:address"],
             "algorithm_config": {"rps": 1e9, "burst": 1000000000}})"),
                          store.get(), &SystemClock::Instance(), e));
  }
};

const HeaderPair kHeaders[] = {{"host", "example.com"}, {"user-agent", "bench"}};
const RequestView kRequest{"GET", "/api/items", "", "192.0.2.1", kHeaders};

std::unique_ptr<DecisionTracer> MakeTracer(const std::string& endpoint, double ratio) {
  trace::TracerOptions o;
  o.endpoint = endpoint;
  o.max_queue = 1 << 16;
  o.max_batch = 512;
  o.flush_interval = std::chrono::milliseconds(100);
  o.sample_ratio = ratio;
  o.parent_based = true;
  o.store_kind = "local";
  return std::move(*DecisionTracer::Create(std::move(o), &SystemClock::Instance()));
}

// tollgated without tracing.endpoint: no tracer, no store timing.
void BM_DecisionTracingOff(benchmark::State& state) {
  Setup s(false);
  DecisionTracer* tracer = nullptr;
  for (auto _ : state) {
    DecisionTracer::Active span = tracer ? tracer->Begin(nullptr, false) : DecisionTracer::Active{};
    CheckOutcome outcome = s.enforcer->Check(kRequest);
    if (tracer && span.sampled) tracer->End(span, outcome);
    benchmark::DoNotOptimize(outcome);
  }
}
BENCHMARK(BM_DecisionTracingOff);

// Tracing on, the decision not sampled. range(0) = 0: sample_ratio 0 (no
// random number drawn); 1: sample_ratio 1e-9 (one random number, nearly never kept).
void BM_DecisionUnsampled(benchmark::State& state) {
  testing::OtlpCollector collector;
  Setup s(true);
  auto tracer = MakeTracer(collector.endpoint(), state.range(0) == 0 ? 0.0 : 1e-9);
  for (auto _ : state) {
    DecisionTracer::Active span = tracer->Begin(nullptr, false);
    CheckOutcome outcome = s.enforcer->Check(kRequest);
    if (span.sampled) tracer->End(span, outcome);
    benchmark::DoNotOptimize(outcome);
  }
}
BENCHMARK(BM_DecisionUnsampled)->Arg(0)->Arg(1);

// Every decision sampled: ids, clock reads, the span built and queued. The
// exporter thread encodes and posts beside it; spans that do not fit the queue
// are dropped (counted in the "dropped" counter, as a share of spans).
void BM_DecisionSampled(benchmark::State& state) {
  testing::OtlpCollector collector;
  Setup s(true);
  auto tracer = MakeTracer(collector.endpoint(), 1.0);
  for (auto _ : state) {
    DecisionTracer::Active span = tracer->Begin(nullptr, false);
    CheckOutcome outcome = s.enforcer->Check(kRequest);
    if (span.sampled) tracer->End(span, outcome);
    benchmark::DoNotOptimize(outcome);
  }
  const auto stats = tracer->stats();
  state.counters["dropped"] = double(stats.dropped) / double(state.iterations());
}
BENCHMARK(BM_DecisionSampled);

}  // namespace
}  // namespace tollgate
BENCHMARK_MAIN();
