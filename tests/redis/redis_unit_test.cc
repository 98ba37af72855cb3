// Pure parts of the Redis store: key escaping, URL parsing, decision decoding.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "redis/gcra_script.h"
#include "redis/redis_keys.h"
#include "redis/reply_reader.h"
#include "redis/settle_script.h"
#include "tollgate/algorithm.h"
#include "tollgate/redis_store.h"

namespace tollgate::redis {
namespace {

TEST(RedisKeys, EscapesEverythingThatCouldFormAHashTagOrBreakALine) {
  EXPECT_EQ(EscapeKey("api:user-1"), "api:user-1");
  EXPECT_EQ(EscapeKey("{tag}"), "%7btag%7d");
  EXPECT_EQ(EscapeKey("a b\nc"), "a%20b%0ac");
  EXPECT_EQ(EscapeKey("100%"), "100%25");
  EXPECT_EQ(EscapeKey("#x"), "%23x");
  EXPECT_EQ(EscapeKey(""), "");
  for (const char* k : {"{a}", "x{y}z", "}{", "\r\n", "\xff"}) {
    const std::string e = EscapeKey(k);
    EXPECT_EQ(e.find_first_of("{} \r\n#"), std::string::npos) << e;
  }
}

TEST(RedisKeys, LongKeysAreHashedToABoundedForm) {
  const std::string a(10000, 'a'), b = std::string(9999, 'a') + "b";
  const std::string ea = EscapeKey(a), eb = EscapeKey(b);
  EXPECT_EQ(ea.size(), 33u);
  EXPECT_EQ(ea[0], '#');
  EXPECT_NE(ea, eb);
  EXPECT_EQ(ea, EscapeKey(a));  // stable across processes: no random seed
  // Short keys whose escape would pass the bound are hashed too.
  const std::string braces(60, '{');
  EXPECT_EQ(EscapeKey(braces).size(), 33u);
  EXPECT_EQ(EscapeKey(std::string(kMaxEscapedKey, 'x')).size(), kMaxEscapedKey);
}

TEST(RedisKeys, DistinctKeysStayDistinct) {
  std::set<std::string> seen;
  std::vector<std::string> keys = {"a", "a ", "a%20", "%", "%25", "{a}", "%7ba%7d", "#", "%23"};
  for (int i = 0; i < 200; ++i) keys.push_back(std::string(static_cast<size_t>(i), 'q'));
  for (const auto& k : keys) EXPECT_TRUE(seen.insert(RedisKey("tg:", k)).second) << k;
}

TEST(RedisUrl, ParsesHostPortAuthDbAndOptions) {
  auto o = ParseRedisUrl("redis://bob:s%40cret@10.0.0.5:6380/3?prefix=rl:&timeout_ms=50&pool=3");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->host, "10.0.0.5");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->username, "bob");
  EXPECT_EQ(o->password, "s@cret");
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->key_prefix, "rl:");
  EXPECT_EQ(o->call_timeout.count(), 50);
  EXPECT_EQ(o->connections, 3u);

  auto d = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0);
  auto p = ParseRedisUrl("redis://:pw@h:1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->username, "");
  EXPECT_EQ(p->password, "pw");
  auto v6 = ParseRedisUrl("redis://[::1]:7000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);
}

TEST(RedisUrl, RejectsBadUrlsWithAReason) {
  for (const char* bad : {"http://h:1", "redis://", "redis://h:0", "redis://h:99999",
                          "redis://h:1/x", "redis://h?bogus=1", "redis://%zz@h"}) {
    auto r = ParseRedisUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
  // tls_* options belong to rediss:// only; the opt-out takes exactly "1".
  for (const char* bad : {"redis://h:1?tls_ca_file=/ca.pem", "rediss://h:1?tls_ca_file=",
                          "rediss://h:1?tls_insecure_skip_verify=true", "rediss://h:1?tls=1"}) {
    auto r = ParseRedisUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(RedisUrl, RejectsEveryMalformedEscape) {
  // Truncated, non-hex and signed escapes in user info and option values. "%-1" once decoded
  // to 0xff (a sign taken for a hex digit).
  for (const char* bad : {"redis://%-1@h", "redis://:p%-1@h", "redis://:p%+1@h", "redis://:p%@h",
                          "redis://:p%4@h", "redis://u%g0:p@h", "redis://h?prefix=%-1",
                          "redis://h?prefix=a%", "rediss://h?tls_server_name=%4"}) {
    auto r = ParseRedisUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  auto nul = ParseRedisUrl("redis://:a%00b@h");  // a NUL is a byte like any other in AUTH
  ASSERT_TRUE(nul.ok()) << nul.status().ToString();
  EXPECT_EQ(nul->password, std::string("a\0b", 3));
}

TEST(RedisUrl, ParsesRedissWithTlsOptions) {
  auto plain = ParseRedisUrl("redis://h:1");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  auto o = ParseRedisUrl(
      "rediss://u:p@cache.internal:6380/2?tls_ca_file=/etc/ca%20dir/ca.pem"
      "&tls_cert_file=/c.pem&tls_key_file=/c.key&tls_server_name=redis.example&pool=3");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->host, "cache.internal");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->username, "u");
  EXPECT_EQ(o->password, "p");
  EXPECT_EQ(o->tls_ca_file, "/etc/ca dir/ca.pem");
  EXPECT_EQ(o->tls_cert_file, "/c.pem");
  EXPECT_EQ(o->tls_key_file, "/c.key");
  EXPECT_EQ(o->tls_server_name, "redis.example");
  EXPECT_FALSE(o->tls_insecure_skip_verify);
  EXPECT_EQ(o->connections, 3u);
  auto insecure = ParseRedisUrl("rediss://h?tls_insecure_skip_verify=1");
  ASSERT_TRUE(insecure.ok());
  EXPECT_TRUE(insecure->tls_insecure_skip_verify);
  EXPECT_EQ(insecure->port, 6379);
}

TEST(GcraScript, AcceptsFixedAndSlidingWindowsRejectsSlidingLog) {
  LimitSpec s;
  s.burst = 10;
  s.window = std::chrono::seconds(1);
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow}) {
    s.algorithm = a;
    auto l = Limit::Create(s);
    ASSERT_TRUE(l.ok());
    EXPECT_TRUE(CheckScriptLimit(*l).ok()) << AlgorithmName(a);
  }
  s.algorithm = Algorithm::kSlidingLog;
  auto log = Limit::Create(s);
  ASSERT_TRUE(log.ok());
  Status st = CheckScriptLimit(*log);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sliding_log is not supported by the redis store"),
            std::string::npos);
}

