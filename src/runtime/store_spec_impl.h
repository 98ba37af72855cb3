// Internals shared by the store-spec grammar and factory (src/runtime only).
#ifndef TOLLGATE_SRC_RUNTIME_STORE_SPEC_IMPL_H_
#define TOLLGATE_SRC_RUNTIME_STORE_SPEC_IMPL_H_

#include <string_view>

#include "tollgate/store_spec.h"

namespace tollgate::runtime {

// kUnavailable: `scheme` names a store this build does not include.
Status NotInThisBuild(StoreScheme scheme, std::string_view url);

// redis-sentinel:// or rediss-sentinel:// (StoreScheme::kRedis, ParseRedisSentinelUrl).
bool IsSentinelUrl(std::string_view url);

}  // namespace tollgate::runtime

#endif  // TOLLGATE_SRC_RUNTIME_STORE_SPEC_IMPL_H_
