// SPOP (server/spoe/spop.h) and the agent's translations (spoe_message.h):
// the encodings of doc/SPOE.txt, and hostile frames refused with the right
// SPOP status, never read past their bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "server/spoe/spoe_message.h"
#include "server/spoe/spop.h"

namespace tollgate::spop {
namespace {

// The parsers return views into the bytes they parsed (as the agent keeps its read buffer while
// it uses them): a test keeps each input alive for the whole test binary's run.
std::string_view Kept(std::string bytes) {
  static std::deque<std::string> kept;
  return kept.emplace_back(std::move(bytes));
}

std::string Varint(uint64_t v) {
  std::string s;
  AppendVarint(v, &s);
  return s;
}

std::string Str(std::string_view s) { return Varint(s.size()) + std::string(s); }
std::string TypedStr(std::string_view s) {
  return std::string(1, char(DataType::kString)) + Str(s);
}
std::string TypedUint(uint64_t v) { return std::string(1, char(DataType::kUint32)) + Varint(v); }

// A frame as HAProxy sends it: type, flags, ids, payload; without the prefix.
std::string RawFrame(FrameType type, uint32_t flags, uint64_t stream, uint64_t id,
                     const std::string& payload) {
  std::string f(1, char(type));
  f += std::string{char(flags >> 24), char(flags >> 16), char(flags >> 8), char(flags)};
  f += Varint(stream) + Varint(id) + payload;
  return f;
}

std::string HelloPayload(std::string_view versions, uint64_t max_frame, std::string_view caps) {
  return Str("supported-versions") + TypedStr(versions) + Str("max-frame-size") +
         TypedUint(max_frame) + Str("capabilities") + TypedStr(caps) + Str("engine-id") +
         TypedStr("c0ffee");
}

TEST(SpopVarint, MatchesThePeersEncodingAtEveryLengthBoundary) {
  // doc/SPOE.txt 3.1: 1 byte below 240, 2 below 2288, 3 below 264432...
  EXPECT_EQ(Varint(239), std::string("\xef", 1));
  EXPECT_EQ(Varint(240), std::string("\xf0\x00", 2));
  EXPECT_EQ(Varint(2287).size(), 2u);
  EXPECT_EQ(Varint(2288), std::string("\xf0\x80\x00", 3));
  EXPECT_EQ(Varint(264431).size(), 3u);
  EXPECT_EQ(Varint(264432).size(), 4u);
  EXPECT_EQ(Varint(33818863).size(), 4u);
  EXPECT_EQ(Varint(33818864).size(), 5u);
  for (uint64_t v :
       {uint64_t{0}, uint64_t{1}, uint64_t{239}, uint64_t{240}, uint64_t{2287}, uint64_t{2288},
        uint64_t{16380}, uint64_t{0xffffffff}, std::numeric_limits<uint64_t>::max() - 1,
        std::numeric_limits<uint64_t>::max()}) {
    std::string bytes = Varint(v) + "rest";
    std::string_view in = bytes;
    uint64_t back = 0;
    ASSERT_TRUE(ReadVarint(&in, &back)) << v;
    EXPECT_EQ(back, v);
    EXPECT_EQ(in, "rest");
  }
}

TEST(SpopVarint, RefusesTruncatedAndOverflowingEncodings) {
  for (std::string bad : {std::string(), std::string("\xf0", 1), std::string("\xff\x80\x80", 3),
                          // 11 bytes of continuation: more than 64 bits
                          std::string("\xff") + std::string(10, '\xff') + std::string(1, '\x7f')}) {
    std::string_view in = bad;
    uint64_t v = 0;
    EXPECT_FALSE(ReadVarint(&in, &v));
    EXPECT_EQ(in.size(), bad.size()) << "nothing consumed";
  }
}

TEST(SpopFrame, CutsOnlyWholeFramesWithinTheNegotiatedSize) {
  const std::string frame = RawFrame(FrameType::kNotify, kFlagFin, 1, 2, "x");
  const std::string wire = std::string{0, 0, 0, char(frame.size())} + frame + "next";
  std::string_view out;
  size_t consumed = 0;
  for (size_t n = 0; n < 4 + frame.size(); ++n) {
    EXPECT_EQ(CutFrame(std::string_view(wire).substr(0, n), 256, &out, &consumed), Cut::kNeedMore)
        << n;
  }
  ASSERT_EQ(CutFrame(wire, 256, &out, &consumed), Cut::kFrame);
  EXPECT_EQ(out, frame);
  EXPECT_EQ(consumed, 4 + frame.size());
  // Over the size, or zero: nothing after it can be framed.
  EXPECT_EQ(CutFrame(std::string("\x00\x00\x01\x01", 4), 256, &out, &consumed), Cut::kTooBig);
  EXPECT_EQ(CutFrame(std::string("\x00\x00\x00\x00", 4), 256, &out, &consumed), Cut::kTooBig);
  EXPECT_EQ(CutFrame("GET / HTTP/1.1\r\n", 16380, &out, &consumed), Cut::kTooBig);
}

TEST(SpopFrame, RefusesFragmentsAndCutMetadata) {
  Frame f;
  // The frame's payload is a view into the bytes parsed: they outlive it here.
  const std::string notify = RawFrame(FrameType::kNotify, kFlagFin, 7, 9, "p");
  EXPECT_EQ(ParseFrame(notify, &f), Error::kNone);
  EXPECT_EQ(f.type, FrameType::kNotify);
  EXPECT_EQ(f.stream_id, 7u);
  EXPECT_EQ(f.frame_id, 9u);
  EXPECT_EQ(f.payload, "p");
  EXPECT_EQ(ParseFrame(Kept(RawFrame(FrameType::kNotify, 0, 7, 9, "p")), &f),
            Error::kFragmentation);
  EXPECT_EQ(ParseFrame(Kept(RawFrame(FrameType::kUnset, kFlagFin, 7, 9, "p")), &f),
            Error::kFragmentation);
  const std::string whole = RawFrame(FrameType::kNotify, kFlagFin, 300, 300, "");
  for (size_t n = 0; n < whole.size(); ++n) {
    EXPECT_EQ(ParseFrame(Kept(whole.substr(0, n)), &f), Error::kInvalid) << n;
  }
}

TEST(SpopHello, NegotiatesVersionSizeAndPipelining) {
  Hello h;
  ASSERT_EQ(ParseHello(Kept(HelloPayload("2.0", 16380, "pipelining, async")), &h), Error::kNone);
  EXPECT_EQ(h.engine_id, "c0ffee");
  Negotiated n;
  ASSERT_EQ(Negotiate(h, 8192, &n), Error::kNone);
  EXPECT_EQ(n.max_frame_size, 8192u);  // the smaller
  EXPECT_TRUE(n.pipelining);
  ASSERT_EQ(ParseHello(Kept(HelloPayload(" 1.0 ,2.0 ", 300, "")), &h), Error::kNone);
  ASSERT_EQ(Negotiate(h, 16380, &n), Error::kNone);
  EXPECT_EQ(n.max_frame_size, 300u);
  EXPECT_FALSE(n.pipelining);
  // Our AGENT-HELLO reads back: version 2.0, the size, the capabilities.
  std::string wire;
  AppendAgentHello(n, &wire);
  std::string_view body;
  size_t consumed = 0;
  ASSERT_EQ(CutFrame(wire, 300, &body, &consumed), Cut::kFrame);
  Frame f;
  ASSERT_EQ(ParseFrame(body, &f), Error::kNone);
  EXPECT_EQ(f.type, FrameType::kAgentHello);
  EXPECT_EQ(f.payload, Str("version") + TypedStr("2.0") + Str("max-frame-size") + TypedUint(300) +
                           Str("capabilities") + TypedStr(""));

  EXPECT_EQ(ParseHello(Kept(HelloPayload("1.0", 300, "")), &h), Error::kNone);
  EXPECT_EQ(Negotiate(h, 16380, &n), Error::kBadVersion);
  EXPECT_EQ(ParseHello(Kept(HelloPayload("2.0", 255, "")), &h), Error::kNone);
  EXPECT_EQ(Negotiate(h, 16380, &n), Error::kBadFrameSize);
}

TEST(SpopHello, RefusesMissingKeysAndLyingLengths) {
  Hello h;
  EXPECT_EQ(
      ParseHello(Kept(Str("max-frame-size") + TypedUint(300) + Str("capabilities") + TypedStr("")),
                 &h),
      Error::kNoVersion);
  EXPECT_EQ(ParseHello(Kept(Str("supported-versions") + TypedStr("2.0") + Str("capabilities") +
                            TypedStr("")),
                       &h),
            Error::kNoFrameSize);
  // max-frame-size as a string is not one.
  EXPECT_EQ(ParseHello(Kept(Str("supported-versions") + TypedStr("2.0") + Str("max-frame-size") +
                            TypedStr("300") + Str("capabilities") + TypedStr("")),
                       &h),
            Error::kNoFrameSize);
  // A string claiming more bytes than the payload has.
  EXPECT_EQ(ParseHello(Kept(Str("supported-versions") + std::string(1, char(DataType::kString)) +
                            Varint(1000) + "2.0"),
                       &h),
            Error::kInvalid);
  // A reserved type.
  EXPECT_EQ(ParseHello(Kept(Str("x") + std::string(1, '\x0c')), &h), Error::kInvalid);
  // Too many items.
  std::string many;
  for (int i = 0; i < 40; ++i) many += Str("k") + std::string(1, '\0');
  EXPECT_EQ(ParseHello(many, &h), Error::kResource);
}

TEST(SpopNotify, ReadsMessagesAndBoundsThem) {
  const std::string ip("\xc0\x00\x02\x07", 4);
  std::string payload = Str("tollgate") + char(3) + Str("method") + TypedStr("GET") + Str("src") +
                        char(DataType::kIpv4) + ip + Str("") + char(DataType::kNull);
  payload += Str("other") + char(0);
  std::vector<Message> messages;
  ASSERT_EQ(ParseNotify(payload, &messages, 16, 256), Error::kNone);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].name, "tollgate");
  ASSERT_EQ(messages[0].args.size(), 3u);
  EXPECT_EQ(messages[0].args[0].value.bytes, "GET");
  EXPECT_EQ(AddressText(messages[0].args[1].value), "192.0.2.7");
  EXPECT_EQ(messages[1].name, "other");
  EXPECT_EQ(ParseNotify(payload, &messages, 1, 256), Error::kResource);
  EXPECT_EQ(ParseNotify(payload, &messages, 16, 2), Error::kResource);
  // NB-ARGS says 5, one is there: never read past the payload.
  const std::string lying = Str("tollgate") + char(5) + Str("method") + TypedStr("GET");
  EXPECT_EQ(ParseNotify(lying, &messages, 16, 256), Error::kInvalid);
  for (size_t n = 1; n < payload.size(); ++n) {
    const Error e = ParseNotify(Kept(payload.substr(0, n)), &messages, 16, 256);
    // A cut that happens to end between messages is a shorter valid list.
    if (e == Error::kNone) {
      EXPECT_EQ(n, payload.size() - Str("other").size() - 1);
    } else {
      EXPECT_EQ(e, Error::kInvalid) << n;
    }
  }
}

