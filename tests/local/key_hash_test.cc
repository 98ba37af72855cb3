#include "local/key_hash.h"

#include <gtest/gtest.h>

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
    const Hash128 h = HashKey(key, 0x1234, 0x5678);
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
    const Hash128 h = HashKey(k, 1, 2);
    EXPECT_TRUE(seen.insert({h.hi, h.lo}).second) << "collision for a key of length " << k.size();
  }
}

TEST(KeyHashTest, SeedsChangeEverything) {
  EXPECT_NE(HashKey("client-1", 1, 2), HashKey("client-1", 3, 4));
  EXPECT_EQ(HashKey("client-1", 1, 2), HashKey("client-1", 1, 2));
}

TEST(KeyHashTest, SpreadsEvenlyOverShards) {
  constexpr int kShards = 64, kKeys = 640'000;
  std::vector<int> counts(kShards);
  for (int i = 0; i < kKeys; ++i)
    counts[HashKey("ip:10.0." + std::to_string(i), 7, 9).lo % kShards]++;
  for (int c : counts) {
    // Binomial: mean 10000, sd ~99; 6 sd either way.
    EXPECT_GT(c, 10000 - 600);
    EXPECT_LT(c, 10000 + 600);
  }
}

}  // namespace
}  // namespace tollgate::internal
