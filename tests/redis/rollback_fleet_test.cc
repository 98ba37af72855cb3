// RollbackFleet (tollgate/rollback_fleet.h): the record format against
// hostile text, two instances sharing trips and clears through a real
// redis-server, a publish that outlives an outage, and hostile replies from a
// scripted Redis and from a fake one over a socket.
#include "tollgate/rollback_fleet.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "testing/hostile_redis.h"
#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/redis_store.h"

namespace tollgate::testing {
namespace {

RedisReply Str(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}

RedisReply Page(std::string cursor, std::vector<std::string> items) {
  RedisReply page;
  page.type = RedisReply::Type::kArray;
  page.elements.push_back(Str(std::move(cursor)));
  RedisReply list;
  list.type = RedisReply::Type::kArray;
  for (std::string& item : items) list.elements.push_back(Str(std::move(item)));
  page.elements.push_back(std::move(list));
  return page;
}

RollbackRecord Record(int64_t epoch, bool tripped, std::string origin = "host-a:1:00000001") {
  RollbackRecord r;
  r.rule = "api";
  r.epoch = epoch;
  r.at_ms = 1764372140123;
  r.tripped = tripped;
  r.fingerprint = 0x0123456789abcdef;
  r.trigger = tripped ? "reject_ratio" : "admin";
  r.origin = std::move(origin);
  r.reason = tripped ? "rejected 30 of 100 decisions in the window" : "";
  return r;
}

RollbackChange Change(bool tripped, uint64_t fingerprint = 0x0123456789abcdef) {
  RollbackChange c;
  c.rule = "api";
  c.fingerprint = fingerprint;
  c.tripped = tripped;
  c.trigger = tripped ? "reject_ratio" : "admin";
  c.reason = tripped ? "rejected 30 of 100 decisions in the window" : "";
  return c;
}

// What an instance was handed to adopt, in order.
struct Adopted {
  std::mutex mu;
  std::vector<RollbackRecord> records;
  RollbackFleet::Adopt Fn() {
    return [this](const RollbackRecord& r) {
      std::lock_guard<std::mutex> lock(mu);
      records.push_back(r);
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return records.size();
  }
  RollbackRecord last() {
    std::lock_guard<std::mutex> lock(mu);
    return records.back();
  }
};

TEST(RollbackRecord, PrintsAndParsesBack) {
  const RollbackRecord r = Record(7, true);
  const std::string text = FormatRollbackRecord(r);
  EXPECT_EQ(text,
            "7 1764372140123 tripped 0123456789abcdef reject_ratio host-a:1:00000001\n"
            "rejected 30 of 100 decisions in the window");
  auto back = ParseRollbackRecord("api", text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->epoch, 7);
  EXPECT_EQ(back->at_ms, 1764372140123);
  EXPECT_TRUE(back->tripped);
  EXPECT_EQ(back->fingerprint, 0x0123456789abcdefu);
  EXPECT_EQ(back->trigger, "reject_ratio");
  EXPECT_EQ(back->origin, "host-a:1:00000001");
  EXPECT_EQ(back->reason, r.reason);
  auto cleared = ParseRollbackRecord("api", FormatRollbackRecord(Record(8, false)));
  ASSERT_TRUE(cleared.ok());
  EXPECT_FALSE(cleared->tripped);
  EXPECT_EQ(cleared->reason, "");
}

TEST(RollbackRecord, RefusesHostileText) {
  const std::string good = FormatRollbackRecord(Record(7, true));
  struct Case {
    std::string field, value, error;
  } cases[] = {
      {"bad rule", good, "not a rule name"},
      {"", good, "not a rule name"},
      {std::string(65, 'r'), good, "not a rule name"},
      {"api", good + std::string(1024, 'x'), "longer than 1024 bytes"},
      {"api", "7 1 tripped 0123456789abcdef admin o", "no line with the reason"},
      {"api", "0 1 tripped 0123456789abcdef admin o\n", "the epoch"},
      {"api", "07 1 tripped 0123456789abcdef admin o\n", "the epoch"},
      {"api", "-7 1 tripped 0123456789abcdef admin o\n", "the epoch"},
      {"api", "9007199254740993 1 tripped 0123456789abcdef admin o\n", "the epoch"},
      {"api", "99999999999999999999 1 tripped 0123456789abcdef admin o\n", "the epoch"},
      {"api", "7 x tripped 0123456789abcdef admin o\n", "the time"},
      {"api", "7 1 TRIPPED 0123456789abcdef admin o\n", "the state"},
      {"api", "7 1 tripped 0123456789ABCDEF admin o\n", "the fingerprint"},
      {"api", "7 1 tripped 0123456789abcde admin o\n", "the fingerprint"},
      {"api", "7 1 tripped 0123456789abcdef Admin o\n", "the trigger"},
      {"api", "7 1 tripped 0123456789abcdef admin\n", "the origin"},  // origin missing
      {"api", "7 1 tripped 0123456789abcdef admin o p\n", "the origin"},
      {"api", "7 1 tripped 0123456789abcdef admin " + std::string(257, 'o') + "\n", "the origin"},
      {"api", "7 1 tripped 0123456789abcdef admin o\n\x1b[31mred", "the reason"},
      {"api", "7 1 tripped 0123456789abcdef admin o\nline\nline", "the reason"},
      {"api", "7 1 tripped 0123456789abcdef admin o\n" + std::string(257, 'r'), "the reason"},
  };
  for (const Case& c : cases) {
    auto r = ParseRollbackRecord(c.field, c.value);
    ASSERT_FALSE(r.ok()) << c.value;
    EXPECT_NE(r.status().message().find(c.error), std::string::npos)
        << c.value << " -> " << r.status().message();
  }
}

TEST(RollbackFleet, CreateRefusesBadOptions) {
  RedisCommand command = [](std::vector<std::string>) { return Result<RedisReply>(Str("")); };
  Adopted adopted;
  RollbackFleetOptions o;
  o.instance_id = "has space";
  EXPECT_FALSE(RollbackFleet::Create(o, command, adopted.Fn()).ok());
  o.instance_id = "";
  o.key = "";
  EXPECT_FALSE(RollbackFleet::Create(o, command, adopted.Fn()).ok());
  o.key = "k";
  o.interval = std::chrono::milliseconds(5);
  EXPECT_FALSE(RollbackFleet::Create(o, command, adopted.Fn()).ok());
  o.interval = std::chrono::milliseconds(10);
  EXPECT_FALSE(RollbackFleet::Create(o, nullptr, adopted.Fn()).ok());
  auto fleet = RollbackFleet::Create(o, command, adopted.Fn());
  ASSERT_TRUE(fleet.ok());
  EXPECT_FALSE((*fleet)->instance_id().empty());  // hostname:pid:random
  // A change the record cannot carry is refused, never queued.
  RollbackChange bad = Change(true);
  bad.rule = "no spaces allowed";
  EXPECT_EQ((*fleet)->PublishNow(bad).status().code(), StatusCode::kInvalidArgument);
  bad.rule = "api";
  bad.trigger = "Upper";
  (*fleet)->Publish(bad);
  EXPECT_EQ((*fleet)->stats().pending, 0u);
  EXPECT_EQ((*fleet)->stats().publish_failures, 1u);
}

// A scripted Redis: each call takes the next reply (an error when none is left).
class Scripted {
 public:
  explicit Scripted(std::vector<RedisReply> replies) : replies_(std::move(replies)) {}
  RedisCommand Fn() {
    return [this](std::vector<std::string> argv) -> Result<RedisReply> {
      calls.push_back(argv[0]);
      if (next_ == replies_.size()) return Status(StatusCode::kConnection, "no more replies");
      return replies_[next_++];
    };
  }
  std::vector<std::string> calls;

