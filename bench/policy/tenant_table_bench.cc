// Tenant tables at scale (issue 18): load time, bytes per entry and lookup
// time of a 1,000,000-entry table (TenantTable, src/policy/value_sets.h), and
// a CIDR set lookup. Figures go to docs/bench/policy.md.
//   build/bench/policy/tenant_table_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
// Counters: bytes_per_entry (TenantTable::MemoryBytes() / entries, the
// table's own allocations) and entries.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "policy/policy_impl.h"
#include "policy/value_sets.h"

namespace tollgate {
namespace {

// "identity,count,period,rps,burst" with `n` API-key-like identities
// ("tk_" + 20 hex digits) on 8 plans, half quotas, half rates.
std::string TableText(size_t n) {
  std::string text = "identity,count,period,rps,burst\n";
  text.reserve(n * 40);
  char id[32];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(id, sizeof(id), "tk_%020zx",
                  static_cast<size_t>(i * 0x9e3779b97f4a7c15ULL % 0xffffffffffffULL));
    text += id;
    if (i % 2) {
      text += "," + std::to_string(1000 * (1 + i % 4)) + ",1h,,\n";
    } else {
      text +=
          ",,," + std::to_string(10 * (1 + i % 4)) + "," + std::to_string(20 * (1 + i % 4)) + "\n";
    }
  }
  return text;
}

const std::string& Text1M() {
  static const std::string text = TableText(1'000'000);
  return text;
}

void BM_TenantTableLoad(benchmark::State& state) {
  const std::string text = TableText(static_cast<size_t>(state.range(0)));
  size_t bytes = 0, entries = 0;
  for (auto _ : state) {
    std::vector<LineError> errors;
    auto table = TenantTable::Parse(text, Algorithm::kTokenBucket, &errors);
    if (!table) state.SkipWithError("parse failed");
    bytes = table ? table->MemoryBytes() : 0;
    entries = table ? table->size() : 0;
    benchmark::DoNotOptimize(table);
  }
  state.counters["entries"] = static_cast<double>(entries);
  state.counters["bytes_per_entry"] =
      entries ? static_cast<double>(bytes) / static_cast<double>(entries) : 0;
  state.counters["file_bytes_per_entry"] =
      entries ? static_cast<double>(text.size()) / static_cast<double>(entries) : 0;
}
BENCHMARK(BM_TenantTableLoad)->Arg(1000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// The same table from a Redis hash's entries (TenantTable::FromEntries: what
// tollgated builds after HSCAN), values "count=N,period=1h" / "rps=R,burst=B".
void BM_TenantTableFromEntries(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(n);
  char id[32];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(id, sizeof(id), "tk_%020zx",
                  static_cast<size_t>(i * 0x9e3779b97f4a7c15ULL % 0xffffffffffffULL));
    entries.emplace_back(id, i % 2 ? "count=" + std::to_string(1000 * (1 + i % 4)) + ",period=1h"
                                   : "rps=" + std::to_string(10 * (1 + i % 4)) +
                                         ",burst=" + std::to_string(20 * (1 + i % 4)));
  }
  size_t bytes = 0, size = 0;
  for (auto _ : state) {
    std::vector<std::string> errors;
    auto table = TenantTable::FromEntries(entries, Algorithm::kTokenBucket, &errors);
    if (!table) state.SkipWithError("build failed");
    bytes = table ? table->MemoryBytes() : 0;
    size = table ? table->size() : 0;
    benchmark::DoNotOptimize(table);
  }
  state.counters["entries"] = static_cast<double>(size);
  state.counters["bytes_per_entry"] =
      size ? static_cast<double>(bytes) / static_cast<double>(size) : 0;
}
BENCHMARK(BM_TenantTableFromEntries)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// A lookup of a present identity (normalised as a request's would be), or of
// an absent one (the common case for keys on the rule's default limit).
void BM_TenantTableLookup(benchmark::State& state) {
  std::vector<LineError> errors;
  static const auto table = TenantTable::Parse(Text1M(), Algorithm::kTokenBucket, &errors);
  const bool present = state.range(0) == 1;
  std::vector<std::string> keys;
  char id[32];
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4096; ++i) {
    const size_t n = rng() % 1'000'000;
    std::snprintf(id, sizeof(id), present ? "tk_%020zx" : "zz_%020zx",
                  static_cast<size_t>(n * 0x9e3779b97f4a7c15ULL % 0xffffffffffffULL));
    keys.emplace_back(id);
  }
  size_t i = 0, found = 0;
  for (auto _ : state) {
    const Limit* l = table->Find(keys[i++ & 4095]);
    found += l != nullptr;
    benchmark::DoNotOptimize(l);
  }
  if (present && found != static_cast<size_t>(state.iterations())) state.SkipWithError("missed");
  state.counters["entries"] = static_cast<double>(table->size());
}
BENCHMARK(BM_TenantTableLookup)->Arg(1)->ArgName("present")->Arg(0);

// A CIDR set of n random /24s: one lookup (binary search over merged ranges).
void BM_CidrSetLookup(benchmark::State& state) {
  std::mt19937 rng(11);
  std::vector<std::string> cidrs;
  for (int64_t i = 0; i < state.range(0); ++i) {
    const uint32_t a = rng();
    cidrs.push_back(std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
                    std::to_string((a >> 8) & 255) + ".0/24");
  }
  auto set = CidrSet::Build(cidrs, [](size_t, const std::string&) {});
  std::vector<IpAddress> ips;
  for (int i = 0; i < 1024; ++i) {
    const uint32_t a = rng();
    ips.push_back(*IpAddress::Parse(std::to_string(a >> 24) + "." +
                                    std::to_string((a >> 16) & 255) + "." +
                                    std::to_string((a >> 8) & 255) + ".1"));
  }
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(set->Contains(ips[i++ & 1023]));
}
BENCHMARK(BM_CidrSetLookup)->Arg(16)->Arg(100'000);

}  // namespace
}  // namespace tollgate

BENCHMARK_MAIN();
