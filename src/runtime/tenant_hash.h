// ReadTenantHash: a Redis hash of per-identity limits (a policy rule's
// "tenants": {"redis_hash": ...}) read for PolicyParseOptions::read_tenant_hash
// with ScanRedisHash (tollgate/redis_hash.h: bounded, type-checked HSCAN
// pages through the store's command function), with the tables' bounds. A
// missing or empty hash is an error: a rule whose table vanished keeps the
// last good policy instead of losing every tenant's limit.
//
// Thread safety: stateless; blocking: one round trip per HSCAN page.
#ifndef TOLLGATE_SRC_RUNTIME_TENANT_HASH_H_
#define TOLLGATE_SRC_RUNTIME_TENANT_HASH_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tollgate/redis_hash.h"
#include "tollgate/status.h"

namespace tollgate::runtime {

// A table's bounds: 1M identities of at most 1 KiB, values like
// "count=...,period=..." of at most 128 bytes.
struct TenantHashLimits : HashScanLimits {};

Status ReadTenantHash(const RedisCommand& command, std::string_view key,
                      std::vector<std::pair<std::string, std::string>>* entries,
                      const TenantHashLimits& limits = {});

// Whether a read failed because Redis could not be reached or did not answer
// in time (a connection, a timeout, an open breaker), not because of what the
// hash holds: a start that fails so may succeed later (exit 1, not 2), and
// `tollgated --check` leaves the table unchecked.
bool StoreUnreachable(const Status& status);

}  // namespace tollgate::runtime

#endif  // TOLLGATE_SRC_RUNTIME_TENANT_HASH_H_