 private:
  std::vector<RedisReply> replies_;
  size_t next_ = 0;
};

TEST(RollbackFleet, BadRecordsAreSkippedAndCountedNeverAdopted) {
  const std::string good = FormatRollbackRecord(Record(3, true));
  Scripted redis({Page("5", {"#epoch", "3", "api", good, "login", "3 x tripped"}),
                  Page("0", {"bad rule", good, "api", good})});
  Adopted adopted;
  RollbackFleetOptions o;
  o.instance_id = "me";
  auto fleet = RollbackFleet::Create(o, redis.Fn(), adopted.Fn());
  ASSERT_TRUE(fleet.ok());
  ASSERT_TRUE((*fleet)->Sync().ok());
  ASSERT_EQ(adopted.size(), 1u);  // "api" once (HSCAN repeats it), nothing else
  EXPECT_EQ(adopted.last().epoch, 3);
  const RollbackFleetStats st = (*fleet)->stats();
  EXPECT_EQ(st.reads, 1u);
  EXPECT_EQ(st.bad_records, 2u);  // "login" and "bad rule"
  EXPECT_NE(st.last_error.find("record"), std::string::npos) << st.last_error;
  EXPECT_EQ(redis.calls, (std::vector<std::string>{"HSCAN", "HSCAN"}));
}

TEST(RollbackFleet, HostileRepliesFailTheReadOrThePublishAndChangeNothing) {
  RedisReply integer;
  integer.type = RedisReply::Type::kInteger;
  integer.integer = 42;
  RedisReply error;
  error.type = RedisReply::Type::kError;
  error.str = "NOSCRIPT No matching script";
  const std::string other_rule = FormatRollbackRecord(Record(9, true));
  Scripted redis({
      integer,                                     // HSCAN: not a page
      Page("0", {"api", std::string(2000, 'v')}),  // HSCAN: a value over 1 KiB
      Page("1", {}),                               // HSCAN: ... a cursor that never ends
  });
  Adopted adopted;
  RollbackFleetOptions o;
  o.instance_id = "me";
  auto fleet = RollbackFleet::Create(o, redis.Fn(), adopted.Fn());
  ASSERT_TRUE(fleet.ok());
  EXPECT_FALSE((*fleet)->Sync().ok());
  EXPECT_FALSE((*fleet)->Sync().ok());
  EXPECT_FALSE((*fleet)->Sync().ok());  // page 2: "no more replies"
  EXPECT_EQ(adopted.size(), 0u);
  EXPECT_EQ((*fleet)->stats().read_failures, 3u);

  // Publishes answered with the wrong type, an error, or a record that does
  // not parse: each fails, stays queued, and adopts nothing.
  Scripted publish({integer, error, Str("garbage"), Str(other_rule)});
  auto second = RollbackFleet::Create(o, publish.Fn(), adopted.Fn());
  ASSERT_TRUE(second.ok());
  for (const char* why : {"answered an integer", "NOSCRIPT", "no line with the reason"}) {
    auto r = (*second)->PublishNow(Change(true));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_EQ((*second)->stats().pending, 1u);
  }
  // The fourth answer is a record: published, adopted, no longer queued.
  auto r = (*second)->PublishNow(Change(true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*second)->stats().pending, 0u);
  EXPECT_EQ((*second)->stats().publish_failures, 3u);
  EXPECT_EQ(adopted.size(), 1u);
}

struct Instance {
  std::unique_ptr<RedisStore> store;
  Adopted adopted;
  std::unique_ptr<RollbackFleet> fleet;
  std::atomic<bool> down{false};  // the command fails as if Redis were unreachable

