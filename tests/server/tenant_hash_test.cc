// Redis tenant tables (issue 18): ReadTenantHash against hostile replies and a
// real redis-server, and tollgated reading, refreshing and rejecting a hash
// over real sockets.
#include "src/runtime/tenant_hash.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/redis_server.h"
#include "testing/scoped_temp_dir.h"
#include "testing/timing.h"
#include "tollgate/redis_store.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using runtime::ReadTenantHash;
using runtime::TenantHashLimits;
using tollgate::RedisCommand;
using Entries = std::vector<std::pair<std::string, std::string>>;

RedisReply Str(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}

RedisReply Arr(std::vector<RedisReply> e) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  r.elements = std::move(e);
  return r;
}

// One HSCAN page: [cursor, [f1, v1, ...]].
RedisReply Page(std::string cursor, std::vector<std::string> items) {
  std::vector<RedisReply> e;
  for (auto& i : items) e.push_back(Str(std::move(i)));
  return Arr({Str(std::move(cursor)), Arr(std::move(e))});
}

// A command function that answers each call with the next reply (the last
// one again when they run out).
RedisCommand Scripted(std::vector<RedisReply> replies, int* calls = nullptr) {
  auto at = std::make_shared<size_t>(0);
  return [replies = std::move(replies), at, calls](std::vector<std::string> argv) {
    EXPECT_EQ(argv[0], "HSCAN");
    if (calls) ++*calls;
    const size_t i = std::min(*at, replies.size() - 1);
    ++*at;
    return Result<RedisReply>(replies[i]);
  };
}

TEST(ReadTenantHash, FollowsTheCursorAndDropsRepeats) {
  Entries out;
  int calls = 0;
  Status st = ReadTenantHash(Scripted({Page("7", {"a", "count=1,period=1s", "b", "rps=1,burst=1"}),
                                       Page("0", {"a", "count=1,period=1s", "c", "x"})},
                                      &calls),
                             "k", &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].first, "c");
}

TEST(ReadTenantHash, HostileRepliesAreRejected) {
  RedisReply error;
  error.type = RedisReply::Type::kError;
  error.str = "WRONGTYPE Operation against a key holding the wrong kind of value";
  RedisReply integer;
  integer.type = RedisReply::Type::kInteger;
  RedisReply nested = Page("0", {"a"});
  nested.elements[1].elements.push_back(Arr({}));
  struct Case {
    const char* name;
    std::vector<RedisReply> replies;
    std::string error;
  } cases[] = {
      {"error reply", {error}, "HSCAN: WRONGTYPE"},
      {"not an array", {integer}, "HSCAN answered an integer"},
      {"three elements", {Arr({Str("0"), Arr({}), Arr({})})}, "not [cursor, [field, value, ...]]"},
      {"cursor not a number", {Page("-1", {})}, "the cursor is not a number"},
      {"odd items", {Page("0", {"a"})}, "a field without a value"},
      {"array value", {nested}, "is an array, not a string"},
      {"field too long",
       {Page("0", {std::string(2000, 'f'), "count=1,period=1s"})},
       "is longer than 1024 bytes"},
      {"value too long", {Page("0", {"f", std::string(200, 'v')})}, "the value is longer than 128"},
      {"empty", {Page("0", {})}, "does not exist or is empty"},
      {"endless cursor", {Page("5", {})}, "HSCAN did not finish after 50 pages"},
  };
  TenantHashLimits limits;
  limits.max_pages = 50;
  for (const Case& c : cases) {
    Entries out;
    Status st = ReadTenantHash(Scripted(c.replies), "k", &out, limits);
    EXPECT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.message().find(c.error), std::string::npos) << c.name << " -> " << st.message();
  }
  // Too many fields, across pages.
  limits.max_entries = 3;
  Entries out;
  Status st =
      ReadTenantHash(Scripted({Page("1", {"a", "v", "b", "v"}), Page("0", {"c", "v", "d", "v"})}),
                     "k", &out, limits);
  EXPECT_NE(st.message().find("more than 3 fields"), std::string::npos) << st.message();
  // A failed call is passed on.
  RedisCommand down = [](std::vector<std::string>) {
    return Result<RedisReply>(UnavailableError("connection refused"));
  };
  EXPECT_EQ(ReadTenantHash(down, "k", &out).message(), "connection refused");
}

