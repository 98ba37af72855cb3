// ScaleLimit: the local share of a limit while the primary store is down.
#ifndef TOLLGATE_SRC_RESILIENT_DEGRADED_LIMIT_H_
#define TOLLGATE_SRC_RESILIENT_DEGRADED_LIMIT_H_

#include "tollgate/limit.h"

namespace tollgate::resilient {

// `limit` with its capacity (burst, or quota per window) and its rate scaled by
// `share` (0 < share <= 1), both rounded down, the capacity to at least 1 token
// and the rate to at least Limit::kMinRate. Windows and max_delay are kept.
// kInvalidArgument only if the scaled limit cannot be represented.
Result<Limit> ScaleLimit(const Limit& limit, double share);

}  // namespace tollgate::resilient

#endif  // TOLLGATE_SRC_RESILIENT_DEGRADED_LIMIT_H_
