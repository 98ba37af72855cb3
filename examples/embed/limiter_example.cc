// Direct use of tollgate: a Limiter per API key, and the policy Enforcer for
// request-level decisions. Exits 0 when everything behaved as documented.
#include <tollgate/client.h>
#include <tollgate/limiter.h>
#include <tollgate/local_store.h>
#include <tollgate/policy.h>
#include <cstdio>

int main() {
  // 1. A Limiter: 1 token per second, bursts of 10, state in this process.
  auto limiter = tollgate::Limiter::Create({.limit = {.rate = 1, .burst = 10}, .name = "api"});
  if (!limiter.ok()) {
    std::fprintf(stderr, "limiter: %s\n", limiter.status().ToString().c_str());
    return 1;
  }
  int allowed = 0;
  tollgate::Decision last;
  for (int i = 0; i < 15; ++i) {
    if ((*limiter)->TryAcquire("user-42", 1, &last)) ++allowed;
  }
  std::printf("limiter: %d of 15 allowed, retry after %lld ms\n", allowed,
              static_cast<long long>(last.retry_after.count() / 1'000'000));

  // 2. A policy decides whole requests: rules, keys from headers, RateLimit headers.
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": [{
      "name": "per-key", "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 1, "burst": 2}}]})");
  if (!policies.ok()) {
    std::fprintf(stderr, "policy: %s\n", policies.status().ToString().c_str());
    return 1;
  }
  auto store = tollgate::LocalStore::Create({.max_keys = 10000});
  auto enforcer =
      tollgate::Enforcer::Create(*policies, store->get(), &tollgate::SystemClock::Instance());
  if (!store.ok() || !enforcer.ok()) return 1;
  const tollgate::HeaderPair headers[] = {{"X-Api-Key", "k1"}};
  tollgate::RequestView request{
      .method = "GET", .path = "/items", .peer_address = "127.0.0.1", .headers = headers};
  tollgate::CheckOutcome outcome;
  for (int i = 0; i < 3; ++i) outcome = (*enforcer)->Check(request);
  std::printf("policy: third request -> %d\n", outcome.http_status);

  // 3. The client side reads the same headers back.
  std::vector<tollgate::HeaderPair> response;
  for (const auto& h : outcome.headers) response.emplace_back(h.name, h.value);
  const auto info =
      tollgate::ParseRateLimitHeaders(response, tollgate::SystemClock::Instance().WallNow());
  std::printf(
      "client: %s, retry after %lld s\n",
      std::string(tollgate::RateLimitSourceName(info.source)).c_str(),
      static_cast<long long>(info.retry_after ? info.retry_after->count() / 1'000'000'000 : -1));

  const bool ok =
      allowed == 10 && !last.allowed && outcome.http_status == 429 && info.retry_after.has_value();
  std::printf(ok ? "embed example: ok\n" : "embed example: UNEXPECTED\n");
  return ok ? 0 : 1;
}
