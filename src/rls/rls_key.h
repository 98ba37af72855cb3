// Bucket keys of the Envoy rate limit service.
//
//   "rls|<shape>|<domain>|<key>=<value>|<key>=<value>..."
//
// The descriptor entries' values form the key (each value its own bucket, as
// in envoyproxy/ratelimit). Domain, keys and values are untrusted: every byte
// outside [A-Za-z0-9._~-] is percent-encoded, so a value can neither forge a
// separator nor carry Redis hash-tag braces, control bytes or spaces into a
// key or a log line. Keys longer than kMaxRlsKeyBytes keep a readable prefix
// and end in "#" + the SHA-256 of the full key, so long values stay distinct
// without unbounded keys. `shape` (RlsRule::shape) keeps buckets of different
// algorithms or windows apart across reloads.
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_RLS_RLS_KEY_H_
#define TOLLGATE_SRC_RLS_RLS_KEY_H_

#include <string>
#include <string_view>
#include <vector>

#include "rls/rls_config.h"

namespace tollgate::rls {

inline constexpr size_t kMaxRlsKeyBytes = 512;

// Appends `s` percent-encoded (see above) to `out`.
void AppendEscaped(std::string_view s, std::string* out);

std::string BucketKey(std::string_view shape, std::string_view domain,
                      const std::vector<RlsEntry>& entries);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLS_KEY_H_
