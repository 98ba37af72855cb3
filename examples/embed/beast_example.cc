// tollgate in front of a Boost.Beast handler. A real server would call
// `limited(req, peer_ip)` from its session after http::read; here the requests
// are built in memory so the example runs anywhere. Exits 0 on 200 200 429.
#include <tollgate/local_store.h>
#include <tollgate/middleware/beast.h>
#include <tollgate/policy.h>
#include <boost/beast/http.hpp>
#include <cstdio>

namespace http = boost::beast::http;

int main() {
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": [{
      "name": "per-ip", "limit_keys": ["ip:address/64"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 1, "burst": 2}}]})");
  auto store = tollgate::LocalStore::Create({.max_keys = 100000});
  if (!policies.ok() || !store.ok()) return 1;
  auto enforcer =
      tollgate::Enforcer::Create(*policies, store->get(), &tollgate::SystemClock::Instance());
  if (!enforcer.ok()) return 1;

  // Your handler; authentication would live here, after the limiter.
  auto handle = [](const http::request<http::string_body>& req) {
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/plain");
    res.body() = "hello\n";
    res.prepare_payload();
    return res;
  };
  auto limited = tollgate::middleware::BeastRateLimited(**enforcer, handle);

  unsigned statuses[3] = {};
  for (unsigned& status : statuses) {
    http::request<http::string_body> req{http::verb::get, "/hello", 11};
    auto res = limited(req, "198.51.100.7");
    status = res.result_int();
    std::printf("GET /hello -> %u RateLimit: %s\n", status, std::string(res["RateLimit"]).c_str());
  }
  const bool ok = statuses[0] == 200 && statuses[1] == 200 && statuses[2] == 429;
  std::printf(ok ? "beast example: ok\n" : "beast example: UNEXPECTED\n");
  return ok ? 0 : 1;
}
