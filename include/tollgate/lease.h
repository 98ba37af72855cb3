// Leases: concurrency limits ("at most N requests in flight per key").
//
// A rate limit counts what started in a period; a concurrency limit counts
// what has started and not yet finished. A store holds, per key, the set of
// live leases, each an (id, expiry) pair:
//  - AcquireLease admits the caller when fewer than max_in_flight leases are
//    live, records a new lease that expires lease_time from now, and returns
//    its id; otherwise it denies and records nothing.
//  - ReleaseLease(key, id) removes that lease; releasing an unknown or
//    expired id is a no-op (so a release is idempotent and a late release of
//    a lease that already expired never frees someone else's slot).
//  - A lease never released (its holder crashed, hung or lost the id) stops
//    counting at its expiry: the slot comes back within lease_time.
// Exactness: the count check and the insert are one atomic step on every
// store (a shard mutex in LocalStore, one Lua script in Redis), so no
// interleaving ever admits more than max_in_flight live leases.
//
// Thread safety: LeaseLimit is immutable after Create(); share freely.
#ifndef TOLLGATE_LEASE_H_
#define TOLLGATE_LEASE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/failure_mode.h"
#include "tollgate/status.h"

namespace tollgate {

class LeaseLimit {
 public:
  // Bounds memory per key (a Redis sorted set of this many members is ~100 KB
  // per 1000) and keeps every count exact in Lua doubles.
  static constexpr int64_t kMaxInFlight = int64_t{1} << 16;
  static constexpr int64_t kMinLeaseNs = 1'000'000;                          // 1 ms
  static constexpr int64_t kMaxLeaseNs = 7LL * 24 * 3600 * 1'000'000'000LL;  // a week

  // kInvalidArgument naming the field: "max_in_flight: must be between 1 and
  // 65536 (got 0)", "lease_time: must be between 1ms and 7d (got 0ns)".
  static Result<LeaseLimit> Create(int64_t max_in_flight, Nanos lease_time);

  int64_t max_in_flight() const { return max_in_flight_; }
  int64_t lease_ns() const { return lease_ns_; }

  // The caller's failure mode for this lease, a tag like AcquireItem's (the
  // Enforcer: the rule's failure_mode); empty: the store's default.
  // ResilientStore answers an outage with it; stores that cannot fail ignore it.
  std::optional<FailureMode> failure_mode() const { return failure_mode_; }
  LeaseLimit WithFailureMode(std::optional<FailureMode> mode) const {
    LeaseLimit tagged = *this;
    tagged.failure_mode_ = mode;
    return tagged;
  }

  // "concurrency max_in_flight=20 lease=30s", for logs and explain output.
  std::string ToString() const;

  friend bool operator==(const LeaseLimit&, const LeaseLimit&) = default;

 private:
  LeaseLimit(int64_t max_in_flight, int64_t lease_ns)
      : max_in_flight_(max_in_flight), lease_ns_(lease_ns) {}
  int64_t max_in_flight_;
  int64_t lease_ns_;
  std::optional<FailureMode> failure_mode_;
};

// A lease id: at most kMaxIdLength characters of [0-9a-f]. Opaque to callers;
// unique per key while live. The shipped stores draw 128 bits from a CSPRNG
// (OpenSSL's RAND_bytes, 32 hex digits), so the id is the capability to
// release its lease: no number of ids seen predicts another. A front end that
// hands it to clients binds it to the key it was granted on (release takes both).
inline constexpr size_t kMaxLeaseIdLength = 32;
bool ValidLeaseId(std::string_view id);

struct LeaseDecision {
  bool allowed = false;
  int64_t limit = 0;      // max_in_flight
  int64_t remaining = 0;  // free slots after this decision
  // Denied: until the soonest live lease expires (an upper bound: a release
  // may free a slot earlier). Zero when allowed.
  Nanos retry_after{0};
  // Allowed: the new lease's lifetime (lease_time). Zero when denied.
  Nanos expires_in{0};
  std::string lease_id;  // allowed: the id to release; empty when denied
  // False when a failure mode answered without the backend (ResilientStore
  // fail-open): allowed, no lease held, nothing to release.
  bool enforced = true;
};

}  // namespace tollgate

#endif  // TOLLGATE_LEASE_H_