TEST(GcraScript, WindowStateKeysNameAlgorithmAndWindowLength) {
  LimitSpec s;
  s.burst = 10;
  s.window = std::chrono::seconds(60);
  s.algorithm = Algorithm::kFixedWindow;
  EXPECT_EQ(StateKeySuffix(*Limit::Create(s)), "|fw:60000000000");
  s.algorithm = Algorithm::kSlidingWindow;
  EXPECT_EQ(StateKeySuffix(*Limit::Create(s)), "|sw:60000000000");
  LimitSpec b;
  b.rate = 1;
  b.burst = 1;
  EXPECT_EQ(StateKeySuffix(*Limit::Create(b)), "");
  // '|' is always escaped, so no item key can forge a suffix.
  EXPECT_EQ(EscapeKey("a|fw:1"), "a%7cfw:1");
}

TEST(GcraScript, MsgpackIntegersRoundTripAndGarbageIsRefused) {
  const std::vector<int64_t> values = {0,
                                       1,
                                       127,
                                       128,
                                       65535,
                                       4294967295LL,
                                       4294967296LL,
                                       int64_t{1} << 41,
                                       -1,
                                       -32,
                                       -33,
                                       -(int64_t{1} << 40),
                                       INT64_MAX,
                                       INT64_MIN};
  std::string wire;
  AppendMsgpackArrayHeader(wire, values.size());
  for (int64_t v : values) AppendMsgpackInt(wire, v);
  std::vector<int64_t> back;
  ASSERT_TRUE(ParseMsgpackInts(wire, &back));
  EXPECT_EQ(back, values);
  // What cmsgpack emits for small arrays and negative fixints.
  ASSERT_TRUE(ParseMsgpackInts(std::string("\x93\x01\xff\xd0\x80", 5), &back));
  EXPECT_EQ(back, (std::vector<int64_t>{1, -1, -128}));
  EXPECT_FALSE(ParseMsgpackInts(wire.substr(0, wire.size() - 1), &back));  // truncated
  EXPECT_FALSE(ParseMsgpackInts(wire + "x", &back));                       // trailing bytes
  EXPECT_FALSE(ParseMsgpackInts("", &back));
  EXPECT_FALSE(ParseMsgpackInts(std::string("\x91\xcb", 2), &back));  // a double
  EXPECT_FALSE(ParseMsgpackInts(std::string("\xdd\xff\xff\xff\xff", 5), &back));
}

