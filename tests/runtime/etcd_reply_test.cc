// The etcd gateway's replies as etcd 3.4 sends them (captured with curl), and
// hostile variants: every one parsed or refused with the field and the reason.
#include "runtime/etcd_reply.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate::etcd {
namespace {

constexpr char kHeader[] =
    R"("header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"2","raft_term":"2"})";

TEST(EtcdReply, RangeWithTheKey) {
  const std::string body =
      std::string("{") + kHeader +
      R"(,"kvs":[{"key":"L3RvbGxnYXRlL3BvbGljeQ==","create_revision":"2","mod_revision":"2","version":"1","value":"eyJydWxlcyI6W119"}],"count":"1"})";
  auto r = ParseRangeReply(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->revision, 2);
  ASSERT_TRUE(r->kv);
  EXPECT_EQ(r->kv->key, "/tollgate/policy");
  EXPECT_EQ(r->kv->value, R"({"rules":[]})");
  EXPECT_EQ(r->kv->mod_revision, 2);
}

TEST(EtcdReply, RangeWithoutTheKey) {
  auto r = ParseRangeReply(std::string("{") + kHeader + "}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->revision, 2);
  EXPECT_FALSE(r->kv);
}

TEST(EtcdReply, WatchCreatedPutDeleteAndCompacted) {
  auto created = ParseWatchLine(std::string(R"({"result":{)") + kHeader + R"(,"created":true}})");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(created->created);
  EXPECT_TRUE(created->events.empty());

  auto put = ParseWatchLine(
      std::string(R"({"result":{)") + kHeader +
      R"(,"events":[{"kv":{"key":"L3RvbGxnYXRlL3BvbGljeQ==","mod_revision":"2","value":"eyJydWxlcyI6W119"}}]}})");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_EQ(put->events.size(), 1u);
  EXPECT_FALSE(put->events[0].deleted);
  EXPECT_EQ(put->events[0].kv.value, R"({"rules":[]})");

  auto del = ParseWatchLine(
      R"({"result":{"header":{"revision":"3"},"events":[{"type":"DELETE","kv":{"key":"L3RvbGxnYXRlL3BvbGljeQ==","mod_revision":"3"}}]}})");
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  ASSERT_EQ(del->events.size(), 1u);
  EXPECT_TRUE(del->events[0].deleted);
  EXPECT_EQ(del->events[0].kv.mod_revision, 3);

  auto compacted = ParseWatchLine(
      R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"3"}})");
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  EXPECT_TRUE(compacted->canceled);
  EXPECT_EQ(compacted->compact_revision, 3);
}

TEST(EtcdReply, WatchErrorIsUnavailable) {
  auto r = ParseWatchLine(R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("no leader"), std::string::npos);
}

TEST(EtcdReply, HostileRepliesNameTheFieldAndReason) {
  struct Case {
    std::string text;
    std::string expected;
  } cases[] = {
      {"", "not JSON"},
      {"[1]", "not a JSON object"},
      {R"({"header":{"revision":"-1"}})", "header.revision: must be decimal digits"},
      {R"({"header":{"revision":"1234567890123456789"}})", "header.revision: must be 1 to 18"},
      {R"({"header":{"revision":true}})", "header.revision: must be a decimal string"},
      {R"({"header":{"revision":18446744073709551615}})", "non-negative int64"},
      {R"({"header":[]})", "header: must be an object"},
      {R"({"kvs":{}})", "kvs: must be an array"},
      {R"({"kvs":[{},{}]})", "one key was asked for, 2 came back"},
      {R"({"kvs":[{"value":"!!!!"}]})", "kvs[0].value: not base64"},
      {R"({"kvs":[{"value":"QQ="}]})", "kvs[0].value: not base64"},
      {R"({"kvs":[{"value":7}]})", "kvs[0].value: must be a string"},
      {std::string(20, '[') + std::string(20, ']'), "nested deeper than"},
      {std::string(kMaxReplyBytes + 1, ' '), "larger than"},
  };
  for (const Case& c : cases) {
    auto r = ParseRangeReply(c.text);
    ASSERT_FALSE(r.ok()) << c.text.substr(0, 80);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << r.status().message() << " for " << c.text.substr(0, 80);
  }
  EXPECT_FALSE(ParseWatchLine(R"({"result":{"events":[{"type":"NOPE"}]}})").ok());
  EXPECT_FALSE(ParseWatchLine(R"({"result":{"events":[1]}})").ok());
  EXPECT_FALSE(ParseWatchLine(R"({"something":{}})").ok());
}

TEST(EtcdReply, Base64RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    std::string back;
    ASSERT_TRUE(Base64Decode(Base64Encode(bytes), &back)) << i;
    EXPECT_EQ(back, bytes);
    bytes.push_back(char(i * 37));
  }
  std::string out;
  EXPECT_FALSE(Base64Decode("QQ=A", &out));
  EXPECT_FALSE(Base64Decode("=AAA", &out));
  EXPECT_TRUE(Base64Decode("QQ==", &out));
  EXPECT_EQ(out, "A");
}

TEST(EtcdReply, RequestsEncodeKeyValueAndRevision) {
  EXPECT_EQ(RangeRequest("/k"), R"({"key":"L2s="})");
  EXPECT_EQ(PutRequest("/k", "v"), R"({"key":"L2s=","value":"dg=="})");
  EXPECT_EQ(WatchRequest("/k", 0), R"({"create_request":{"key":"L2s="}})");
  EXPECT_EQ(WatchRequest("/k", 42), R"({"create_request":{"key":"L2s=","start_revision":"42"}})");
}

}  // namespace
}  // namespace tollgate::etcd
