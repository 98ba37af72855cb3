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

inline Hash128 HashKey(std::string_view key, uint64_t seed_a, uint64_t seed_b) {
  constexpr uint64_t kA = 0xa0761d6478bd642fULL, kB = 0xe7037ed1a0b428dbULL;
  constexpr uint64_t kC = 0x8ebc6af09c88c6e3ULL, kD = 0x589965cc75374cc3ULL;
  const char* p = key.data();
  size_t n = key.size();
  uint64_t a = seed_a ^ (n * kA), b = seed_b ^ (n * kC);
  while (n >= 8) {
    const uint64_t w = Load64(p);
    a = Mum(a ^ w, kB);
    b = Mum(b ^ w, kD);
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    w |= uint64_t{1} << (8 * n);  // tail marker just past the last byte
    a = Mum(a ^ w, kB);
    b = Mum(b ^ w, kD);
  }
  return {Mum(a, kA ^ kC), Mum(b, kB ^ kD)};
}

}  // namespace tollgate::internal

#endif  // TOLLGATE_SRC_LOCAL_KEY_HASH_H_