// DecodeDecision reproduces Step() given the script's (code, rel) answer.
TEST(GcraScript, DecodeMatchesStepForEveryOutcome) {
  LimitSpec s;
  s.rate = 7.5;
  s.burst = 4;
  const Limit l = *Limit::Create(s);
  const int64_t now = 1'700'000'000'123'456'789LL;
  uint64_t state = 0;
  for (int64_t cost : {0, 1, 2, 1, 3, 5, 0, 1}) {
    StepResult r = Step(l, state, cost, now);
    const ScriptItem item = MakeScriptItem(l, cost);
    const int64_t tat_after = r.changed ? static_cast<int64_t>(r.state)
                                        : std::max<int64_t>(static_cast<int64_t>(state), now);
    const int code = r.decision.allowed ? 1 : 0;
    EXPECT_EQ(DecodeDecision(l, item, code, tat_after - now), r.decision) << cost;
    if (r.changed) state = r.state;
  }
}

// What the script can send for an item, and nothing else (a hostile or broken
// server cannot make DecodeDecision overflow or report a negative wait).
TEST(GcraScript, ReplyTriplesTheScriptCannotSendAreRefused) {
  LimitSpec s;
  s.rate = 7.5;
  s.burst = 4;
  const Limit l = *Limit::Create(s);
  const ScriptItem gcra = MakeScriptItem(l, 1);
  const ScriptItem peek = MakeScriptItem(l, 0);
  const ScriptItem never = MakeScriptItem(l, 5);
  ASSERT_EQ(gcra.kind, ItemKind::kGcra);
  ASSERT_EQ(peek.kind, ItemKind::kPeek);
  ASSERT_EQ(never.kind, ItemKind::kNever);
  EXPECT_TRUE(ValidScriptTriple(gcra, 1, 0, 133'333'334));
  EXPECT_TRUE(ValidScriptTriple(gcra, 0, 1, 0));   // denied: 1 s of debt > the tolerance
  EXPECT_FALSE(ValidScriptTriple(gcra, 0, 0, 0));  // "denied" with a full bucket
  EXPECT_FALSE(ValidScriptTriple(gcra, 4, 0, 0));  // no code 4
  EXPECT_FALSE(ValidScriptTriple(gcra, -1, 0, 0));
  EXPECT_FALSE(ValidScriptTriple(gcra, 1, -1, 0));
  EXPECT_FALSE(ValidScriptTriple(gcra, 1, 0, -1));
  EXPECT_FALSE(ValidScriptTriple(gcra, 1, 0, 1'000'000'000));
  // rel_s * 1e9 + rel_ns would overflow int64 in DecodeJob.
  EXPECT_FALSE(ValidScriptTriple(gcra, 1, INT64_MAX, 0));
  EXPECT_FALSE(ValidScriptTriple(gcra, 1, kMaxReplySeconds + 1, 0));
  EXPECT_TRUE(ValidScriptTriple(gcra, 1, kMaxReplySeconds, 999'999'999));
  // Found by fuzz/targets/script_reply.cc: a denied peek decoded to a
  // negative Retry-After. A peek always fits (1, or 3 in a denied group).
  EXPECT_FALSE(ValidScriptTriple(peek, 0, 0, 0));
  EXPECT_FALSE(ValidScriptTriple(peek, 2, 0, 0));
  EXPECT_TRUE(ValidScriptTriple(peek, 3, 0, 0));
  EXPECT_FALSE(ValidScriptTriple(never, 1, 0, 0));
  EXPECT_TRUE(ValidScriptTriple(never, 0, 0, 0));
  // A window count past 2^41.
  LimitSpec w;
  w.algorithm = Algorithm::kSlidingWindow;
  w.burst = 10;
  w.window = std::chrono::seconds(1);
  const ScriptItem window = MakeScriptItem(*Limit::Create(w), 1);
  EXPECT_TRUE(ValidScriptTriple(window, 1 + 8 * 5, 0, 1));
  EXPECT_FALSE(ValidScriptTriple(window, 1 + 8 * (int64_t{1} << 41), 0, 1));
  // Every answer the script gives for a real sequence passes.
  const int64_t now = 1'700'000'000'123'456'789LL;
  uint64_t state = 0;
  for (int64_t cost : {0, 1, 2, 1, 3, 5, 0, 1}) {
    StepResult r = Step(l, state, cost, now);
    const int64_t tat_after = r.changed ? static_cast<int64_t>(r.state)
                                        : std::max<int64_t>(static_cast<int64_t>(state), now);
    const int64_t rel = tat_after - now;
    EXPECT_TRUE(ValidScriptTriple(MakeScriptItem(l, cost), r.decision.allowed ? 1 : 0,
                                  rel / 1'000'000'000, rel % 1'000'000'000))
        << cost;
    if (r.changed) state = r.state;
  }
}

// Found by fuzz/targets/script_reply.cc (UBSan): a denied sliding-window item
// whose counts say it fits (prev 0, curr 1: the script never sends that) made
// the wait w - (burst - cost) * w / curr overflow int64. Waits are computed
// wide and held to what the script can mean: 1 ns .. two windows.
TEST(GcraScript, WindowDecodeHoldsAnyCountsToTwoWindows) {
  LimitSpec s;
  s.algorithm = Algorithm::kSlidingWindow;
  s.burst = (1 << 20) - 1;
  s.window = std::chrono::hours(24 * 366);
  const Limit l = *Limit::Create(s);
  const ScriptItem item = MakeScriptItem(l, 1);
  for (int64_t count : {int64_t{1}, int64_t{1} << 20, (int64_t{1} << 41) - 1}) {
    for (int64_t r : {int64_t{1}, l.window_ns(), int64_t{1} << 61}) {
      const Decision d = DecodeDecision(l, item, /*code=*/0, r, count);
      const int64_t ahead = r > l.window_ns() ? r - l.window_ns() : 0;
      EXPECT_GE(d.retry_after.count(), 1 + ahead) << count << " " << r;
      EXPECT_LE(d.retry_after.count(), 2 * l.window_ns() + ahead) << count << " " << r;
    }
  }
}

TEST(GcraScript, ScriptShaIsFortyLowerCaseHexDigits) {
  EXPECT_TRUE(IsScriptSha("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"));
  EXPECT_FALSE(IsScriptSha("E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"));
  EXPECT_FALSE(IsScriptSha("e0e1f9fabfc9d4800c877a703b823ac0578ff8d"));
  EXPECT_FALSE(IsScriptSha(std::string(40, 'g')));
  EXPECT_FALSE(IsScriptSha(std::string(1 << 20, 'a')));
}

// Reads everything `resp` holds; false (with the reader's reason) on failure.
bool ReadReplies(ReplyReader& reader, std::string_view resp, std::vector<ReplyPtr>* out) {
  if (!reader.Feed(resp.data(), resp.size())) return false;
  for (;;) {
    ReplyPtr r;
    if (!reader.Next(&r)) return false;
    if (!r) return true;
    out->push_back(std::move(r));
  }
}

TEST(ReplyReader, ReadsRepliesAcrossPieces) {
  ReplyReader reader;
  std::vector<ReplyPtr> got;
  const std::string resp = "+OK\r\n*2\r\n:1\r\n$3\r\nabc\r\n-ERR x\r\n";
  for (char c : resp) ASSERT_TRUE(ReadReplies(reader, std::string_view(&c, 1), &got));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0]->type, REDIS_REPLY_STATUS);
  ASSERT_EQ(got[1]->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(got[1]->elements, 2u);
  EXPECT_EQ(std::string(got[1]->element[1]->str, got[1]->element[1]->len), "abc");
  EXPECT_EQ(got[2]->type, REDIS_REPLY_ERROR);
}

// Issue 15: hiredis allocates what an array header announces (16 GiB for
// "*2147483647") and buffers a bulk string until it is complete, however long.
TEST(ReplyReader, AnnouncedSizesPastTheBoundsAreRefusedBeforeAllocating) {
  {
    ReplyReader reader;
    std::vector<ReplyPtr> got;
    EXPECT_FALSE(ReadReplies(reader, "*2147483647\r\n", &got));
    EXPECT_EQ(reader.error(), "a reply of more than 1048576 objects");
    // The reader stays failed.
    EXPECT_FALSE(ReadReplies(reader, "+OK\r\n", &got));
    EXPECT_TRUE(got.empty());
  }
  {
    // Many arrays, each within the bound, that add up past it in one reply.
    ReplyReader reader;
    std::vector<ReplyPtr> got;
    std::string resp = "*3\r\n";
    for (int i = 0; i < 3; ++i) {
      resp += "*500000\r\n";
      for (int j = 0; j < 500000; ++j) resp += ":1\r\n";
    }
    EXPECT_FALSE(ReadReplies(reader, resp, &got));
    EXPECT_EQ(reader.error(), "a reply of more than 1048576 objects");
  }
  {
    // The same objects spread over replies are fine: the budget is per reply.
    ReplyReader reader;
    std::vector<ReplyPtr> got;
    std::string resp;
    for (int i = 0; i < 3; ++i) {
      resp += "*500000\r\n";
      for (int j = 0; j < 500000; ++j) resp += ":1\r\n";
    }
    ASSERT_TRUE(ReadReplies(reader, resp, &got)) << reader.error();
    EXPECT_EQ(got.size(), 3u);
  }
}

TEST(ReplyReader, EndlessBulkStringsAndLinesAreCutOff) {
  for (const std::string head : {"$9223372036854775807\r\n", "$40000000\r\n", "+"}) {
    ReplyReader reader;
    std::vector<ReplyPtr> got;
    const std::string chunk(1 << 20, 'x');
    bool ok = ReadReplies(reader, head, &got);
    size_t fed = 0;
    while (ok && fed < (size_t{40} << 20)) {
      ok = ReadReplies(reader, chunk, &got);
      fed += chunk.size();
    }
    EXPECT_FALSE(ok) << head;
    EXPECT_LE(fed, ReplyReader::kMaxBulkBytes + chunk.size()) << head;
    EXPECT_EQ(reader.error(), "an item of more than 33554432 bytes") << head;
  }
}

TEST(ReplyReader, NestingDeeperThanHiredisAllowsIsAProtocolError) {
  std::string resp;
  for (int i = 0; i < 8; ++i) resp += "*1\r\n";
  ReplyReader eight;
  std::vector<ReplyPtr> got;
  EXPECT_TRUE(ReadReplies(eight, resp + ":1\r\n", &got));
  ReplyReader nine;
  EXPECT_FALSE(ReadReplies(nine, "*1\r\n" + resp + ":1\r\n", &got));
  EXPECT_NE(nine.error().find("depth"), std::string::npos) << nine.error();
}

}  // namespace
}  // namespace tollgate::redis

