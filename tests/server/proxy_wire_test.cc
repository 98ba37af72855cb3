// Unit tests of the gateway's hand-written framing (server/proxy_wire.h): the
// in-place upstream response parser, both header rewrites, and a streamed
// body's relay pieces (server/relay_body.h).
#include "server/proxy_wire.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>

#include "server/relay_body.h"
#include "server/response_capture.h"

namespace tollgate::server {
namespace {

namespace http = boost::beast::http;
namespace beast = boost::beast;
namespace net = boost::asio;
using State = UpstreamResponseHead::State;

TEST(UpstreamResponseHead, NeedsTheWholeHeaderThenDescribesTheBody) {
  std::string bytes =
      "HTTP/1.1 201 Made\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
      "X-Obs: a\r\n\r\nhello";
  std::vector<FieldView> fields;
  UpstreamResponseHead head(&fields);
  size_t header = bytes.find("\r\n\r\n") + 4;
  for (size_t n : {size_t(0), size_t(10), header - 1}) {
    EXPECT_EQ(head.Parse(std::string_view(bytes).substr(0, n)), State::kNeedMore) << n;
  }
  ASSERT_EQ(head.Parse(bytes), State::kComplete);
  EXPECT_EQ(head.header_size(), header);
  EXPECT_EQ(head.status(), 201);
  EXPECT_EQ(head.reason(), "Made");
  EXPECT_TRUE(head.Relayable());
  EXPECT_EQ(head.body_size(), 5u);
  EXPECT_TRUE(head.keep_alive());
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields[0].name, "Content-Type");
  EXPECT_EQ(fields[0].value, "text/plain");
  EXPECT_EQ(fields[2].name, "X-Obs");
  // Views into the input, not copies.
  EXPECT_TRUE(fields[0].value.data() > bytes.data() &&
              fields[0].value.data() < bytes.data() + bytes.size());
}

State ParseWhole(const std::string& bytes, std::vector<FieldView>* fields,
                 std::optional<UpstreamResponseHead>* head) {
  head->emplace(fields);
  return (*head)->Parse(bytes);
}

TEST(UpstreamResponseHead, OnlyContentLengthFramedFinalResponsesAreRelayable) {
  std::vector<FieldView> fields;
  std::optional<UpstreamResponseHead> head;
  ASSERT_EQ(ParseWhole("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &fields, &head),
            State::kComplete);
  EXPECT_FALSE(head->Relayable());
  ASSERT_EQ(ParseWhole("HTTP/1.1 200 OK\r\n\r\n", &fields, &head), State::kComplete);
  EXPECT_FALSE(head->Relayable()) << "close-delimited";
  ASSERT_EQ(ParseWhole("HTTP/1.1 100 Continue\r\n\r\n", &fields, &head), State::kComplete);
  EXPECT_FALSE(head->Relayable());
  ASSERT_EQ(ParseWhole("HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n", &fields, &head),
            State::kComplete);
  EXPECT_FALSE(head->Relayable());
  ASSERT_EQ(ParseWhole("HTTP/1.1 204 No Content\r\n\r\n", &fields, &head), State::kComplete);
  EXPECT_TRUE(head->Relayable());
  EXPECT_EQ(head->body_size(), 0u);
  ASSERT_EQ(ParseWhole("HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", &fields, &head),
            State::kComplete);
  EXPECT_TRUE(head->Relayable());
  EXPECT_EQ(head->body_size(), 0u) << "304 never has a body";
  ASSERT_EQ(ParseWhole("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", &fields, &head),
            State::kComplete);
  EXPECT_TRUE(head->Relayable());
  EXPECT_FALSE(head->keep_alive()) << "HTTP/1.0 without keep-alive";
  ASSERT_EQ(ParseWhole("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                       &fields, &head),
            State::kComplete);
  EXPECT_FALSE(head->keep_alive());
  // A folded value would be unfolded into Beast's own storage: streaming path.
  ASSERT_EQ(
      ParseWhole("HTTP/1.1 200 OK\r\nX-Fold: a\r\n b\r\nContent-Length: 0\r\n\r\n", &fields, &head),
      State::kComplete);
  EXPECT_FALSE(head->Relayable());
  // Large bodies are still described (the caller decides what fits).
  ASSERT_EQ(ParseWhole("HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n", &fields, &head),
            State::kComplete);
  EXPECT_EQ(head->body_size(), 10'000'000'000u);
}

TEST(UpstreamResponseHead, RejectsMalformedResponses) {
  std::vector<FieldView> fields;
  std::optional<UpstreamResponseHead> head;
  EXPECT_EQ(ParseWhole("garbage\r\n\r\n", &fields, &head), State::kInvalid);
  EXPECT_EQ(ParseWhole("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &fields,
                       &head),
            State::kInvalid);
  EXPECT_EQ(ParseWhole("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", &fields, &head),
            State::kInvalid);
  EXPECT_EQ(ParseWhole("HTTP/1.1 2000 OK\r\n\r\n", &fields, &head), State::kInvalid);
}

TEST(AppendClientResponseHead, DropsHopByHopAppendsRateLimitFieldsAndSaysConnection) {
  std::string bytes =
      "HTTP/1.1 200 \r\nConnection: X-Secret, keep-alive\r\nKeep-Alive: timeout=5\r\n"
      "X-Secret: s\r\nratelimit: \"theirs\"\r\nProxy-Authenticate: Basic\r\n"
      "Content-Length: 2\r\nX-Kept: k\r\n\r\nok";
  std::vector<FieldView> fields;
  UpstreamResponseHead head(&fields);
  ASSERT_EQ(head.Parse(bytes), State::kComplete);
  std::vector<HeaderField> added = {{"RateLimit", "\"ours\";r=1;t=1"},
                                    {"RateLimit-Policy", "\"ours\";q=2;w=1"}};
  std::string out;
  AppendClientResponseHead(head, added, /*keep_alive=*/true, 11, &out);
  // The upstream's RateLimit line is kept, tollgate's items follow as more lines
  // (draft-ietf-httpapi-ratelimit-headers: an intermediary must not remove them);
  // Content-Length is re-derived, after the upstream's fields.
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nratelimit: \"theirs\"\r\nX-Kept: k\r\nContent-Length: 2\r\n"
            "RateLimit: \"ours\";r=1;t=1\r\nRateLimit-Policy: \"ours\";q=2;w=1\r\n\r\n");
  out.clear();
  AppendClientResponseHead(head, {}, /*keep_alive=*/false, 11, &out);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nratelimit: \"theirs\"\r\nX-Kept: k\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n");
  out.clear();
  AppendClientResponseHead(head, {}, /*keep_alive=*/true, 10, &out);
  EXPECT_NE(out.find("\r\nConnection: keep-alive\r\n\r\n"), std::string::npos) << out;
}

// Found by fuzz/targets/proxy_wire.cc's framing property (issue 14, finding 1,
// response direction): "Connection: content-length" removed the relayed
// response's framing, so the client read it as close-delimited.
TEST(AppendClientResponseHead, ConnectionCannotRemoveTheFraming) {
  const std::string bytes =
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: content-length, X-Secret\r\n"
      "X-Secret: s\r\n\r\nhello";
  std::vector<FieldView> fields;
  UpstreamResponseHead head(&fields);
  ASSERT_EQ(head.Parse(bytes), State::kComplete);
  ASSERT_TRUE(head.Relayable());
  std::string out;
  AppendClientResponseHead(head, {}, /*keep_alive=*/true, 11, &out);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
}

http::request_header<> ParseRequest(const std::string& text) {
  http::request_parser<http::empty_body> p;
  boost::beast::error_code ec;
  p.put(boost::asio::buffer(text), ec);
  EXPECT_FALSE(ec) << ec.message();
  return p.release().base();
}

TEST(AppendUpstreamRequestHead, RewritesForTheUpstream) {
  auto req = ParseRequest(
      "GET /items?x=1 HTTP/1.1\r\nHost: api.example\r\nConnection: keep-alive, X-Hop\r\n"
      "X-Hop: secret\r\nX-Forwarded-For: 198.51.100.1\r\nTE: trailers\r\nExpect: 100-continue\r\n"
      "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
      "Proxy-Connection: keep-alive\r\nX-Forwarded-For: 198.51.100.2\r\nAccept: */*\r\n\r\n");
  UpstreamUrl up;
  up.host_header = "127.0.0.1:3000";
  up.base_path = "/base";
  std::string out;
  ASSERT_TRUE(AppendUpstreamRequestHead(req, "127.0.0.1", /*peer_trusted=*/true, up, &out));
  EXPECT_EQ(out,
            "GET /base/items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:3000\r\n"
            "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
            "Accept: */*\r\n"
            "X-Forwarded-For: 198.51.100.1, 198.51.100.2, 127.0.0.1\r\n"
            "X-Forwarded-Host: api.example\r\nX-Forwarded-Proto: http\r\n\r\n");

  // From a trusted proxy, X-Forwarded-Host/-Proto are kept; an HTTP/1.0 request goes out as 1.1.
  req = ParseRequest(
      "DELETE /x HTTP/1.0\r\nX-Forwarded-Host: front\r\nX-Forwarded-Proto: https\r\n\r\n");
  out.clear();
  up.base_path.clear();
  ASSERT_TRUE(AppendUpstreamRequestHead(req, "::1", /*peer_trusted=*/true, up, &out));
  EXPECT_EQ(out,
            "DELETE /x HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nX-Forwarded-Host: front\r\n"
            "X-Forwarded-Proto: https\r\nX-Forwarded-For: ::1\r\n\r\n");
}

TEST(AppendUpstreamRequestHead, UntrustedPeersForwardingFieldsAreReplaced) {
  auto req = ParseRequest(
      "GET /x HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: 10.9.9.9\r\n"
      "X-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nX-Real-IP: 10.9.9.9\r\n"
      "Forwarded: for=10.9.9.9\r\nAccept: */*\r\n\r\n");
  UpstreamUrl up;
  up.host_header = "u:1";
  std::string out;
  ASSERT_TRUE(AppendUpstreamRequestHead(req, "192.0.2.7", /*peer_trusted=*/false, up, &out));
  EXPECT_EQ(out,
            "GET /x HTTP/1.1\r\nHost: u:1\r\nAccept: */*\r\nX-Forwarded-For: 192.0.2.7\r\n"
            "X-Forwarded-Host: api.example\r\nX-Forwarded-Proto: http\r\n"
            "X-Real-IP: 192.0.2.7\r\n\r\n");
}

TEST(AppendUpstreamRequestHead, ConnectionCannotRemoveFramingRoutingOrForwardingFields) {
  // Issue 14: `Connection: Content-Length` sent the body unframed, to be read
  // upstream as a second, undecided request.
  auto req = ParseRequest(
      "POST /public HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
      "Connection: Content-Length, Host, X-Forwarded-For, X-Real-IP, X-Drop\r\nX-Drop: 1\r\n\r\n");
  UpstreamUrl up;
  up.host_header = "u:1";
  std::string out;
  ASSERT_TRUE(AppendUpstreamRequestHead(req, "192.0.2.7", /*peer_trusted=*/false, up, &out));
  EXPECT_EQ(out,
            "POST /public HTTP/1.1\r\nHost: u:1\r\nContent-Length: 0\r\n"
            "X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Host: a\r\nX-Forwarded-Proto: http\r\n"
            "X-Real-IP: 192.0.2.7\r\n\r\n");
  for (const char* n : {"Content-Length", "transfer-encoding", "HOST", "X-Forwarded-For",
                        "x-forwarded-host", "X-Forwarded-Proto", "X-Real-IP", "Forwarded"}) {
    EXPECT_TRUE(KeptDespiteConnection(n)) << n;
  }
  EXPECT_FALSE(KeptDespiteConnection("X-Drop"));
}

TEST(AppendUpstreamTarget, BasePathThenTargetButAsteriskAlone) {
  UpstreamUrl up;
  up.base_path = "/app";
  std::string out;
  AppendUpstreamTarget("/x?y", up, &out);
  EXPECT_EQ(out, "/app/x?y");
  out.clear();
  AppendUpstreamTarget("*", up, &out);
  EXPECT_EQ(out, "*");
}

TEST(HopByHop, NamesAndConnectionTokens) {
  for (const char* n : {"Connection", "keep-alive", "TE", "Trailer", "Upgrade", "Proxy-Connection",
                        "Proxy-Authenticate", "PROXY-AUTHORIZATION"}) {
    EXPECT_TRUE(IsHopByHop(n)) << n;
  }
  for (const char* n : {"Transfer-Encoding", "Content-Length", "Te2", "X-Upgrade", ""}) {
    EXPECT_FALSE(IsHopByHop(n)) << n;
  }
  EXPECT_TRUE(NamedByConnection("x-hop", "keep-alive, X-Hop"));
  EXPECT_TRUE(NamedByConnection("X-Hop", " x-hop ,close"));
  EXPECT_FALSE(NamedByConnection("X-Hop", "keep-alive, X-Hop2"));
  EXPECT_FALSE(NamedByConnection("X-Hop", ""));
}

// The client's bytes, read all at once, then the end of the stream.
struct StringStream {
  std::string_view data;
  template <class Buffers>
  size_t read_some(const Buffers& b, boost::system::error_code& ec) {
    ec = data.empty() ? boost::asio::error::eof : boost::system::error_code{};
    const size_t n = boost::asio::buffer_copy(b, boost::asio::buffer(data.data(), data.size()));
    data.remove_prefix(n);
    return n;
  }
  template <class Buffers>
  size_t read_some(const Buffers& b) {
    boost::system::error_code ec;
    return read_some(b, ec);
  }
};

// What is written to the upstream, appended.
struct StringSink {
  std::string out;
  template <class Buffers>
  size_t write_some(const Buffers& b, boost::system::error_code& ec) {
    ec = {};
    const size_t before = out.size();
    out.resize(before + boost::asio::buffer_size(b));
    boost::asio::buffer_copy(boost::asio::buffer(out.data() + before, out.size() - before), b);
    return out.size() - before;
  }
  template <class Buffers>
  size_t write_some(const Buffers& b) {
    boost::system::error_code ec;
    return write_some(b, ec);
  }
};

// A chunked request relayed as the gateway streams it (proxy.cc, SendStreamed):
// read into a `capacity`-byte buffer, each piece written on, re-chunked.
std::string RelayChunked(std::string_view wire, size_t capacity) {
  StringStream client{wire};
  boost::beast::flat_buffer buffer;
  http::request_parser<http::buffer_body> p;
  boost::beast::error_code ec;
  http::read_header(client, buffer, p, ec);
  EXPECT_FALSE(ec) << ec.message();
  auto& req = p.get();
  req.erase(http::field::transfer_encoding);
  req.chunked(true);
  std::vector<char> buf(capacity);
  http::serializer<true, http::buffer_body> sr{req};
  StringSink upstream;
  do {
    if (!p.is_done()) {
      OpenRelayPiece(req.body(), buf.data(), capacity);
      http::read(client, buffer, p, ec);
      if (ec == http::error::need_buffer) ec = {};
      EXPECT_FALSE(ec) << ec.message();
      if (ec) break;
      CloseRelayPiece(req.body(), buf.data(), capacity, !p.is_done());
    } else {
      EndRelayPieces(req.body());
    }
    http::write(upstream, sr, ec);
    if (ec == http::error::need_buffer) ec = {};
    EXPECT_FALSE(ec) << ec.message();
  } while (!p.is_done() && !sr.is_done());
  return upstream.out;
}

// A read that gives no body bytes (an empty body, or a last chunk read after a full buffer) ends
// the body with the last chunk only: an empty piece would be a zero-size chunk, ending the body
// early and leaving bytes the upstream reads as another message (found by fuzz_chunked_relay).
TEST(RelayPieces, AChunkedBodyRelayedPieceByPieceIsExactlyOneMessage) {
  const std::string head = "POST /v HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::pair<std::string, std::string> bodies[] = {
      {"0\r\n\r\n", ""},
      {"0;name=value\r\nX-Sum: 1\r\n\r\n", ""},
      {"5\r\nhello\r\n0\r\n\r\n", "hello"},
      {"5\r\nhello\r\n5;e\r\nworld\r\n0\r\n\r\n", "helloworld"},
  };
  for (const auto& [chunked, body] : bodies) {
    for (size_t capacity : {1, 5, 16}) {
      SCOPED_TRACE(chunked + " through " + std::to_string(capacity) + " bytes");
      const std::string out = RelayChunked(head + chunked, capacity);
      http::request_parser<http::string_body> up;
      up.eager(true);
      up.body_limit(std::numeric_limits<std::uint64_t>::max());
      boost::beast::error_code ec;
      const size_t used = up.put(boost::asio::buffer(out), ec);
      EXPECT_FALSE(ec) << ec.message();
      EXPECT_TRUE(up.is_done());
      EXPECT_EQ(used, out.size()) << "bytes after the message: " << out.substr(used);
      EXPECT_EQ(up.get().body(), body);
      EXPECT_TRUE(out.ends_with("\r\n0\r\n\r\n")) << out;
    }
  }
}

// A trailer field whose name the head had too: Beast keeps fields of one name together, so the
// trailer's value sits right after the head's, not after every head field. The capture must still
// take the trailer's (the cost an LLM upstream reports at the end), for each wanted name.
TEST(ResponseCapture, ATrailerValueWinsWhenTheHeadHadTheSameNameBeforeAnotherWantedOne) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nX-LLM-Tokens: 0\r\nx-cost: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nok\r\n0\r\nX-LLM-Tokens: 7\r\nOther: 1\r\nX-Cost: 9\r\n\r\n";
  http::response_parser<http::string_body> parser;
  beast::error_code ec;
  const size_t head_end = wire.find("\r\n\r\n") + 4;
  size_t used = parser.put(net::buffer(wire.data(), head_end), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_header_done());
  const std::vector<std::string> wanted = {"x-llm-tokens", "x-cost"};
  std::vector<HeaderField> captured;
  ResponseCapture capture(wanted, &captured);
  capture.Head(parser.get());
  while (!parser.is_done() && !ec) {
    used += parser.put(net::buffer(wire.data() + used, wire.size() - used), ec);
  }
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
  capture.Trailer(parser.get());
  ASSERT_EQ(captured.size(), 2u);
  for (const HeaderField& f : captured) {
    if (f.name == "x-llm-tokens") {
      EXPECT_EQ(f.value, "7");
    } else {
      EXPECT_EQ(f.name, "x-cost");
      EXPECT_EQ(f.value, "9");
    }
  }
}

}  // namespace
}  // namespace tollgate::server
