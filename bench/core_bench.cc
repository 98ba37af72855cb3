// Local decision speed and memory. Figures go to docs/bench/core.md and docs/benchmarks.md.
//   build/bench/core_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tollgate/algorithm.h"
#include "tollgate/local_store.h"
#include "tollgate/time_zone.h"

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

// A quota's step on the epoch's grid, and on a calendar day in Berlin (the
// window found in the zone's transitions at every step), 1 us apart.
void StepWindow(benchmark::State& state, std::shared_ptr<const Calendar> calendar) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.burst = int64_t{1} << 40;
  if (calendar == nullptr) spec.window = std::chrono::hours(24);
  spec.calendar = std::move(calendar);
  const Limit l = *Limit::Create(spec);
  uint64_t s = 0;
  int64_t now = 1'764'000'000'000'000'000;  // 2025-11-24, wall clock
  for (auto _ : state) {
    StepResult r = Step(l, s, 1, now += kTick);
    s = r.state;
    benchmark::DoNotOptimize(r);
  }
}
void BM_Step_FixedWindow(benchmark::State& state) { StepWindow(state, nullptr); }
BENCHMARK(BM_Step_FixedWindow);
void BM_Step_CalendarDay(benchmark::State& state) {
  auto zone = TimeZone::Load("Europe/Berlin");
  if (!zone.ok()) {
    state.SkipWithError("no tzdata");
    return;
  }
  StepWindow(state, std::make_shared<Calendar>(CalendarUnit::kDay, *zone));
}
BENCHMARK(BM_Step_CalendarDay);

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

// Hashing alone (what a prepared key saves), for a 16-byte and a 40-byte key.
void BM_Prepare(benchmark::State& state) {
  auto store = MakeStore(1024);
  const std::string key = std::string("k:hot-key-0001:") + std::string(state.range(0) - 15, 'x');
  for (auto _ : state) benchmark::DoNotOptimize(store->Prepare(key));
}
BENCHMARK(BM_Prepare)->Arg(16)->Arg(40);

void BM_HotKey_WithClock(benchmark::State& state) {
  auto store = MakeStore(1024);
  const Limit l = Generous();
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire("k:hot-key-0001:", l, 1));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HotKey_WithClock);

// The key ids of the 1M-key benchmarks, in the order they are decided.
std::vector<uint32_t> Order(bool zipf) {
  std::mt19937_64 rng(42);
  std::vector<uint32_t> order(1 << 22);
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
  return order;
}

// Writes the 16-byte key of `id` ("k:0000000001234:") into key[0..16).
void KeyOf(uint32_t id, char* key) {
  std::memcpy(key, "k:0000000000000:", 16);
  for (int d = 14; d >= 2; --d, id /= 10) key[d] = static_cast<char>('0' + id % 10);
}

void BM_ManyKeys(benchmark::State& state, bool zipf) {
  static std::unique_ptr<LocalStore> store;
  static std::vector<std::string> keys;
  static std::vector<uint32_t> order;
  const Limit l = Generous();
  if (state.thread_index() == 0) {
    store = MakeStore(kManyKeys);
    if (keys.empty()) keys = Keys(kManyKeys);
    for (const auto& k : keys) store->AcquireAt(k, l, 1, 1);  // populate
    order = Order(zipf);
  }
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  int64_t now = 2;
  // The caller has its key at hand (in cache), as a request handler does: the
  // key is rebuilt in a local buffer rather than fetched from a 32 MB array.
  char key[16];
  for (auto _ : state) {
    KeyOf(order[i++ & (order.size() - 1)], key);
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

// The same keys and order, decided kGroup at a time with AcquireEachAt (each
// key on its own, slots prefetched for the group). One benchmark iteration is
// one decision, so the time shown is per decision: every kGroup-th iteration
// builds and decides the next kGroup keys.
void BM_ManyKeysEach(benchmark::State& state, bool zipf) {
  constexpr size_t kGroup = 16;
  static std::unique_ptr<LocalStore> store;
  static std::vector<uint32_t> order;
  const Limit l = Generous();
  store = MakeStore(kManyKeys);
  for (const auto& k : Keys(kManyKeys)) store->AcquireAt(k, l, 1, 1);
  order = Order(zipf);
  char keys[kGroup][16];
  AcquireItem items[kGroup];
  Decision out[kGroup];
  for (size_t j = 0; j < kGroup; ++j) items[j] = {std::string_view(keys[j], 16), &l, 1};
  size_t i = 0, n = 0;
  int64_t now = 2;
  for (auto _ : state) {
    if (n++ % kGroup != 0) continue;
    for (size_t j = 0; j < kGroup; ++j) KeyOf(order[i++ & (order.size() - 1)], keys[j]);
    benchmark::DoNotOptimize(store->AcquireEachAt(items, out, now += kGroup * kTick));
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_ManyKeysEach, uniform_1M_groups_of_16, false);
BENCHMARK_CAPTURE(BM_ManyKeysEach, zipf_1M_groups_of_16, true);

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
