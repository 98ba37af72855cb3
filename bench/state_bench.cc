// The cost of LocalStore::Save (issue 36) on decisions: decisions/s on N
// buckets with and without a save running beside them in a loop (the worst
// case: tollgated saves once per store.state_save_interval_ms, 30 s by
// default), and a save's own time and size. Figures: docs/benchmarks.md.
//   build/bench/state_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <ostream>
#include <random>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "tollgate/local_store.h"

namespace tollgate {
namespace {

// Counts and discards: the save's scan and encoding, not a disk, is measured.
class NullBuf : public std::streambuf {
 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
  int overflow(int c) override { return c; }
};

// One an hour, burst 1000: a decided bucket stays below full for an hour, so
// a save writes every bucket filled.
Limit Hourly() {
  LimitSpec s;
  s.count = 1;
  s.period = std::chrono::hours(1);
  s.burst = 1000;
  return *Limit::Create(s);
}

std::string KeyOf(size_t i) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "rule\x1ftb\x1fk%011zu", i);
  return buf;
}

struct Filled {
  std::unique_ptr<LocalStore> store;
  std::vector<std::string> keys;
};

Filled Fill(size_t n) {
  LocalStoreOptions o;
  o.max_keys = n + n / 4;
  Filled f{std::move(*LocalStore::Create(o)), {}};
  const Limit l = Hourly();
  for (size_t i = 0; i < n; ++i) {
    f.keys.push_back(KeyOf(i));
    f.store->Acquire(f.keys.back(), l, 1);
  }
  return f;
}

// state.range(0): buckets; state.range(1): 1 = a save loops beside the decisions.
void BM_DecideWhileSaving(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const bool saving = state.range(1) != 0;
  Filled f = Fill(n);
  const Limit l = Hourly();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> saves{0};
  std::thread saver;
  if (saving) {
    saver = std::thread([&] {
      NullBuf buf;
      std::ostream out(&buf);
      while (!stop.load(std::memory_order_relaxed)) {
        (void)f.store->Save(out);
        saves.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::mt19937_64 rng(7);
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.store->Acquire(f.keys[rng() % n], l, 1));
  }
  stop = true;
  if (saver.joinable()) saver.join();
  state.SetItemsProcessed(state.iterations());
  state.counters["saves"] = static_cast<double>(saves.load());
}
BENCHMARK(BM_DecideWhileSaving)
    ->ArgsProduct({{100'000, 1'000'000}, {0, 1}})
    ->ArgNames({"buckets", "saving"})
    ->UseRealTime();

// One save of N buckets into memory: its time, size and entries.
void BM_Save(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  Filled f = Fill(n);
  LocalStateSaved saved;
  for (auto _ : state) {
    NullBuf buf;
    std::ostream out(&buf);
    saved = *f.store->Save(out);
  }
  state.counters["bytes"] = static_cast<double>(saved.bytes);
  state.counters["entries"] = static_cast<double>(saved.buckets);
}
BENCHMARK(BM_Save)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tollgate

BENCHMARK_MAIN();
