#include "resilient/degraded_limit.h"

#include <algorithm>
#include <cmath>

namespace tollgate::resilient {

Result<Limit> ScaleLimit(const Limit& limit, double share) {
  if (!(share > 0) || share > 1) return InvalidArgument("degrade share must be in (0, 1]");
  LimitSpec spec;
  spec.algorithm = limit.algorithm();
  spec.burst = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(limit.burst()) * share)));
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindow:
    case Algorithm::kSlidingLog:
      // A calendar quota degrades to a share of it on the same calendar.
      spec.calendar = limit.shared_calendar();
      if (spec.calendar == nullptr) spec.window = Nanos(limit.window_ns());
      break;
    case Algorithm::kLeakyBucket:
      spec.max_delay = Nanos(limit.max_delay_ns());
      [[fallthrough]];
    case Algorithm::kTokenBucket:
      spec.rate = std::max(Limit::kMinRate, static_cast<double>(limit.rate_micro()) * share / 1e6);
      break;
  }
  return Limit::Create(spec);
}

}  // namespace tollgate::resilient
