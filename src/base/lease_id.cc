#include "base/lease_id.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

namespace tollgate {

std::optional<std::string> RandomLeaseId() {
  unsigned char bytes[kRandomLeaseIdBytes];
  if (RAND_bytes(bytes, static_cast<int>(sizeof bytes)) != 1) return std::nullopt;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(2 * sizeof bytes, '0');
  for (size_t i = 0; i < sizeof bytes; ++i) {
    id[2 * i] = kHex[bytes[i] >> 4];
    id[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return id;
}

bool LeaseIdsEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tollgate
