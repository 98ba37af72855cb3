// Redis key layout: prefix + injective escape of untrusted key text.
//
// Bytes outside [A-Za-z0-9._:/=@+,!-] become %XX (so '{', '}', '%', '#',
// spaces, newlines and non-ASCII never appear raw: no hash tag can form and no
// two keys collide). When the escaped text is longer than kMaxEscapedKey it is
// replaced by "#" + 32 hex digits of SHA-256 of the raw key: bounded size, and
// '#' cannot start an escaped key, so the two forms never collide.
#ifndef TOLLGATE_SRC_REDIS_REDIS_KEYS_H_
#define TOLLGATE_SRC_REDIS_REDIS_KEYS_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tollgate::redis {

inline constexpr size_t kMaxEscapedKey = 128;

// The escaped (or hashed) form of `key`, without prefix.
std::string EscapeKey(std::string_view key);
// prefix + EscapeKey(key).
std::string RedisKey(std::string_view prefix, std::string_view key);

// The identity part of an item key: the text after the last '\x1f' of the
// policy layer's "<rule>\x1f<algorithm>\x1f<identity>" layout, or the whole key.
std::string_view IdentityOf(std::string_view key);
// Cluster layout: prefix + "{" + 8 hex of SHA-256(identity) + "}" + EscapeKey(key).
// Every key of one identity shares a hash tag, so one slot and one node.
std::string ClusterRedisKey(std::string_view prefix, std::string_view key);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_REDIS_KEYS_H_
