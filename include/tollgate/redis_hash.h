// Reading a whole Redis hash safely, through a command function.
//
// ScanRedisHash reads a hash with HSCAN pages (never HGETALL, whose one reply
// would be as large as the hash) through a RedisCommand: the store's
// RedisStore::Command, or the cluster's routed by the hash's key. Every reply
// is hostile until checked: a reply that is not [cursor, [field, value, ...]]
// of strings, a cursor that is not a number, an odd item count, too many
// fields, an oversized field or value, or a cursor that never comes back to 0
// within max_pages is an error (kInvalidArgument, or kUnavailable for the
// endless cursor), never a partial result. HSCAN may return a field twice:
// later copies are ignored. A missing key reads as an empty hash.
//
// Users: Redis tenant tables (server/tenant_hash.h) and the fleet's rollback
// guards (tollgate/rollback_fleet.h).
//
// Thread safety: stateless; `command` is called on the calling thread, which
// it blocks for one round trip a page.
#ifndef TOLLGATE_REDIS_HASH_H_
#define TOLLGATE_REDIS_HASH_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tollgate/redis_store.h"
#include "tollgate/status.h"

namespace tollgate {

// One Redis command (argv) and its reply; a failed call is its Status, an
// error reply a reply of Type::kError.
using RedisCommand = std::function<Result<RedisReply>(std::vector<std::string> argv)>;

struct HashScanLimits {
  size_t max_entries = 1'000'000;  // distinct fields
  size_t max_field_bytes = 1024;
  size_t max_value_bytes = 128;
  size_t page = 1000;          // HSCAN COUNT
  size_t max_pages = 100'000;  // round trips before giving up on the cursor
};

Status ScanRedisHash(const RedisCommand& command, std::string_view key,
                     std::vector<std::pair<std::string, std::string>>* entries,
                     const HashScanLimits& limits = {});

// "a string", "an integer", "nil", ...: a reply type in an error message.
std::string_view RedisReplyTypeName(RedisReply::Type type);

}  // namespace tollgate

#endif  // TOLLGATE_REDIS_HASH_H_