namespace tollgate {
namespace {

RedisReply Ints(std::initializer_list<int64_t> values) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  for (int64_t v : values) {
    RedisReply e;
    e.type = RedisReply::Type::kInteger;
    e.integer = v;
    r.elements.push_back(e);
  }
  return r;
}

// A window settlement's reply decoded in a synthetic window: for every window
// length up to the longest period (366 days), the report is exact (the
// window's end is the reply's `rel`), with no overflow on the way (UBSan).
TEST(SettleReply, WindowReportsAreExactForEveryWindowLength) {
  using std::chrono::hours;
  using std::chrono::milliseconds;
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow}) {
    for (Nanos window : {Nanos(milliseconds(1)), Nanos(std::chrono::seconds(1)), Nanos(hours(1)),
                         Nanos(hours(24 * 30)), Nanos(hours(24 * 366))}) {
      SCOPED_TRACE(std::string(AlgorithmName(a)) + " " + std::to_string(window.count()));
      LimitSpec spec;
      spec.algorithm = a;
      spec.burst = 10;
      spec.window = window;
      const Limit limit = *Limit::Create(spec);
      SettleItem item{"k", &limit, 14, 0};
      const int64_t rel = window.count() / 2 + 1;  // half the window left
      // 15 counted against 10 (sliding: nothing in the previous window).
      auto over = redis::DecodeSettleReply(
          item, Ints({14, 0, 15, rel / 1'000'000'000, rel % 1'000'000'000}));
      ASSERT_TRUE(over.ok()) << over.status().ToString();
      EXPECT_EQ(over->charged, 14);
      EXPECT_FALSE(over->decision.allowed);
      EXPECT_EQ(over->decision.remaining, 0);
      if (a == Algorithm::kFixedWindow) {
        EXPECT_EQ(over->decision.reset_after.count(), rel);
        EXPECT_EQ(over->decision.retry_after.count(), rel);
      } else {
        EXPECT_GT(over->decision.retry_after.count(), 0);
        EXPECT_LE(over->decision.retry_after, window);
      }
      // 4 of 10: allowed, 6 left.
      auto under =
          redis::DecodeSettleReply(item, Ints({3, 0, 4, rel / 1'000'000'000, rel % 1'000'000'000}));
      ASSERT_TRUE(under.ok()) << under.status().ToString();
      EXPECT_TRUE(under->decision.allowed);
      EXPECT_EQ(under->decision.remaining, 6);
    }
  }
}

}  // namespace
}  // namespace tollgate
