// Cost of the policy layer on top of a local decision: parse a request into
// rules, keys and costs, decide the batch, render headers. Figures go to
// docs/bench/policy.md.
//   build/bench/policy/policy_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "tollgate/local_store.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

constexpr std::string_view kPolicy = R"({"rules": [
  {"name": "global-rps", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1e9, "burst": 1000000000}},
  {"name": "enterprise", "limit_keys": ["header:x-api-key"], "match": {"jwt:plan": "enterprise"},
   "algorithm_config": {"rps": 1e9, "burst": 1000000000}},
  {"name": "free", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 1e9, "burst": 1000000000}},
  {"name": "weighted", "group": "w", "limit_keys": ["header:x-api-key"], "match": {"path": {"prefix": "/api/"}},
   "algorithm_config": {"rps": 1e9, "burst": 1000000000, "cost_source": "header:x-request-weight"}}]})";

struct Setup {
  std::unique_ptr<LocalStore> store;
  std::unique_ptr<Enforcer> enforcer;
  explicit Setup(std::string_view policy) {
    LocalStoreOptions o;
    o.max_keys = 1 << 16;
    store = std::move(*LocalStore::Create(o));
    enforcer = std::move(*Enforcer::Create(*PolicyStore::FromText(policy), store.get(),
                                           &SystemClock::Instance(), {}));
  }
};

// One rule (seed global-rps shape): request -> key -> decision -> headers.
void BM_CheckOneRule(benchmark::State& state) {
  Setup s(R"({"name": "ip", "limit_keys": ["ip:address"],
             "algorithm_config": {"rps": 1e9, "burst": 1000000000}})");
  const HeaderPair headers[] = {{"host", "example.com"}, {"user-agent", "bench"}};
  const RequestView r{"GET", "/api/items", "", "192.0.2.1", headers};
  for (auto _ : state) benchmark::DoNotOptimize(s.enforcer->Check(r));
}
BENCHMARK(BM_CheckOneRule);

// The example policy: per-IP + tier (JWT match fails: no token) + weighted cost, 3 rules decided.
void BM_CheckThreeRules(benchmark::State& state) {
  Setup s(kPolicy);
  const HeaderPair headers[] = {
      {"host", "example.com"}, {"x-api-key", "k-123456"}, {"x-request-weight", "2"}};
  const RequestView r{"GET", "/api/items", "", "192.0.2.1", headers};
  for (auto _ : state) benchmark::DoNotOptimize(s.enforcer->Check(r));
}
BENCHMARK(BM_CheckThreeRules);

void BM_CheckThreeRulesThreads(benchmark::State& state) {
  static Setup* s = new Setup(kPolicy);
  const std::string key = "k-" + std::to_string(state.thread_index());
  const HeaderPair headers[] = {{"x-api-key", key}};
  const RequestView r{"GET", "/api/items", "", "192.0.2.1", headers};
  for (auto _ : state) benchmark::DoNotOptimize(s->enforcer->Check(r));
}
BENCHMARK(BM_CheckThreeRulesThreads)->Threads(1)->Threads(2)->UseRealTime();

void BM_ParseExamplePolicy(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ParsePolicy(kPolicy));
}
BENCHMARK(BM_ParseExamplePolicy);

}  // namespace
}  // namespace tollgate

BENCHMARK_MAIN();
