#include "tollgate/lease.h"

#include <string>

#include "tollgate/period.h"

namespace tollgate {

Result<LeaseLimit> LeaseLimit::Create(int64_t max_in_flight, Nanos lease_time) {
  if (max_in_flight < 1 || max_in_flight > kMaxInFlight) {
    return InvalidArgument("max_in_flight: must be between 1 and " + std::to_string(kMaxInFlight) +
                           " (got " + std::to_string(max_in_flight) + ")");
  }
  const int64_t ns = lease_time.count();
  if (ns < kMinLeaseNs || ns > kMaxLeaseNs) {
    return InvalidArgument("lease_time: must be between 1ms and 7d (got " + std::to_string(ns) +
                           "ns)");
  }
  return LeaseLimit(max_in_flight, ns);
}

std::string LeaseLimit::ToString() const {
  return "concurrency max_in_flight=" + std::to_string(max_in_flight_) +
         " lease=" + FormatPeriod(Nanos(lease_ns_));
}

bool ValidLeaseId(std::string_view id) {
  if (id.empty() || id.size() > kMaxLeaseIdLength) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace tollgate