  Instance(const std::string& url, const std::string& id,
           Nanos interval = std::chrono::seconds(1)) {
    auto options = ParseRedisUrl(url);
    EXPECT_TRUE(options.ok());
    auto s = RedisStore::Create(*options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(*s);
    RollbackFleetOptions o;
    o.key = "t:{rollback}";
    o.instance_id = id;
    o.interval = interval;
    auto f = RollbackFleet::Create(
        o,
        [this](std::vector<std::string> argv) -> Result<RedisReply> {
          if (down.load()) return Status(StatusCode::kConnection, "connection refused");
          return store->Command(std::move(argv));
        },
        adopted.Fn());
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    fleet = std::move(*f);
  }
};

TEST(RollbackFleet, TwoInstancesShareTripsAndClearsThroughRedis) {
  TOLLGATE_START_REDIS(redis);
  Instance a(redis.url(), "host-a:1:aaaaaaaa"), b(redis.url(), "host-b:2:bbbbbbbb");
  auto tripped = a.fleet->PublishNow(Change(true));
  ASSERT_TRUE(tripped.ok()) << tripped.status().ToString();
  EXPECT_EQ(tripped->epoch, 1);
  EXPECT_GT(tripped->at_ms, 1'700'000'000'000);  // Redis TIME, in ms
  EXPECT_EQ(tripped->origin, "host-a:1:aaaaaaaa");
  EXPECT_EQ(a.adopted.size(), 1u);  // its own record, as the fleet stored it

  ASSERT_TRUE(b.fleet->Sync().ok());
  ASSERT_EQ(b.adopted.size(), 1u);
  EXPECT_TRUE(b.adopted.last().tripped);
  EXPECT_EQ(b.adopted.last().origin, "host-a:1:aaaaaaaa");
  EXPECT_EQ(b.adopted.last().trigger, "reject_ratio");
  EXPECT_EQ(b.adopted.last().reason, "rejected 30 of 100 decisions in the window");
  ASSERT_TRUE(b.fleet->Sync().ok());
  EXPECT_EQ(b.adopted.size(), 1u);  // nothing newer

  // B's own guard trips too: the fleet keeps A's record (first reason wins, no new epoch).
  auto again = b.fleet->PublishNow(Change(true));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->epoch, 1);
  EXPECT_EQ(again->origin, "host-a:1:aaaaaaaa");
  EXPECT_EQ(b.adopted.size(), 1u);

  // An operator clears on B: A adopts the clear.
  auto cleared = b.fleet->PublishNow(Change(false));
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->epoch, 2);
  EXPECT_FALSE(cleared->tripped);
  ASSERT_TRUE(a.fleet->Sync().ok());
  ASSERT_EQ(a.adopted.size(), 2u);
  EXPECT_FALSE(a.adopted.last().tripped);
  EXPECT_EQ(a.adopted.last().origin, "host-b:2:bbbbbbbb");

