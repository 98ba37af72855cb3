// ReadTenantHash: a Redis hash of per-identity limits (a policy rule's
// "tenants": {"redis_hash": ...}) read with HSCAN through a command function
// (the store's RedisStore or RedisClusterStore Command), for
// PolicyParseOptions::read_tenant_hash. Each reply is type-checked and
// bounded (TenantHashLimits): a reply that is not [cursor, [field, value, ...]]
// of strings, a cursor that is not a number, too many fields, oversized
// fields or values, or a scan that does not end are errors, never a partial
// table. HSCAN may return a field twice: later copies are ignored.
//
// Thread safety: stateless; `command` must be safe to call from the calling
// thread (RedisStore::Command is). Blocking: one round trip per HSCAN page.
#ifndef TOLLGATE_SERVER_TENANT_HASH_H_
#define TOLLGATE_SERVER_TENANT_HASH_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tollgate/redis_store.h"
#include "tollgate/status.h"

namespace tollgate::server {

using RedisCommand = std::function<Result<RedisReply>(std::vector<std::string> argv)>;

struct TenantHashLimits {
  size_t max_entries = 1'000'000;  // distinct fields
  size_t max_field_bytes = 1024;   // an identity
  size_t max_value_bytes = 128;    // "count=...,period=..."
  size_t page = 1000;              // HSCAN COUNT
  size_t max_pages = 100'000;      // round trips before giving up on the cursor
};

Status ReadTenantHash(const RedisCommand& command, std::string_view key,
                      std::vector<std::pair<std::string, std::string>>* entries,
                      const TenantHashLimits& limits = {});

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_TENANT_HASH_H_
