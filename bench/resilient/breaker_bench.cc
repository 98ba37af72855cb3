// breaker_bench: what the resilience layer costs per decision, without Redis.
//  - BM_Breaker: CircuitBreaker Allow + Record(success) alone (the hot path);
//  - BM_Local vs BM_ResilientOverLocal: a LocalStore decision with and without
//    the ResilientStore wrapper (breaker closed);
//  - BM_Outage/<mode>: a decision while the breaker is open (forced), per mode.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "tollgate/circuit_breaker.h"
#include "tollgate/local_store.h"
#include "tollgate/resilient_store.h"

namespace tollgate {
namespace {

Limit RoomyLimit() {
  LimitSpec s;
  s.rate = 1e9;
  s.burst = 1'000'000;
  return *Limit::Create(s);
}

std::unique_ptr<LocalStore> MakeLocal() {
  LocalStoreOptions o;
  o.max_keys = 1 << 16;
  return std::move(*LocalStore::Create(o));
}

std::unique_ptr<ResilientStore> MakeResilient(FailureMode mode) {
  ResilientStoreOptions o;
  o.mode = mode;
  o.background = false;
  o.charge_back = false;  // measures the decision, not the ledger's growth
  o.local_max_keys = 1 << 16;
  return std::move(*ResilientStore::Create(MakeLocal(), std::move(o)));
}

std::string KeyFor(int thread) { return "bench\x1f" + std::to_string(thread); }

void BM_Breaker(benchmark::State& state) {
  static CircuitBreaker* breaker = nullptr;
  if (state.thread_index() == 0) breaker = new CircuitBreaker(CircuitBreakerOptions{});
  for (auto _ : state) {
    auto p = breaker->Allow();
    breaker->Record(p, true);
  }
  if (state.thread_index() == 0) {
    delete breaker;
    breaker = nullptr;
  }
}
BENCHMARK(BM_Breaker)->Threads(1)->Threads(2)->UseRealTime();

void BM_Local(benchmark::State& state) {
  static std::unique_ptr<LocalStore> store;
  if (state.thread_index() == 0) store = MakeLocal();
  const Limit limit = RoomyLimit();
  const std::string key = KeyFor(state.thread_index());
  AcquireItem item{key, &limit, 1};
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire({&item, 1}));
  if (state.thread_index() == 0) store.reset();
}
BENCHMARK(BM_Local)->Threads(1)->Threads(2)->UseRealTime();

void BM_ResilientOverLocal(benchmark::State& state) {
  static std::unique_ptr<ResilientStore> store;
  if (state.thread_index() == 0) store = MakeResilient(FailureMode::kDegrade);
  const Limit limit = RoomyLimit();
  const std::string key = KeyFor(state.thread_index());
  AcquireItem item{key, &limit, 1};
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire({&item, 1}));
  if (state.thread_index() == 0) store.reset();
}
BENCHMARK(BM_ResilientOverLocal)->Threads(1)->Threads(2)->UseRealTime();

void BM_Outage(benchmark::State& state) {
  static std::unique_ptr<ResilientStore> store;
  const auto mode = static_cast<FailureMode>(state.range(0));
  if (state.thread_index() == 0) {
    store = MakeResilient(mode);
    store->breaker().ForceOpen();
  }
  const Limit limit = RoomyLimit();
  const std::string key = KeyFor(state.thread_index());
  AcquireItem item{key, &limit, 1};
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire({&item, 1}));
  state.SetLabel(std::string(FailureModeName(mode)));
  if (state.thread_index() == 0) store.reset();
}
BENCHMARK(BM_Outage)
    ->Arg(static_cast<int>(FailureMode::kOpen))
    ->Arg(static_cast<int>(FailureMode::kClosed))
    ->Arg(static_cast<int>(FailureMode::kDegrade))
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace
}  // namespace tollgate

BENCHMARK_MAIN();