  // A trip of another definition of the rule replaces a trip of this one.
  ASSERT_TRUE(a.fleet->PublishNow(Change(true, 0xff)).ok());
  auto other = b.fleet->PublishNow(Change(true));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->epoch, 4);
  EXPECT_EQ(other->fingerprint, 0x0123456789abcdefu);
  // What Redis holds is one parseable record per rule and the counter.
  const std::string value = redis.Command({"HGET", "t:{rollback}", "api"});
  auto stored = ParseRollbackRecord("api", value);
  ASSERT_TRUE(stored.ok()) << value;
  EXPECT_EQ(stored->epoch, 4);
  EXPECT_EQ(redis.Command({"HGET", "t:{rollback}", "#epoch"}), "4");
}

// A trip made while Redis is unreachable is queued and sent when it is back;
// until then, a newer record of the fleet for that rule is not adopted (the
// queued trip will be newer still).
TEST(RollbackFleet, AQueuedTripOutlivesAnOutageAndWins) {
  TOLLGATE_START_REDIS(redis);
  Instance a(redis.url(), "host-a"), b(redis.url(), "host-b");
  a.down = true;
  a.fleet->Publish(Change(true));
  EXPECT_FALSE(a.fleet->Sync().ok());
  EXPECT_EQ(a.fleet->stats().pending, 1u);
  EXPECT_EQ(a.fleet->stats().publish_failures, 1u);
  EXPECT_EQ(a.fleet->stats().read_failures, 1u);
  ASSERT_TRUE(b.fleet->PublishNow(Change(false)).ok());  // epoch 1: cleared
  a.down = false;
  ASSERT_TRUE(a.fleet->Sync().ok());
  EXPECT_EQ(a.fleet->stats().pending, 0u);
  ASSERT_EQ(a.adopted.size(), 1u);  // its own trip, epoch 2; never B's older clear
  EXPECT_TRUE(a.adopted.last().tripped);
  EXPECT_EQ(a.adopted.last().epoch, 2);
  ASSERT_TRUE(b.fleet->Sync().ok());
  EXPECT_TRUE(b.adopted.last().tripped);
  EXPECT_EQ(b.adopted.last().origin, "host-a");
}

// The thread sends a queued change at once and reads every interval.
TEST(RollbackFleet, TheThreadSpreadsAChangeWithoutBeingAsked) {
  TOLLGATE_START_REDIS(redis);
  Instance a(redis.url(), "host-a", std::chrono::milliseconds(20));
  Instance b(redis.url(), "host-b", std::chrono::milliseconds(20));
  a.fleet->Start();
  b.fleet->Start();
  a.fleet->Publish(Change(true));
  ASSERT_TRUE(WaitFor([&] { return b.adopted.size() == 1; })) << b.adopted.size();
  EXPECT_EQ(b.adopted.last().origin, "host-a");
  b.fleet->Publish(Change(false));
  ASSERT_TRUE(WaitFor([&] { return a.adopted.size() == 2; }));
  EXPECT_FALSE(a.adopted.last().tripped);
  a.fleet->Stop();
  const uint64_t a_reads = a.fleet->stats().reads;
  const uint64_t b_reads = b.fleet->stats().reads;
  b.fleet->Publish(Change(true));
  ASSERT_TRUE(WaitFor([&] { return b.fleet->stats().pending == 0; }));
  ASSERT_TRUE(WaitFor([&] { return b.fleet->stats().reads >= b_reads + 2; }));
  EXPECT_EQ(a.fleet->stats().reads, a_reads);  // stopped: no more reads
  EXPECT_EQ(a.adopted.size(), 2u);
}

// A fake Redis answering every command with ":42" over a real socket: the
// read fails with a clear error, nothing is adopted, nothing hangs.
TEST(RollbackFleet, AHostileServerOverASocketIsARefusedRead) {
  std::string error;
  HostileRedis::Options ho;
  ho.reply = HostileRedis::Reply::kWrongType;
  ho.answer_script_load = true;
  auto hostile = HostileRedis::Start(ho, &error);
  ASSERT_TRUE(hostile) << error;
  Instance a(hostile->url() + "?timeout_ms=200", "host-a");
  Status st = a.fleet->Sync();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(a.adopted.size(), 0u);
  EXPECT_EQ(a.fleet->stats().read_failures, 1u);
  EXPECT_NE(a.fleet->stats().last_error.find("HSCAN answered an integer"), std::string::npos)
      << a.fleet->stats().last_error;
}

}  // namespace
}  // namespace tollgate::testing
