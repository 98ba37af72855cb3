#include "tollgate/top_rejected.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate {
namespace {

TEST(SpaceSaving, KeepsHeavyHittersAndBoundsErrors) {
  SpaceSaving s(16);  // guarantees every key above 350 / 16 ~ 22 occurrences
  // Heavy hitters a (100) and b (50) among 200 distinct one-off keys.
  for (int i = 0; i < 200; ++i) {
    s.Add("noise" + std::to_string(i));
    if (i % 2 == 0) s.Add("a");
    if (i % 4 == 0) s.Add("b");
  }
  auto top = s.Top(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[1].key, "b");
  for (const auto& e : top) {
    uint64_t truth = e.key == "a" ? 100 : 50;
    EXPECT_GE(e.count, truth);
    EXPECT_LE(e.count - e.error, truth);
  }
  EXPECT_LE(s.entries().size(), 16u);
}

TEST(TopRejected, WindowsRotateAndMemoryIsBounded) {
  TopRejected t(8, 1'000);
  t.Record("r", "k1", 0);
  t.Record("r", "k1", 10);
  t.Record("r", "k2", 20);
  auto top = t.Top(10, 30);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].top[0].key, "k1");
  EXPECT_EQ(top[0].top[0].count, 2u);
  // One window later the counts are still reported (previous window)...
  EXPECT_EQ(t.Top(10, 1'500)[0].top[0].count, 2u);
  // ...two windows later they are gone.
  EXPECT_TRUE(t.Top(10, 4'000).empty() || t.Top(10, 4'000)[0].top.empty());
  for (size_t i = 0; i < TopRejected::kMaxRules + 10; ++i) {
    t.Record("rule" + std::to_string(i), std::string(1000, 'x'), 5'000);
  }
  EXPECT_EQ(t.dropped(), 11u);  // "r" already held one of the slots
  auto all = t.Top(1, 5'000);
  for (const auto& r : all) {
    for (const auto& e : r.top) EXPECT_LE(e.key.size(), TopRejected::kMaxKeyBytes);
  }
}

}  // namespace
}  // namespace tollgate
