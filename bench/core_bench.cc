// Local decision speed and memory. Figures go to docs/benchmarks.md.
//   build/bench/core_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tollgate/algorithm.h"
#include "tollgate/local_store.h"

namespace tollgate {
namespace {

constexpr size_t kManyKeys = 1 << 20;

// One token per microsecond, burst 1000. Time advances 1 us per decision, so
// every decision is allowed and takes the CAS (write) path.
constexpr int64_t kTick = 1000;
Limit Generous() {
  LimitSpec s;
  s.rate = 1e6;
  s.burst = 1000;
  return *Limit::Create(s);
}

std::unique_ptr<LocalStore> MakeStore(size_t max_keys) {
  LocalStoreOptions o;
  o.max_keys = max_keys;
  return std::move(*LocalStore::Create(o));
}

// 16-byte keys like "k:0000000001234:" (a rule prefix plus an id).
std::vector<std::string> Keys(size_t n) {
  std::vector<std::string> keys(n);
  char buf[32];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "k:%013zu:", i);
    keys[i] = buf;
  }
  return keys;
}

void BM_Step_TokenBucket(benchmark::State& state) {
  const Limit l = Generous();
  uint64_t s = 0;
  int64_t now = 1'000'000'000;
  for (auto _ : state) {
    StepResult r = Step(l, s, 1, now += kTick);
    s = r.state;
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Step_TokenBucket);

void BM_HotKey_CallerTime(benchmark::State& state) {
  static std::unique_ptr<LocalStore> store;
  if (state.thread_index() == 0) store = MakeStore(1024);
  const Limit l = Generous();
  int64_t now = SystemClock::Instance().Now();
  for (auto _ : state)
    benchmark::DoNotOptimize(store->AcquireAt("k:hot-key-0001:", l, 1, now += kTick));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HotKey_CallerTime);
BENCHMARK(BM_HotKey_CallerTime)->Threads(2)->Name("BM_HotKey_CallerTime_2threads_same_key");

void BM_HotKey_WithCoarseClock(benchmark::State& state) {
  LocalStoreOptions o;
  o.max_keys = 1024;
  o.clock = &CoarseClock::Instance();
  auto store = std::move(*LocalStore::Create(o));
  const Limit l = Generous();
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire("k:hot-key-0001:", l, 1));
  state.SetItemsProcessed(state.iterations());
  state.counters["clock_resolution_ns"] = static_cast<double>(CoarseClock::Resolution().count());
}
BENCHMARK(BM_HotKey_WithCoarseClock);

// The same, with the key hashed once up front (LocalStore::Prepare).
void BM_HotKey_PreparedKey(benchmark::State& state) {
  auto store = MakeStore(1024);
  const Limit l = Generous();
  const auto key = store->Prepare("k:hot-key-0001:");
  int64_t now = SystemClock::Instance().Now();
  for (auto _ : state) benchmark::DoNotOptimize(store->AcquireAt(key, l, 1, now += kTick));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HotKey_PreparedKey);

void BM_HotKey_WithClock(benchmark::State& state) {
  auto store = MakeStore(1024);
  const Limit l = Generous();
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire("k:hot-key-0001:", l, 1));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HotKey_WithClock);

void BM_ManyKeys(benchmark::State& state, bool zipf) {
  static std::unique_ptr<LocalStore> store;
  static std::vector<std::string> keys;
  static std::vector<uint32_t> order;
  const Limit l = Generous();
  if (state.thread_index() == 0) {
    store = MakeStore(kManyKeys);
    if (keys.empty()) keys = Keys(kManyKeys);
    for (const auto& k : keys) store->AcquireAt(k, l, 1, 1);  // populate
    std::mt19937_64 rng(42);
    order.resize(1 << 22);
    if (zipf) {
      // Zipf(s=1) over the keys by inverse transform on the harmonic series.
      std::vector<double> cdf(kManyKeys);
      double sum = 0;
      for (size_t i = 0; i < kManyKeys; ++i) cdf[i] = (sum += 1.0 / (i + 1));
      std::uniform_real_distribution<double> u(0, sum);
      for (auto& o : order) {
        o = static_cast<uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
      }
    } else {
      for (auto& o : order) o = static_cast<uint32_t>(rng() % kManyKeys);
    }
  }
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  int64_t now = 2;
  // The caller has its key at hand (in cache), as a request handler does: the
  // key is rebuilt in a local buffer rather than fetched from a 32 MB array.
  char key[17] = "k:0000000000000:";
  for (auto _ : state) {
    uint32_t id = order[i++ & (order.size() - 1)];
    for (int d = 14; d >= 2; --d, id /= 10) key[d] = static_cast<char>('0' + id % 10);
    benchmark::DoNotOptimize(store->AcquireAt(std::string_view(key, 16), l, 1, now += kTick));
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const auto st = store->Stats();
    state.counters["keys"] = static_cast<double>(st.keys);
    state.counters["bytes_per_key"] = static_cast<double>(st.bytes) / kManyKeys;
  }
}
BENCHMARK_CAPTURE(BM_ManyKeys, uniform_1M, false);
BENCHMARK_CAPTURE(BM_ManyKeys, zipf_1M, true);

void BM_DisjointKeys_2threads(benchmark::State& state) {
  static std::unique_ptr<LocalStore> store;
  if (state.thread_index() == 0) store = MakeStore(1 << 16);
  const Limit l = Generous();
  const auto keys = Keys(1024);
  size_t i = 0;
  const size_t base = state.thread_index() == 0 ? 0 : 512;
  int64_t now = 2;
  for (auto _ : state)
    benchmark::DoNotOptimize(store->AcquireAt(keys[base + (i++ & 511)], l, 1, now += kTick));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DisjointKeys_2threads)->Threads(2);

// Resident memory per key, including the 16-byte key's share: the store keeps
// a 128-bit hash instead of the key, so a key's bytes are its slot's share.
void BM_MemoryPerKey(benchmark::State& state) {
  for (auto _ : state) {
    auto store = MakeStore(kManyKeys);
    const Limit l = Generous();
    const auto keys = Keys(kManyKeys);
    for (const auto& k : keys) store->AcquireAt(k, l, 1, 1);
    const auto st = store->Stats();
    state.counters["keys"] = static_cast<double>(st.keys);
    state.counters["bytes_per_key"] = static_cast<double>(st.bytes) / static_cast<double>(st.keys);
  }
}
BENCHMARK(BM_MemoryPerKey)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tollgate

BENCHMARK_MAIN();
