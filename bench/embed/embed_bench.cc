// Embedding costs. Figures go to docs/bench/embed.md.
//   build/bench/embed/embed_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "tollgate/client.h"
#include "tollgate/limiter.h"
#include "tollgate/local_store.h"
#include "tollgate/middleware/httplib.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

LimiterOptions Huge() {
  LimiterOptions o;
  o.limit = {.rate = 1e9, .burst = 1'000'000'000};
  o.local.max_keys = 1 << 20;
  return o;
}

// Limiter::TryAcquire on one key: key prefixing + LocalStore::Acquire.
void BM_LimiterTryAcquireHotKey(benchmark::State& state) {
  auto limiter = std::move(*Limiter::Create(Huge()));
  for (auto _ : state) benchmark::DoNotOptimize(limiter->TryAcquire("user-42"));
}
BENCHMARK(BM_LimiterTryAcquireHotKey);

// The same store call without the Limiter, for the overhead.
void BM_LocalStoreAcquireHotKey(benchmark::State& state) {
  LocalStoreOptions o;
  o.max_keys = 1 << 20;
  auto store = std::move(*LocalStore::Create(o));
  const Limit limit = *Limit::Create({.rate = 1e9, .burst = 1'000'000'000});
  for (auto _ : state) benchmark::DoNotOptimize(store->Acquire("limiter/user-42", limit, 1));
}
BENCHMARK(BM_LocalStoreAcquireHotKey);

// 100k distinct keys, round robin.
void BM_LimiterTryAcquireManyKeys(benchmark::State& state) {
  auto limiter = std::move(*Limiter::Create(Huge()));
  std::vector<std::string> keys;
  for (int i = 0; i < 100'000; ++i) keys.push_back("user-" + std::to_string(i));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->TryAcquire(keys[i]));
    if (++i == keys.size()) i = 0;
  }
}
BENCHMARK(BM_LimiterTryAcquireManyKeys);

void BM_ParseRetryAfterHttpDate(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", 0));
}
BENCHMARK(BM_ParseRetryAfterHttpDate);

void BM_ParseRateLimitDraft11(benchmark::State& state) {
  const std::vector<HeaderPair> headers = {
      {"Content-Type", "application/json"},
      {"RateLimit-Policy", R"("permin";q=50;w=60, "perhr";q=1000;w=3600)"},
      {"RateLimit", R"("permin";r=3;t=20, "perhr";r=700;t=1800)"},
      {"Retry-After", "7"}};
  for (auto _ : state) benchmark::DoNotOptimize(ParseRateLimitHeaders(headers, 0));
}
BENCHMARK(BM_ParseRateLimitDraft11);

constexpr const char* kPolicy = R"({"name": "per-key", "limit_keys": ["header:x-api-key"],
    "algorithm_config": {"rps": 1e9, "burst": 1000000000}})";

struct PolicySetup {
  std::unique_ptr<LocalStore> store;
  std::unique_ptr<Enforcer> enforcer;
  PolicySetup() {
    LocalStoreOptions o;
    o.max_keys = 1 << 16;
    store = std::move(*LocalStore::Create(o));
    enforcer = std::move(
        *Enforcer::Create(*PolicyStore::FromText(kPolicy), store.get(), &SystemClock::Instance()));
  }
};

httplib::Request MakeRequest() {
  httplib::Request req;
  req.method = "GET";
  req.target = "/api/items?page=2";
  req.path = "/api/items";
  req.remote_addr = "203.0.113.7";
  req.headers = {{"Host", "api.example.com"},
                 {"User-Agent", "bench/1.0"},
                 {"Accept", "*/*"},
                 {"X-Api-Key", "k1"}};
  return req;
}

// The httplib adapter: RequestView from httplib::Request, Check, headers onto the Response.
void BM_HttplibAdapter(benchmark::State& state) {
  PolicySetup s;
  const httplib::Request req = MakeRequest();
  for (auto _ : state) {
    httplib::Response res;
    benchmark::DoNotOptimize(middleware::HandleHttplib(*s.enforcer, req, res));
  }
}
BENCHMARK(BM_HttplibAdapter);

// Enforcer::Check on the equivalent RequestView, for the adapter's overhead.
void BM_EnforcerCheckDirect(benchmark::State& state) {
  PolicySetup s;
  const HeaderPair headers[] = {{"Host", "api.example.com"},
                                {"User-Agent", "bench/1.0"},
                                {"Accept", "*/*"},
                                {"X-Api-Key", "k1"}};
  RequestView view{.method = "GET",
                   .path = "/api/items",
                   .query = "page=2",
                   .peer_address = "203.0.113.7",
                   .headers = headers};
  for (auto _ : state) benchmark::DoNotOptimize(s.enforcer->Check(view));
}
BENCHMARK(BM_EnforcerCheckDirect);

}  // namespace
}  // namespace tollgate

BENCHMARK_MAIN();
