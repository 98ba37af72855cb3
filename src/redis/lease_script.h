// Concurrency leases on Redis (see tollgate/lease.h): one sorted set per key,
// members are lease ids, scores their expiry in microseconds. Shared by
// RedisStore and RedisClusterStore; the stores only route the calls.
//
// Layout: the key's Redis key (as for its bucket) + "|cc". A single key, so a
// cluster routes it by the bucket key's hash tag. The set expires when its
// latest lease would, so idle keys vanish.
//
// Time: Redis TIME (microseconds) unless the caller passes its own wall clock
// (use_client_clock), as the bucket script does.
//
// Ids: 128 bits from a CSPRNG (base/lease_id.h), drawn per acquire.
//
// Thread safety: stateless; safe to call concurrently.
#ifndef TOLLGATE_SRC_REDIS_LEASE_SCRIPT_H_
#define TOLLGATE_SRC_REDIS_LEASE_SCRIPT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/lease.h"
#include "tollgate/redis_store.h"

namespace tollgate::redis {

// The suffix that turns a bucket's Redis key into its lease set's key.
inline constexpr std::string_view kLeaseKeySuffix = "|cc";

// EVAL argv that acquires a lease on `redis_key` (the lease set's key).
// `now_us`: the caller's wall clock in microseconds, or nullopt for Redis TIME.
std::vector<std::string> AcquireLeaseArgv(const std::string& redis_key, const LeaseLimit& limit,
                                          const std::string& lease_id,
                                          std::optional<int64_t> now_us);
// EVAL argv that releases `lease_id`; the reply is 1 when it was live.
std::vector<std::string> ReleaseLeaseArgv(const std::string& redis_key, std::string_view lease_id,
                                          std::optional<int64_t> now_us);

// The acquire script's reply {allowed, live, retry_after_us} as a decision;
// kServer for an error reply, kScript for any other shape.
Result<LeaseDecision> ParseAcquireLeaseReply(Result<RedisReply> reply, const LeaseLimit& limit,
                                             std::string lease_id);

// A store's CommandAsync, bound to the routing of the lease set's key: sends
// argv and calls back exactly once with the reply.
using LeaseCommand =
    std::function<void(std::vector<std::string>, std::function<void(Result<RedisReply>)>)>;

// The whole acquire / release for a store: draws the id (kInternal, before
// any I/O, when no random id could be drawn), picks the clock
// (options.use_client_clock), runs the script through `command`, parses the
// reply, calls `done` exactly once (on the store's thread, or inline).
// Release refuses a malformed id (kInvalidArgument) before any I/O.
void AcquireLease(const LeaseCommand& command, const std::string& redis_key,
                  const LeaseLimit& limit, const RedisOptions& options, Store::LeaseCallback done);
void ReleaseLease(const LeaseCommand& command, const std::string& redis_key,
                  std::string_view lease_id, const RedisOptions& options,
                  Store::ReleaseCallback done);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_LEASE_SCRIPT_H_
