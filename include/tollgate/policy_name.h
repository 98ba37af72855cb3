// The names an operator gives in a policy (rule names, tier groups): 1 to 64
// characters of A-Z a-z 0-9 - _ . : so they are safe as metric labels, log
// fields, Redis hash fields and URL query values without escaping. Checked
// where a policy is parsed and again where such a name comes back from
// outside (a Redis record naming a rule, an admin request's ?rule=).
//
// Thread safety: pure functions.
#ifndef TOLLGATE_POLICY_NAME_H_
#define TOLLGATE_POLICY_NAME_H_

#include <cstddef>
#include <string_view>

namespace tollgate {

inline constexpr size_t kMaxPolicyNameLength = 64;

constexpr bool IsPolicyName(std::string_view name) {
  if (name.empty() || name.size() > kMaxPolicyNameLength) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tollgate

#endif  // TOLLGATE_POLICY_NAME_H_
