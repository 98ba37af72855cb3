#include "local/key_hash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace tollgate::internal {
namespace {

struct HashHash {
  size_t operator()(const Hash128& h) const { return h.hi ^ (h.lo << 1); }
};

TEST(KeyHashTest, SimilarKeysNeverCollide) {
  std::unordered_set<Hash128, HashHash> seen;
  std::unordered_set<uint64_t> lanes_a, lanes_b;
  std::string key;
  for (int i = 0; i < 1'000'000; ++i) {
    key = "rule\x1f" + std::to_string(i);
    const Hash128 h = HashKey(key, HashSeed::From(0x1234, 0x5678));
    ASSERT_TRUE(seen.insert(h).second) << key;
    lanes_a.insert(h.hi);
    lanes_b.insert(h.lo);
  }
  // Each 64-bit lane alone is collision-free on this set too.
  EXPECT_EQ(lanes_a.size(), 1'000'000u);
  EXPECT_EQ(lanes_b.size(), 1'000'000u);
}

TEST(KeyHashTest, LengthAndTrailingBytesMatter) {
  std::set<std::pair<uint64_t, uint64_t>> seen;
  const std::vector<std::string> keys = {"",
                                         std::string(1, '\0'),
                                         std::string(2, '\0'),
                                         "a",
                                         "aa",
                                         "abcdefgh",
                                         std::string("abcdefgh\0", 9),
                                         "abcdefghabcdefgh",
                                         "abcdefghabcdefgh!",
                                         std::string(16, 'x'),
                                         std::string(17, 'x'),
                                         std::string(33, 'x')};
  for (const auto& k : keys) {
    const Hash128 h = HashKey(k, HashSeed::From(1, 2));
    EXPECT_TRUE(seen.insert({h.hi, h.lo}).second) << "collision for a key of length " << k.size();
  }
}

TEST(KeyHashTest, SeedsChangeEverything) {
  EXPECT_NE(HashKey("client-1", HashSeed::From(1, 2)), HashKey("client-1", HashSeed::From(3, 4)));
  EXPECT_EQ(HashKey("client-1", HashSeed::From(1, 2)), HashKey("client-1", HashSeed::From(1, 2)));
}

TEST(KeyHashTest, SpreadsEvenlyOverShards) {
  constexpr int kShards = 64, kKeys = 640'000;
  std::vector<int> counts(kShards);
  for (int i = 0; i < kKeys; ++i)
    counts[HashKey("ip:10.0." + std::to_string(i), HashSeed::From(7, 9)).lo % kShards]++;
  for (int c : counts) {
    // Binomial: mean 10000, sd ~99; 6 sd either way.
    EXPECT_GT(c, 10000 - 600);
    EXPECT_LT(c, 10000 + 600);
  }
}

// The hash reads its key through overlapping word loads that depend on the
// length: every length from 0 to 64 must hash the same bytes the same way
// wherever they sit in memory, and tell every byte and every length apart.
TEST(KeyHashTest, EveryLengthUpTo64IsConsistentAndComplete) {
  const HashSeed seed = HashSeed::From(11, 13);
  std::string base;
  for (int i = 0; i < 64; ++i) base.push_back(static_cast<char>('a' + i % 26));
  std::unordered_set<Hash128, HashHash> seen;
  for (size_t n = 0; n <= 64; ++n) {
    const std::string key = base.substr(0, n);
    const Hash128 h = HashKey(key, seed);
    // The same bytes at every alignment, with different bytes around them.
    for (size_t offset = 1; offset < 8; ++offset) {
      std::string buf(offset, '\xff');
      buf += key;
      buf += std::string(16, static_cast<char>(offset));
      EXPECT_EQ(HashKey(std::string_view(buf).substr(offset, n), seed), h) << n << "/" << offset;
    }
    EXPECT_TRUE(seen.insert(h).second) << "prefix of length " << n << " collides";
    // Every byte matters, in both lanes.
    for (size_t i = 0; i < n; ++i) {
      std::string changed = key;
      changed[i] ^= 1;
      const Hash128 c = HashKey(changed, seed);
      EXPECT_NE(c.hi, h.hi) << "length " << n << ", byte " << i;
      EXPECT_NE(c.lo, h.lo) << "length " << n << ", byte " << i;
    }
  }
}

// Runs of one byte line up the same words at neighbouring lengths ("aaaaaaaaa"
// and "aaaaaaaaaa" read the same two words): only the length tells them apart.
TEST(KeyHashTest, RunsOfOneByteDifferInLength) {
  const HashSeed seed = HashSeed::From(5, 6);
  std::unordered_set<Hash128, HashHash> seen;
  for (int c : {0, int{'a'}, 0xff}) {
    for (size_t n = c == 0 ? 0 : 1; n <= 64; ++n) {
      EXPECT_TRUE(seen.insert(HashKey(std::string(n, static_cast<char>(c)), seed)).second)
          << "byte " << c << " length " << n;
    }
  }
}

TEST(KeyHashTest, DifferentSeedsGiveUnrelatedHashes) {
  const HashSeed s1 = HashSeed::From(1, 2), s2 = HashSeed::From(1, 3);
  for (const HashSeed& s : {s1, s2}) {
    for (uint64_t k : s.k) EXPECT_NE(k, 0u);
  }
  int equal_lanes = 0;
  for (int i = 0; i < 10'000; ++i) {
    const std::string key = "user:" + std::to_string(i);
    const Hash128 a = HashKey(key, s1), b = HashKey(key, s2);
    equal_lanes += (a.hi == b.hi) + (a.lo == b.lo);
    EXPECT_EQ(HashKey(key, s1), a);  // deterministic for one seed
  }
  EXPECT_EQ(equal_lanes, 0);
  // Each secret word matters on its own.
  for (int w = 0; w < 4; ++w) {
    HashSeed changed = s1;
    changed.k[w] ^= uint64_t{1} << 40;
    EXPECT_NE(HashKey("client-1", changed), HashKey("client-1", s1)) << "word " << w;
  }
}

// The home slot is taken from the top bits of `hi` (multiply-shift by the
// shard's capacity): they must spread sequential keys evenly too.
TEST(KeyHashTest, SpreadsEvenlyOverHomeSlots) {
  constexpr int kBins = 64, kKeys = 640'000;
  std::vector<int> counts(kBins);
  for (int i = 0; i < kKeys; ++i) {
    char key[17];
    std::snprintf(key, sizeof(key), "k:%013d:", i);
    counts[HashKey(std::string_view(key, 16), HashSeed::From(3, 4)).hi >> 58]++;
  }
  for (int c : counts) {
    EXPECT_GT(c, 10000 - 600);
    EXPECT_LT(c, 10000 + 600);
  }
}

}  // namespace
}  // namespace tollgate::internal
