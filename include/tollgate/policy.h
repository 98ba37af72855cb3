// Policy: turns a request into decisions, headers and a 429 body.
//
//   Policy::Parse(json)      -> an immutable, validated set of rules
//   PolicyStore              -> the current Policy behind an atomic pointer; Reload()
//   Enforcer::Check(request) -> rules that apply -> (rule, key, cost) items ->
//                               Store::Acquire (all-or-nothing) -> CheckOutcome
//
// The configuration format is documented in docs/configuration.md.
//
// Thread safety: Policy is immutable; PolicyStore and Enforcer are safe to
// share between threads. A reload never disturbs an in-flight Check: it keeps
// the Policy it started with.
// Errors: Parse() returns every validation error with its JSON path; Check()
// never throws, a store failure becomes a CheckOutcome per the failure mode.
#ifndef TOLLGATE_POLICY_H_
#define TOLLGATE_POLICY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/decision.h"
#include "tollgate/request.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate {

// One validation problem: "rules[1].algorithm_config.burst" + "must be >= tokens_per_second (100)".
struct ConfigError {
  std::string path;
  std::string message;
  std::string ToString() const { return path.empty() ? message : path + ": " + message; }
};

class Policy;  // defined in src/policy; opaque to front ends

// Parses and validates a policy document: {"rules": [...]}, a bare array of
// rules, or a single rule object. Returns every error, never just the first.
struct ParsedPolicy {
  std::shared_ptr<const Policy> policy;  // null when errors is non-empty
  std::vector<ConfigError> errors;
};
ParsedPolicy ParsePolicy(std::string_view json_text);
ParsedPolicy ParsePolicyFile(const std::string& path);

// The outcome of one rule for one request.
struct RuleOutcome {
  std::string rule;  // rule name
  std::string key;   // the identity part of the bucket key (never a metric label)
  int64_t cost = 0;
  bool shadow = false;  // decided in shadow mode: counted and logged, never rejects
  Decision decision;
};

struct CheckOutcome {
  enum class Verdict { kAllow, kReject, kUnavailable };
  Verdict verdict = Verdict::kAllow;
  int http_status = 200;             // 200 allow, 429 reject, 503 unavailable (fail-closed)
  bool enforced = true;              // false when a failure mode answered without a store decision
  std::vector<RuleOutcome> rules;    // every rule that applied, in policy order
  int denied_rule = -1;              // index into rules of the rule that denied, or -1
  std::vector<HeaderField> headers;  // to add to the response, allowed or not
  std::string body;                  // application/problem+json when not allowed
  Nanos delay{0};                    // leaky-bucket shaping: wait this long, then proceed
};

}  // namespace tollgate

#endif  // TOLLGATE_POLICY_H_