#if TOLLGATE_TEST_REDIS
TEST(ReadTenantHash, ReadsARealHashOfManyPages) {
  TOLLGATE_START_REDIS(redis);
  // 2500 fields: several HSCAN pages (COUNT 1000), in batches of 500 per HSET.
  for (int batch = 0; batch < 5; ++batch) {
    std::vector<std::string> argv = {"HSET", "plans"};
    for (int i = batch * 500; i < (batch + 1) * 500; ++i) {
      argv.push_back("tenant-" + std::to_string(i));
      argv.push_back("count=" + std::to_string(i + 1) + ",period=1h");
    }
    ASSERT_EQ(redis.Command(argv), "500");
  }
  ASSERT_EQ(redis.Command({"SET", "plain", "x"}), "OK");
  auto options = ParseRedisUrl("redis://127.0.0.1:" + std::to_string(redis.port()));
  ASSERT_TRUE(options.ok());
  auto store = RedisStore::Create(*options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  RedisCommand command = [s = store->get()](std::vector<std::string> argv) {
    return s->Command(std::move(argv));
  };
  Entries out;
  Status st = ReadTenantHash(command, "plans", &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(out.size(), 2500u);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out.front().first, "tenant-0");
  EXPECT_EQ(out.front().second, "count=1,period=1h");
  EXPECT_NE(ReadTenantHash(command, "plain", &out).message().find("WRONGTYPE"), std::string::npos);
  EXPECT_EQ(ReadTenantHash(command, "missing", &out).message(), "does not exist or is empty");
}

// tollgated with a Redis store and a rule whose tenants are a Redis hash: the
// hash's limits apply over real sockets, a change is picked up by the refresh
// (no reload asked for), and a bad entry keeps the last good table, the
// error naming the field.
TEST(TenantHashProcess, LoadsRefreshesAndRejectsOverSockets) {
  if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
  TOLLGATE_START_REDIS(redis);
  ASSERT_EQ(redis.Command({"HSET", "tollgate:plans", "big", "count=4,period=1h"}), "1");
  ScopedTempDir temp;
  const std::string dir = temp.path();
  WriteFile(dir + "/policy.json", R"({"rules": [
    {"name": "per-tenant", "limit_keys": ["header:x-api-key"],
     "tenants": {"redis_hash": "tollgate:plans", "refresh": "1s"},
     "algorithm_config": {"count": 2, "period": "1h"}}]})");
  WriteFile(dir + "/tollgated.json", R"({"policy": ")" + dir + R"(/policy.json",
      "listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "threads": 1,
      "decision_on_main": true,
      "policy_poll_interval_ms": 100,
      "store": {"url": "redis://127.0.0.1:)" +
                                         std::to_string(redis.port()) + R"("}})");
  Tollgated t({"--config", dir + "/tollgated.json"}, dir);
  ASSERT_TRUE(t.WaitStarted()) << "log: " << t.Log() << " stdout: " << t.Stdout();
  auto allowed = [&](const std::string& key, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) {
      ok += Fetch(t.port(), "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", key}})
                .status == 204;  // /v1/auth: 204 allowed, 429 rejected
    }
    return ok;
  };
  EXPECT_EQ(allowed("big", 6), 4);
  EXPECT_EQ(allowed("other", 4), 2);

  // A new tenant written to the hash: live after a refresh, nothing reloaded by hand.
  ASSERT_EQ(redis.Command({"HSET", "tollgate:plans", "fresh", "count=3,period=1h"}), "1");
  const std::string item = R"({"items": [{"rule": "per-tenant", "key": "fresh", "cost": 0}]})";
  auto limit_of_fresh = [&] {
    HttpResponse r = Fetch(t.port(), "POST", "/v1/decide", {}, item);
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("rules") ? j["rules"][0].value("limit", int64_t{0})
                                                : int64_t{-1};
  };
  EXPECT_TRUE(WaitFor([&] { return limit_of_fresh() == 3; }, std::chrono::seconds(20))) << t.Log();
  EXPECT_EQ(allowed("fresh", 5), 3);

  // A bad entry: the refresh fails naming the field, the last good table stays.
  ASSERT_EQ(redis.Command({"HSET", "tollgate:plans", "broken", "count=many,period=1h"}), "1");
  EXPECT_TRUE(WaitFor(
      [&] {
        return t.Log().find("redis hash tollgate:plans field \\\"broken\\\": count must be") !=
               std::string::npos;
      },
      std::chrono::seconds(20)))
      << t.Log();
  EXPECT_EQ(limit_of_fresh(), 3);
  EXPECT_EQ(allowed("big", 1), 0);  // still the 4 of "big", all used
}

