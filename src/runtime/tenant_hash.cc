#include "runtime/tenant_hash.h"

namespace tollgate::runtime {

Status ReadTenantHash(const RedisCommand& command, std::string_view key,
                      std::vector<std::pair<std::string, std::string>>* entries,
                      const TenantHashLimits& limits) {
  if (Status s = ScanRedisHash(command, key, entries, limits); !s.ok()) return s;
  if (entries->empty()) return InvalidArgument("does not exist or is empty");
  return Status::Ok();
}

bool StoreUnreachable(const Status& status) {
  return status.code() == StatusCode::kConnection || status.code() == StatusCode::kTimeout ||
         status.code() == StatusCode::kUnavailable;
}

}  // namespace tollgate::runtime
