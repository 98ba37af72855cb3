// LocalStore::Save / Load (issue 36): a round trip per algorithm, time moving
// forward across it, windows that ended, and hostile files refused whole.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "local/state_file.h"
#include "testing/test_paths.h"
#include "tollgate/algorithm.h"
#include "tollgate/calendar.h"
#include "tollgate/local_store.h"
#include "tollgate/time_zone.h"

namespace tollgate {
namespace {

constexpr int64_t kSec = 1'000'000'000;
// 2026-12-02 12:00:00 UTC: a day's window has 12 hours left.
constexpr int64_t kNoonWall = 1'796'212'800 * kSec;

// A store on its own monotonic clock; every store of a test shares the wall
// time it is given (as two processes on one machine do).
struct Side {
  Side(int64_t mono_start, int64_t wall_at_start, size_t max_keys = 4096)
      : clock(mono_start, wall_at_start - mono_start) {
    LocalStoreOptions o;
    o.max_keys = max_keys;
    o.shards = 4;
    o.clock = &clock;
    store = std::move(*LocalStore::Create(o));
  }
  ManualClock clock;
  std::unique_ptr<LocalStore> store;
};

Limit Make(Algorithm a, int64_t burst, Nanos period_or_window) {
  LimitSpec s;
  s.algorithm = a;
  s.burst = burst;
  if (a == Algorithm::kTokenBucket || a == Algorithm::kLeakyBucket) {
    s.count = burst;
    s.period = period_or_window;
  } else {
    s.window = period_or_window;
  }
  auto l = Limit::Create(s);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

Limit Daily(int64_t count) {
  LimitSpec s;
  s.algorithm = Algorithm::kFixedWindow;
  s.burst = count;
  s.calendar = std::make_shared<Calendar>(CalendarUnit::kDay, TimeZone::Fixed("UTC", 0));
  return *Limit::Create(s);
}

std::string SaveBytes(const LocalStore& store) {
  std::ostringstream out;
  auto saved = store.Save(out);
  EXPECT_TRUE(saved.ok()) << saved.status().ToString();
  return out.str();
}

int64_t Remaining(LocalStore& store, std::string_view key, const Limit& limit) {
  return store.Acquire(key, limit, 0).remaining;
}

struct Case {
  const char* name;
  Algorithm algorithm;
  int64_t burst;
  Nanos period;
};

class RoundTrip : public ::testing::TestWithParam<Case> {};

// Saved by one store, loaded by another with another monotonic epoch at the
// same wall time: every key reads as it did.
TEST_P(RoundTrip, KeysReadTheSameInTheNextStore) {
  const Case& c = GetParam();
  const Limit limit = Make(c.algorithm, c.burst, c.period);
  Side a(1'000 * kSec, kNoonWall);
  for (int i = 0; i < 20; ++i) {
    const std::string key = std::string("rule\x1f") + c.name + "\x1f" + std::to_string(i);
    ASSERT_TRUE(a.store->Acquire(key, limit, i % 7 + 1).allowed);
  }
  const std::string bytes = SaveBytes(*a.store);
  Side b(77 * kSec, kNoonWall);
  auto loaded = b.store->LoadBytes(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->loaded, 20u);
  EXPECT_EQ(loaded->saved_wall_ns, kNoonWall);
  for (int i = 0; i < 20; ++i) {
    const std::string key = std::string("rule\x1f") + c.name + "\x1f" + std::to_string(i);
    EXPECT_EQ(Remaining(*b.store, key, limit), c.burst - (i % 7 + 1)) << key;
  }
  // A key never seen is full in the new store too.
  EXPECT_EQ(Remaining(*b.store, "rule\x1fnew", limit), c.burst);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, RoundTrip,
    ::testing::Values(Case{"token_bucket", Algorithm::kTokenBucket, 100, std::chrono::hours(1)},
                      Case{"leaky_bucket", Algorithm::kLeakyBucket, 100, std::chrono::hours(1)},
                      Case{"fixed_window", Algorithm::kFixedWindow, 100, std::chrono::hours(1)},
                      Case{"sliding_window", Algorithm::kSlidingWindow, 100, std::chrono::hours(1)},
                      Case{"sliding_log", Algorithm::kSlidingLog, 100, std::chrono::hours(1)}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LocalStateTest, ABucketRefillsForTheTimeSinceTheSave) {
  const Limit limit = Make(Algorithm::kTokenBucket, 3600, std::chrono::hours(1));  // 1/s
  Side a(1'000 * kSec, kNoonWall);
  ASSERT_TRUE(a.store->Acquire("r\x1fk", limit, 3600).allowed);
  const std::string bytes = SaveBytes(*a.store);
  // Started again 10 minutes later.
  Side b(5 * kSec, kNoonWall + 600 * kSec);
  ASSERT_TRUE(b.store->LoadBytes(bytes).ok());
  EXPECT_EQ(Remaining(*b.store, "r\x1fk", limit), 600);
  // An hour later the bucket is full again: nothing to load.
  Side c(5 * kSec, kNoonWall + 3600 * kSec);
  auto loaded = c.store->LoadBytes(bytes);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->loaded, 0u);
  EXPECT_EQ(loaded->dropped_expired, 1u);
  EXPECT_EQ(c.store->Stats().keys, 0u);
}

TEST(LocalStateTest, ADailyQuotaKeepsItsRemainderUntilTheDayEnds) {
  const Limit limit = Daily(1000);
  Side a(1'000 * kSec, kNoonWall);
  ASSERT_TRUE(a.store
                  ->Acquire("daily\x1f"
                            "fw\x1f"
                            "k",
                            limit, 900)
                  .allowed);
  const std::string bytes = SaveBytes(*a.store);
  Side b(1 * kSec, kNoonWall + 6 * 3600 * kSec);  // 18:00 the same day
  ASSERT_TRUE(b.store->LoadBytes(bytes).ok());
  EXPECT_EQ(Remaining(*b.store,
                      "daily\x1f"
                      "fw\x1f"
                      "k",
                      limit),
            100);
  Side c(1 * kSec, kNoonWall + 13 * 3600 * kSec);  // 01:00 the next day: the window ended
  auto loaded = c.store->LoadBytes(bytes);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->dropped_expired, 1u);
  EXPECT_EQ(Remaining(*c.store,
                      "daily\x1f"
                      "fw\x1f"
                      "k",
                      limit),
            1000);
}

TEST(LocalStateTest, ADebtFromASettlementSurvives) {
  const Limit limit = Make(Algorithm::kTokenBucket, 100, std::chrono::hours(1));
  Side a(1'000 * kSec, kNoonWall);
  SettleItem item;
  item.key = "llm\x1ftb\x1fk";
  item.limit = &limit;
  item.charge = 500;  // 400 tokens of debt: 4 hours to refill
  ASSERT_TRUE(a.store->Settle(std::span<const SettleItem>(&item, 1)).ok());
  const Decision before = a.store->Acquire(item.key, limit, 1);
  ASSERT_FALSE(before.allowed);
  const std::string bytes = SaveBytes(*a.store);
  Side b(3 * kSec, kNoonWall);
  ASSERT_TRUE(b.store->LoadBytes(bytes).ok());
  const Decision after = b.store->Acquire(item.key, limit, 1);
  EXPECT_FALSE(after.allowed);
  EXPECT_EQ(after.retry_after, before.retry_after);
}

TEST(LocalStateTest, GroupsTheCallerRefusesAreDropped) {
  const Limit limit = Make(Algorithm::kTokenBucket, 10, std::chrono::hours(1));
  Side a(1'000 * kSec, kNoonWall);
  ASSERT_TRUE(a.store
                  ->Acquire("kept\x1f"
                            "a",
                            limit, 5)
                  .allowed);
  ASSERT_TRUE(a.store
                  ->Acquire("gone\x1f"
                            "a",
                            limit, 5)
                  .allowed);
  const std::string bytes = SaveBytes(*a.store);
  Side b(1 * kSec, kNoonWall);
  LocalStateLoadOptions o;
  o.keep_group = [](std::string_view g) { return g == "kept"; };
  auto loaded = b.store->LoadBytes(bytes, o);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->loaded, 1u);
  EXPECT_EQ(loaded->dropped_group, 1u);
  EXPECT_EQ(Remaining(*b.store,
                      "kept\x1f"
                      "a",
                      limit),
            5);
  EXPECT_EQ(Remaining(*b.store,
                      "gone\x1f"
                      "a",
                      limit),
            10);
}

// A file that fails any check installs nothing: the store stays empty, and
// a good file loads into it afterwards.
void ExpectRefused(const std::string& bytes, const std::string& why,
                   const LocalStateLoadOptions& o = {}) {
  Side b(1 * kSec, kNoonWall);
  auto loaded = b.store->LoadBytes(bytes, o);
  ASSERT_FALSE(loaded.ok()) << why;
  EXPECT_NE(loaded.status().message().find(why), std::string::npos) << loaded.status().ToString();
  EXPECT_NE(loaded.status().message().find("at byte"), std::string::npos);
  EXPECT_EQ(b.store->Stats().keys, 0u);
  EXPECT_EQ(b.store->Stats().log_keys, 0u);
}

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const Limit tb = Make(Algorithm::kTokenBucket, 10, std::chrono::hours(1));
    const Limit sl = Make(Algorithm::kSlidingLog, 10, std::chrono::hours(1));
    for (int i = 0; i < 5; ++i) {
      a.store->Acquire("r\x1f" + std::to_string(i), tb, 3);
      a.store->Acquire("s\x1f" + std::to_string(i), sl, 2);
    }
    good = SaveBytes(*a.store);
  }
  Side a{1'000 * kSec, kNoonWall};
  std::string good;
};

TEST_F(HostileFiles, ACorruptByteIsRefusedByTheChecksum) {
  for (size_t at : {size_t{30}, good.size() / 2, good.size() - 10}) {
    std::string bad = good;
    bad[at] ^= 0x40;
    ExpectRefused(bad, "checksum");
  }
}

TEST_F(HostileFiles, ATruncatedFileIsRefused) {
  for (size_t n = 0; n < good.size(); n += 7) {
    ExpectRefused(good.substr(0, n), n < 8 ? "magic" : n < 28 ? "truncated" : "truncated or");
  }
}

TEST_F(HostileFiles, AForeignFileIsRefused) {
  ExpectRefused("{\"rules\": []}\n", "not a tollgate state file");
  ExpectRefused(std::string(4096, '\0'), "not a tollgate state file");
}

TEST_F(HostileFiles, AFutureVersionIsRefused) {
  std::string bad = good;
  bad[8] = 2;
  const uint32_t crc = internal::Crc32c(std::string_view(bad).substr(0, bad.size() - 4));
  for (int i = 0; i < 4; ++i) bad[bad.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  ExpectRefused(bad, "version 2 is newer than the version this tollgate reads (1)");
}

TEST_F(HostileFiles, AnOversizedFileIsRefused) {
  LocalStateLoadOptions o;
  o.max_bytes = good.size() - 1;
  ExpectRefused(good, "more than the", o);
}

TEST_F(HostileFiles, AWellFormedFileWithABadRecordIsRefusedWhole) {
  // Re-encoded with a valid checksum: the records' own checks refuse it.
  auto image = internal::DecodeState(good, {});
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  image->words.push_back(image->words.front());  // a key twice, after good entries
  ExpectRefused(internal::EncodeState(*image), "the key appears twice");
  image->words.pop_back();
  image->logs.back().entries.front().cost = 0;
  ExpectRefused(internal::EncodeState(*image), "log cost out of range");
}

TEST_F(HostileFiles, ALoadIntoAStoreInUseIsRefused) {
  const Limit tb = Make(Algorithm::kTokenBucket, 10, std::chrono::hours(1));
  Side b(1 * kSec, kNoonWall);
  b.store->Acquire("x", tb, 1);
  auto loaded = b.store->LoadBytes(good);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("empty store"), std::string::npos);
}

TEST_F(HostileFiles, TheFileIsWrittenAtomicallyAndPrivately) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("tollgate_state_" + std::to_string(::getpid()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "state").string();
  auto saved = a.store->Save(path);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->buckets, 5u);
  EXPECT_EQ(saved->logs, 5u);
  EXPECT_EQ(saved->bytes, std::filesystem::file_size(path));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Saved again over it; no temporary file is left beside it.
  ASSERT_TRUE(a.store->Save(path).ok());
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
  Side b(1 * kSec, kNoonWall);
  auto loaded = b.store->Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->loaded, 10u);
  // A missing file and a directory that cannot be written say so.
  Side c(1 * kSec, kNoonWall);
  auto missing = c.store->Load((dir / "none").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
  auto unwritable = a.store->Save((dir / "no" / "such" / "dir").string());
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.status().message().find("open its directory"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// The fuzz target's seeds (written by fuzz/make_seeds.py after a mode byte)
// are files this decoder takes, but for the one that tests the version.
TEST(LocalStateTest, TheFuzzSeedsAreValidFiles) {
  for (const char* name : {"empty", "bucket", "window-and-log", "shared-group", "future-version"}) {
    std::ifstream in(testing::SourcePathOf(std::string("fuzz/corpus/local_state/seed-") + name),
                     std::ios::binary);
    ASSERT_TRUE(in) << name;
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty());
    auto image = internal::DecodeState(std::string_view(bytes).substr(1), {});
    EXPECT_EQ(image.ok(), std::string(name) != "future-version")
        << name << ": " << image.status().ToString();
  }
}

}  // namespace
}  // namespace tollgate