// Issue 29, finding 5: a policy whose Redis tenant table is invalid is refused
// by `--check` as by a start, both exiting 2 (the unit does not restart it),
// with the field named. Redis out of reach: --check leaves the table unchecked
// (exit 0, saying so) and a start exits 1 (a restart may find it back).
TEST(TenantHashProcess, AnInvalidTableFailsCheckAndStartWithExit2) {
  if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
  TOLLGATE_START_REDIS(redis);
  ASSERT_EQ(redis.Command({"HSET", "tollgate:bad-plans", "oops", "count=many,period=1h"}), "1");
  ScopedTempDir temp;
  const std::string dir = temp.path();
  WriteFile(dir + "/policy.json", R"({"rules": [
    {"name": "per-tenant", "limit_keys": ["header:x-api-key"],
     "tenants": {"redis_hash": "tollgate:bad-plans"},
     "algorithm_config": {"count": 2, "period": "1h"}}]})");
  auto config = [&](int port) {
    WriteFile(dir + "/tollgated.json", R"({"policy": ")" + dir + R"(/policy.json",
        "listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}, "threads": 1,
        "store": {"url": "redis://127.0.0.1:)" +
                                           std::to_string(port) + R"(", "timeout_ms": 200}})");
    return std::vector<std::string>{"--config", dir + "/tollgated.json"};
  };
  std::vector<std::string> check_args = config(redis.port());
  check_args.push_back("--check");
  Tollgated check(check_args, dir);
  EXPECT_EQ(check.WaitExit(std::chrono::seconds(20)), 2) << check.Log();
  EXPECT_NE(check.Log().find("rules[0].tenants"), std::string::npos) << check.Log();
  EXPECT_NE(check.Log().find("count must be"), std::string::npos) << check.Log();
  Tollgated start(config(redis.port()), dir);
  EXPECT_EQ(start.WaitExit(std::chrono::seconds(20)), 2) << start.Log();
  EXPECT_NE(start.Log().find("count must be"), std::string::npos) << start.Log();

  // Redis out of reach (a port nobody listens on once the server is gone).
  const int gone = redis.port();
  redis.Stop();
  std::vector<std::string> down_check = config(gone);
  down_check.push_back("--check");
  Tollgated check_down(down_check, dir);
  EXPECT_EQ(check_down.WaitExit(std::chrono::seconds(20)), 0) << check_down.Log();
  EXPECT_NE(check_down.Log().find("tenant tables not checked"), std::string::npos)
      << check_down.Log();
  Tollgated start_down(config(gone), dir);
  EXPECT_EQ(start_down.WaitExit(std::chrono::seconds(20)), 1) << start_down.Log();
}
#endif

}  // namespace
}  // namespace tollgate::testing
