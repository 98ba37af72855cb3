// Test helper: the Enforcer a standalone Envoy decider decides on (the
// decider creates none): over an empty policy, since every Envoy item names
// its own rule (ExplicitItem), on `store` and `clock`. The caller owns it; it
// must outlive the decider (or RlsServer) and the readers of its counters.
#ifndef TOLLGATE_TESTS_RLS_STANDALONE_ENFORCER_H_
#define TOLLGATE_TESTS_RLS_STANDALONE_ENFORCER_H_

#include <memory>

#include "tollgate/clock.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate::rls {

inline Result<std::unique_ptr<Enforcer>> StandaloneEnforcer(Store* store, const Clock* clock) {
  auto policies = PolicyStore::FromText(R"({"rules": []})", clock);
  if (!policies.ok()) return policies.status();
  return Enforcer::Create(std::move(policies).value(), store, clock);
}

}  // namespace tollgate::rls

#endif  // TOLLGATE_TESTS_RLS_STANDALONE_ENFORCER_H_
