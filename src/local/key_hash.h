// Keyed 128-bit hashing of bucket keys for the local store.
//
// A key is identified by its 128-bit hash alone (two independently keyed
// 64-bit lanes); the secret is random per store (256 bits), so clients cannot
// aim collisions at a known function. Not cryptographic: for two distinct keys
// chosen without knowledge of the secret, each lane collides with probability
// about 2^-64, and a million keys hold a colliding pair with probability about
// 2^-88.
//
// The mixing step is "mum" (wyhash's primitive): the 64x64 -> 128-bit product
// of two words, folded to 64 bits by xor. Every multiplicand is xor'ed with a
// secret word (or with a lane value that already depends on one), so no input
// word can zero a product or cancel another block without knowing the secret.
// The length enters lane `hi` beside the last word and lane `lo` beside the
// first, so two keys of different lengths cannot line up both lanes by
// adjusting one word.
//
// Cost: keys of 0-16 bytes (most keys) take two independent multiplies, one
// multiply deep; each further 16 bytes adds one multiply per lane.
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

// The per-store secret: four independent 64-bit words.
struct HashSeed {
  uint64_t k[4];

  // Expands two words into four with splitmix64 (tests, fixed seeds).
  static HashSeed From(uint64_t a, uint64_t b) {
    uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ULL);
    HashSeed seed{};
    for (auto& k : seed.k) {
      uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      k = z ^ (z >> 31);
    }
    return seed;
  }
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

inline Hash128 HashKey(std::string_view key, const HashSeed& seed) {
  const char* p = key.data();
  const size_t n = key.size();
  const uint64_t len = n;
  uint64_t a = seed.k[0], b = seed.k[2];
  uint64_t x, y;
  if (n <= 16) [[likely]] {
    // The bytes as two words; for a given length the pair (x, y) determines
    // the key (the reads overlap when n < 16).
    if (n >= 8) {
      x = Load64(p);
      y = Load64(p + n - 8);
    } else if (n >= 4) {
      x = Load32(p);
      y = Load32(p + n - 4);
    } else {
      x = n == 0 ? 0
                 : (uint64_t{static_cast<uint8_t>(p[0])} << 16) |
                       (uint64_t{static_cast<uint8_t>(p[n >> 1])} << 8) |
                       static_cast<uint8_t>(p[n - 1]);
      y = 0;
    }
  } else {
    // 16-byte blocks chained through the lane values, then the last 16 bytes
    // (overlapping the previous block when n is not a multiple of 16).
    const char* last = p + n - 16;
    for (; p < last; p += 16) {
      const uint64_t bx = Load64(p), by = Load64(p + 8);
      a = Mum(bx ^ a, by ^ seed.k[1]);
      b = Mum(bx ^ b, by ^ seed.k[3]);
    }
    x = Load64(last);
    y = Load64(last + 8);
  }
  return {Mum(x ^ a, y ^ seed.k[1] ^ len), Mum(x ^ b ^ len, y ^ seed.k[3])};
}

}  // namespace tollgate::internal

#endif  // TOLLGATE_SRC_LOCAL_KEY_HASH_H_
