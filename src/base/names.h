// Policy names under their in-tree name: public in tollgate/policy_name.h,
// which states the rule; src/ names them base::IsPolicyName and
// base::kMaxNameLength.
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_BASE_NAMES_H_
#define TOLLGATE_SRC_BASE_NAMES_H_

#include <cstddef>

#include "tollgate/policy_name.h"

namespace tollgate::base {

inline constexpr size_t kMaxNameLength = kMaxPolicyNameLength;
using tollgate::IsPolicyName;

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_NAMES_H_
