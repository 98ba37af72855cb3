// Fuzz target: the body of POST /v1/release (server/handlers.cc
// ParseReleaseBody with Enforcer::ParseLeaseToken), then the release it asks
// for on a LocalStore holding a live lease of fuzz/policies/request.json's
// concurrency rule.
//
// Input: the JSON body (the session bounds it by max_body_bytes, 64 KiB).
// Properties: a body is either refused with errors, each with a message and
// rendered as one well-framed problem response, or every lease it names is
// at most kMaxReleaseLeases tokens, each of which is a concurrency rule's
// lease set (the key holds exactly one 0x1F, right after the rule name, and
// the rule is the key's prefix) of the policy's one concurrency rule
// ("inflight": no other rule's name, issue 29) and prints back as the token
// it came from.
// Releasing them frees at most one slot per lease and never frees the live
// lease the target took unless a token names its id; a freed lease leaves a
// slot that the next acquire takes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_enforcer.h"
#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/handlers.h"

namespace {

// The one request of this target that takes a lease: rule "inflight", key "k".
tollgate::CheckOutcome TakeLease(tollgate::Enforcer& enforcer) {
  const std::vector<tollgate::HeaderPair> headers = {{"x-api-key", "k"}};
  tollgate::RequestView view;
  view.method = "GET";
  view.path = "/inflight";
  view.peer_address = "198.51.100.7";
  view.headers = headers;
  return enforcer.Check(view);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto env = tollgate::fuzz::FreshEnforcer();
  tollgate::CheckOutcome held = TakeLease(*env->enforcer);
  FUZZ_CHECK(held.allowed() && held.leases.size() == 1, "the first lease was not granted");
  const tollgate::HeldLease live = held.leases.front();

  std::vector<tollgate::HeldLease> leases;
  const auto errors = tollgate::server::ParseReleaseBody(body, *env->enforcer, &leases);
  if (!errors.empty()) {
    for (const auto& e : errors) FUZZ_CHECK(!e.message.empty(), "an error without a message");
    tollgate::fuzz::CheckSerialized(
        tollgate::server::Problem(400, "Invalid release request", "see errors", errors), true,
        false);
    return 0;
  }
  FUZZ_CHECK(!leases.empty() && leases.size() <= tollgate::server::kMaxReleaseLeases,
             "an accepted body outside 1..kMaxReleaseLeases leases");
  bool names_live = false;
  for (const tollgate::HeldLease& lease : leases) {
    const std::string token = tollgate::Enforcer::LeaseToken(lease);
    FUZZ_CHECK(token.size() <= tollgate::Enforcer::kMaxLeaseTokenLength, "a token over the bound");
    auto again = env->enforcer->ParseLeaseToken(token);
    FUZZ_CHECK(
        again.ok() && again->key == lease.key && again->id == lease.id && again->rule == lease.rule,
        "a lease that does not print back as its token");
    FUZZ_CHECK(!lease.rule.empty() && lease.key.compare(0, lease.rule.size(), lease.rule) == 0 &&
                   lease.key[lease.rule.size()] == '\x1f',
               "a lease whose key is not its rule's");
    FUZZ_CHECK(lease.rule.find('\x1f') == std::string::npos, "a rule name with a separator");
    FUZZ_CHECK(lease.rule == "inflight",
               "a lease of a rule that is not the policy's concurrency rule");
    names_live = names_live || (lease.key == live.key && lease.id == live.id);
  }
  int64_t released = 0;
  const tollgate::Status st = env->enforcer->Release(leases);
  (void)st;  // a LocalStore refuses nothing here; what matters is the slot count below
  // One slot of two is held; a second acquire takes the other, a third is
  // admitted only if the body released the live lease.
  tollgate::CheckOutcome second = TakeLease(*env->enforcer);
  FUZZ_CHECK(second.allowed(), "the second of two slots was refused");
  tollgate::CheckOutcome third = TakeLease(*env->enforcer);
  FUZZ_CHECK(third.allowed() == names_live, names_live
                                                ? "releasing the live lease freed no slot"
                                                : "a slot freed without naming the live lease");
  released = names_live ? 1 : 0;
  tollgate::fuzz::CheckSerialized(
      tollgate::server::RenderRelease(released, static_cast<int64_t>(leases.size()) - released),
      true, false);
  return 0;
}
