// Seeded 128-bit hashing of bucket keys for the local store.
//
// A key is identified by its 128-bit hash alone (two independently seeded
// 64-bit lanes); the seed is random per store so clients cannot aim
// collisions at a known function. Not cryptographic: with random seeds the
// chance that two of a million keys collide is about 2^-88.
#ifndef TOLLGATE_SRC_LOCAL_KEY_HASH_H_
#define TOLLGATE_SRC_LOCAL_KEY_HASH_H_

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tollgate::internal {

struct Hash128 {
  uint64_t hi;
  uint64_t lo;
  friend bool operator==(const Hash128&, const Hash128&) = default;
};

inline uint64_t Mum(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint64_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// wyhash-style: one 64x64->128 multiply per 16 bytes per lane, the last 1-16
// bytes read as two (possibly overlapping) words, the length mixed in.
inline Hash128 HashKey(std::string_view key, uint64_t seed_a, uint64_t seed_b) {
  constexpr uint64_t kA = 0xa0761d6478bd642fULL, kB = 0xe7037ed1a0b428dbULL;
  constexpr uint64_t kC = 0x8ebc6af09c88c6e3ULL, kD = 0x589965cc75374cc3ULL;
  const char* p = key.data();
  size_t n = key.size();
  const uint64_t len = n;
  uint64_t a = seed_a, b = seed_b;
  while (n > 16) {
    const uint64_t x = Load64(p), y = Load64(p + 8);
    a = Mum(x ^ a ^ kA, y ^ kB);
    b = Mum(x ^ b ^ kC, y ^ kD);
    p += 16;
    n -= 16;
  }
  uint64_t x = 0, y = 0;
  if (n >= 8) {
    x = Load64(p);
    y = Load64(p + n - 8);
  } else if (n >= 4) {
    x = Load32(p);
    y = Load32(p + n - 4);
  } else if (n > 0) {
    x = (uint64_t{static_cast<uint8_t>(p[0])} << 16) |
        (uint64_t{static_cast<uint8_t>(p[n >> 1])} << 8) | static_cast<uint8_t>(p[n - 1]);
  }
  a = Mum(x ^ a ^ kA, y ^ kB ^ len);
  b = Mum(x ^ b ^ kC, y ^ kD ^ len);
  return {Mum(a ^ kC, seed_a ^ kB ^ len), Mum(b ^ kA, seed_b ^ kD ^ len)};
}

}  // namespace tollgate::internal

#endif  // TOLLGATE_SRC_LOCAL_KEY_HASH_H_
