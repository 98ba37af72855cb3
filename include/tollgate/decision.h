// Decision: the answer to "may this cost pass now?", the same fields for
// every algorithm and every store.
#ifndef TOLLGATE_DECISION_H_
#define TOLLGATE_DECISION_H_

#include <cstdint>

#include "tollgate/clock.h"

namespace tollgate {

struct Decision {
  // Retry-after value meaning "this cost can never be allowed" (cost > burst).
  static constexpr Nanos kNever = Nanos::max();

  bool allowed = false;
  // The capacity reported in headers: burst (buckets) or quota per window.
  int64_t limit = 0;
  // Whole tokens left after this decision (after charging, when allowed).
  int64_t remaining = 0;
  // Zero when allowed; otherwise the exact wait until this cost would fit, or kNever.
  Nanos retry_after{0};
  // Until the bucket is full again / the window resets.
  Nanos reset_after{0};
  // Leaky-bucket shaper only: allowed, but proceed only after this delay.
  Nanos delay{0};

  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace tollgate

#endif  // TOLLGATE_DECISION_H_
