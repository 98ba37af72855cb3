// Lease ids (tollgate/lease.h) for every store: 128 bits from OpenSSL's
// RAND_bytes (a CSPRNG, reseeded by OpenSSL, safe across fork), printed as 32
// lowercase hex digits. A lease id is handed to clients inside /v1/decide's
// lease tokens and is the only thing that lets a /v1/release give back a
// slot, so it must not be predictable from any number of ids seen before
// (a counter through a public mix, or a std::mt19937_64, is: issue 29).
//
// Errors: nullopt when RAND_bytes fails (no entropy); the caller refuses the
// acquire rather than hand out a guessable id.
//
// LeaseIdsEqual compares two ids in time that depends only on their lengths,
// for stores that compare a presented id against the ones they hold.
//
// Thread safety: both functions are safe to call concurrently.
#ifndef TOLLGATE_SRC_BASE_LEASE_ID_H_
#define TOLLGATE_SRC_BASE_LEASE_ID_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

inline constexpr size_t kRandomLeaseIdBytes = 16;

std::optional<std::string> RandomLeaseId();
bool LeaseIdsEqual(std::string_view a, std::string_view b);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_BASE_LEASE_ID_H_
