// Fuzz target: the policy document (src/policy/parse.cc ParsePolicy), then a
// few requests decided under the policy it yields.
//
// Input: the policy JSON (files and POST /v1/reload bodies are operator input,
// but a policy parser must never crash or hang on any bytes: the CLI's
// check-config and reload run it on whatever they are given).
// Properties: errors xor a policy; every error has a message; a parsed
// policy summarises, and deciding and explaining requests under it hold
// CheckOutcome's invariants.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_enforcer.h"
#include "fuzz_input.h"
#include "tollgate/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Files named by the policy (value sets, tenant tables) are not read: the
  // fuzzer must not depend on the machine's files (the tenant_table target
  // fuzzes the table format).
  tollgate::ParsedPolicy parsed =
      tollgate::ParsePolicy(text, tollgate::PolicyParseOptions{.base_dir = "", .files = false});
  FUZZ_CHECK((parsed.policy == nullptr) == !parsed.errors.empty(),
             "a policy and errors, or neither");
  for (const auto& e : parsed.errors) {
    FUZZ_CHECK(!e.message.empty(), "an error without a message at " + e.path);
    FUZZ_CHECK(e.ToString().find('\n') == std::string::npos, "an error spanning lines");
  }
  if (!parsed.policy) return 0;
  const auto rules = tollgate::SummarizePolicy(*parsed.policy);
  for (const auto& r : rules) FUZZ_CHECK(!r.name.empty(), "a rule without a name");
  // Warnings name a later rule than the one they blame, never the first.
  for (const auto& w : tollgate::PolicyWarnings(*parsed.policy)) {
    FUZZ_CHECK(w.path.rfind("rules[", 0) == 0 && w.path != "rules[0]" && !w.message.empty(),
               "a warning at " + w.path);
  }

  auto env = tollgate::fuzz::FreshEnforcer(tollgate::PolicyStore::FromPolicy(parsed.policy));
  tollgate::Enforcer& enforcer = *env->enforcer;

  const std::vector<std::pair<std::string_view, std::string_view>> header_sets[] = {
      {},
      {{"x-api-key", "k1"}, {"x-request-weight", "3"}, {"authorization", "Bearer a.b.c"}},
  };
  for (const auto& set : header_sets) {
    std::vector<tollgate::HeaderPair> headers(set.begin(), set.end());
    // Both address families, so CIDR conditions are decided both ways.
    for (std::string_view peer : {"203.0.113.9", "2001:db8::7"}) {
      tollgate::RequestView view{"GET", "/api/v1/items", "tenant=t1&cost=2", peer, headers};
      for (int i = 0; i < 3; ++i) tollgate::fuzz::CheckOutcome(enforcer.Check(view));
      tollgate::fuzz::CheckOutcome(enforcer.Explain(view));
    }
  }
  for (const auto& r : rules) {
    tollgate::ExplicitItem item;
    item.rule = r.name;
    item.key = "k1";
    const tollgate::ExplicitItem items[] = {item};
    auto outcome = enforcer.CheckItems(items);
    if (outcome.ok()) tollgate::fuzz::CheckOutcome(*outcome);
  }
  return 0;
}
