// A deterministic Enforcer for the request-level fuzz targets: the policy in
// fuzz/policies/request.json (every source kind, operator and algorithm),
// HS256 JWTs with the key "fuzz-secret", trusted proxies 10.0.0.0/8 and ::1,
// on a small LocalStore under a ManualClock. Fresh per input (FreshEnforcer),
// so one input's buckets never decide another's outcome: libFuzzer needs a
// target that answers an input the same way every time.
//
// CheckOutcome asserts what every outcome sent to a client must hold: the
// status matches the verdict, header names are tokens and values carry no
// CR, LF or NUL (no response splitting from request data), a body is JSON.
#ifndef TOLLGATE_FUZZ_FUZZ_ENFORCER_H_
#define TOLLGATE_FUZZ_FUZZ_ENFORCER_H_

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"

namespace tollgate::fuzz {

inline std::string ReadSourceFile(const std::string& relative) {
  const std::string path = SourcePath(relative);
  std::ifstream in(path, std::ios::binary);
  FUZZ_CHECK(in.good(), "cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::shared_ptr<PolicyStore> FuzzPolicies() {
  static const std::shared_ptr<PolicyStore> policies = [] {
    auto store = PolicyStore::FromText(ReadSourceFile("fuzz/policies/request.json"));
    FUZZ_CHECK(store.ok(), "fuzz/policies/request.json: " + store.status().ToString());
    return *store;
  }();
  return policies;
}

struct FuzzEnforcer {
  ManualClock clock;
  std::unique_ptr<LocalStore> store;
  std::unique_ptr<Enforcer> enforcer;
};

// A LocalStore small enough to create per input (256 keys, 4 shards).
inline std::unique_ptr<LocalStore> SmallStore(const Clock* clock) {
  LocalStoreOptions store_options;
  store_options.max_keys = 256;
  store_options.shards = 4;
  store_options.clock = clock;
  auto store = LocalStore::Create(store_options);
  FUZZ_CHECK(store.ok(), store.status().ToString());
  return std::move(*store);
}

// `policies`: fuzz/policies/request.json unless given.
inline std::unique_ptr<FuzzEnforcer> FreshEnforcer(std::shared_ptr<PolicyStore> policies = {}) {
  auto env = std::make_unique<FuzzEnforcer>();
  env->store = SmallStore(&env->clock);
  EnforcerOptions options;
  options.trusted_proxies = {"10.0.0.0/8", "::1"};
  options.jwt.hs256_secret = "fuzz-secret";
  options.log = [](std::string_view) {};
  options.releases_leases = true;  // release_body gives leases back; others drop them with env
  auto enforcer = Enforcer::Create(policies ? std::move(policies) : FuzzPolicies(),
                                   env->store.get(), &env->clock, options);
  FUZZ_CHECK(enforcer.ok(), enforcer.status().ToString());
  env->enforcer = std::move(*enforcer);
  return env;
}

inline bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

inline bool IsFieldValue(std::string_view s) {
  for (unsigned char c : s) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

inline void CheckOutcome(const CheckOutcome& o) {
  switch (o.verdict) {
    case CheckOutcome::Verdict::kAllow:
      FUZZ_CHECK(o.http_status == 200, "allowed with status " + std::to_string(o.http_status));
      break;
    case CheckOutcome::Verdict::kReject:
      // 429 over a limit, 403 from a deny rule (with a problem body).
      FUZZ_CHECK(o.http_status == 429 || o.http_status == 403,
                 "rejected with status " + std::to_string(o.http_status));
      break;
    case CheckOutcome::Verdict::kUnavailable:
      FUZZ_CHECK(o.http_status == 503, "unavailable with status " + std::to_string(o.http_status));
      break;
  }
  for (const HeaderField& h : o.headers) {
    FUZZ_CHECK(IsToken(h.name), "header name is not a token: " + Quote(h.name));
    FUZZ_CHECK(IsFieldValue(h.value),
               "header value splits the response: " + Quote(h.name) + ": " + Quote(h.value));
  }
  if (!o.body.empty()) {
    FUZZ_CHECK(nlohmann::json::accept(o.body), "body is not JSON: " + Quote(o.body));
  }
  FUZZ_CHECK(o.retry_after_seconds >= 0, "negative Retry-After");
  FUZZ_CHECK(o.delay.count() >= 0, "negative delay");
  for (const RuleOutcome& r : o.rules) {
    FUZZ_CHECK(r.limit.has_value(), "a rule outcome without its limit: " + r.rule);
    FUZZ_CHECK(r.cost >= 0, "negative cost in " + r.rule);
  }
}

}  // namespace tollgate::fuzz

#endif  // TOLLGATE_FUZZ_FUZZ_ENFORCER_H_