TEST(SpopHeaders, ReadsHaproxysBinaryBlockAndRefusesAnUnterminatedOne) {
  const std::string block =
      Str("host") + Str("example.test") + Str("x-api-key") + Str("k1") + Str("") + Str("");
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  ASSERT_EQ(ParseHeaderBlock(block, &headers, 128), Error::kNone);
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[1].first, "x-api-key");
  EXPECT_EQ(headers[1].second, "k1");
  EXPECT_EQ(ParseHeaderBlock(Kept(block.substr(0, block.size() - 1)), &headers, 128),
            Error::kInvalid);
  EXPECT_EQ(ParseHeaderBlock(Kept(Str("") + Str("v")), &headers, 128), Error::kInvalid);
  EXPECT_EQ(ParseHeaderBlock(block, &headers, 1), Error::kResource);
}

Message MessageOf(std::vector<std::pair<std::string, Value>> args, std::vector<std::string>* keep) {
  Message m;
  m.name = "tollgate";
  keep->reserve(64);
  for (auto& [name, v] : args) {
    keep->push_back(name);
    m.args.push_back({keep->back(), v});
  }
  return m;
}

Value Text(std::string_view s) {
  Value v;
  v.type = DataType::kString;
  v.bytes = s;
  return v;
}

TEST(SpoeMessage, BuildsTheRequestTheEnforcerDecides) {
  const std::string block = Str("X-Api-Key") + Str("k1") + Str("") + Str("");
  Value headers = Text(block);
  headers.type = DataType::kBinary;
  Value src;
  src.type = DataType::kIpv6;
  const std::string v6("\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
  src.bytes = v6;
  std::vector<std::string> keep;
  Message m = MessageOf({{"method", Text("POST")},
                         {"path", Text("/a/../api//items")},
                         {"query", Text("page=2")},
                         {"src", src},
                         {"headers", headers},
                         {"host", Text("example.test")}},
                        &keep);
  SpoeRequest r;
  ASSERT_EQ(RequestFromMessage(m, &r), "");
  const RequestView view = r.View();
  EXPECT_EQ(view.method, "POST");
  EXPECT_EQ(view.path, "/api/items");  // as the gateway normalises it
  EXPECT_EQ(view.query, "page=2");
  EXPECT_EQ(view.peer_address, "2001:db8::1");
  EXPECT_EQ(view.Header("x-api-key"), "k1");
  EXPECT_EQ(view.Header("host"), "example.test");

  keep.clear();
  EXPECT_EQ(RequestFromMessage(MessageOf({{"method", Text("GET")}}, &keep), &r), "path: missing");
  keep.clear();
  EXPECT_EQ(RequestFromMessage(
                MessageOf({{"method", Text("GET")}, {"path", Text("/a\r\nb")}}, &keep), &r),
            "path: must be 1 to 8192 bytes without control bytes");
  keep.clear();
  // Found by fuzz/targets/spop_frame.cc: a path that normalises to nothing.
  EXPECT_EQ(
      RequestFromMessage(MessageOf({{"method", Text("GET")}, {"path", Text("?x")}}, &keep), &r),
      "path: empty once its query and fragment are cut");
  keep.clear();
  Value bad = Text(Kept(Str("x") + Str("y")));  // unterminated block
  bad.type = DataType::kBinary;
  EXPECT_EQ(
      RequestFromMessage(
          MessageOf({{"method", Text("GET")}, {"path", Text("/")}, {"headers", bad}}, &keep), &r),
      "headers: malformed header block (req.hdrs_bin)");
}

// The set-var actions of an ACK read back as name -> value text.
std::map<std::string, std::string> ReadActions(std::string_view payload) {
  std::map<std::string, std::string> vars;
  while (!payload.empty()) {
    EXPECT_EQ(payload[0], 1);  // SET-VAR
    EXPECT_EQ(payload[1], 3);
    EXPECT_EQ(payload[2], char(Scope::kTransaction));
    payload.remove_prefix(3);
    uint64_t n = 0;
    EXPECT_TRUE(ReadVarint(&payload, &n));
    std::string name(payload.substr(0, n));
    payload.remove_prefix(n);
    Value v;
    EXPECT_TRUE(ReadValue(&payload, &v));
    vars[name] = v.type == DataType::kBool    ? (v.boolean ? "true" : "false")
                 : v.type == DataType::kInt64 ? std::to_string(int64_t(v.integer))
                                              : std::string(v.bytes);
  }
  return vars;
}

TEST(SpoeMessage, AnswersTheVerdictAndHeadersWithinTheFrame) {
  CheckOutcome o;
  o.verdict = CheckOutcome::Verdict::kReject;
  o.http_status = 429;
  o.retry_after_seconds = 7;
  o.rules.push_back(RuleOutcome{});
  o.rules[0].rule = "keyed";
  o.denied_rule = 0;
  o.headers = {{"RateLimit", "\"keyed\";r=0;t=7"},
               {"Retry-After", "7"},
               {"Content-Type", "application/problem+json"},
               {"Bad Name", "x"}};
  ActionList actions;
  ActionsFromOutcome(o, 4096, &actions);
  auto vars = ReadActions(actions.payload());
  EXPECT_EQ(vars["deny"], "true");
  EXPECT_EQ(vars["status"], "429");
  EXPECT_EQ(vars["retry_after"], "7");
  EXPECT_EQ(vars["rule"], "keyed");
  EXPECT_EQ(vars["h_ratelimit"], "\"keyed\";r=0;t=7");
  EXPECT_EQ(vars["h_retry_after"], "7");
  EXPECT_EQ(vars.count("h_content_type"), 0u);
  EXPECT_EQ(vars.size(), 6u);
  // A header that does not fit is left out; the verdict never is.
  o.headers = {{"RateLimit", std::string(300, 'x')}};
  ActionList small;
  ActionsFromOutcome(o, 200, &small);
  vars = ReadActions(small.payload());
  EXPECT_EQ(vars["deny"], "true");
  EXPECT_EQ(vars.count("h_ratelimit"), 0u);
  EXPECT_LE(small.size(), 200u);
}

TEST(SpopDisconnect, ReadsHaproxysAndWritesOurs) {
  std::string wire;
  AppendAgentDisconnect(Error::kTooBig, ErrorMessage(Error::kTooBig), &wire);
  std::string_view body;
  size_t consumed = 0;
  ASSERT_EQ(CutFrame(wire, 256, &body, &consumed), Cut::kFrame);
  Frame f;
  ASSERT_EQ(ParseFrame(body, &f), Error::kNone);
  EXPECT_EQ(f.type, FrameType::kAgentDisconnect);
  Disconnect d;
  ASSERT_EQ(ParseDisconnect(f.payload, &d), Error::kNone);
  EXPECT_EQ(d.status_code, 3u);
  EXPECT_EQ(d.message, "frame is too big");
  EXPECT_EQ(ParseDisconnect(Kept(Str("message") + TypedStr("x")), &d), Error::kInvalid);
}

}  // namespace
}  // namespace tollgate::spop
