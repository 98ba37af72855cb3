// CheckFraming and ToOriginForm (tollgate/http_framing.h): what tollgated
// refuses before a request is decided or a response relayed (issue 14).
#include "tollgate/http_framing.h"

#include <gtest/gtest.h>

#include <string>

#include "tollgate/request.h"

namespace tollgate {
namespace {

using E = HttpFramingError;

E FramedRequest(const std::string& fields, const std::string& start = "POST / HTTP/1.1") {
  return CheckFraming(start + "\r\n" + fields + "\r\n", MessageKind::kRequest);
}

E FramedResponse(const std::string& fields, const std::string& start = "HTTP/1.1 200 OK") {
  return CheckFraming(start + "\r\n" + fields + "\r\n", MessageKind::kResponse);
}

TEST(CheckFraming, AcceptsTheUnambiguousForms) {
  EXPECT_EQ(FramedRequest("Host: a\r\n"), E::kOk);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: 5\r\n"), E::kOk);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length:  0 \r\n"), E::kOk);
  EXPECT_EQ(FramedRequest("Host: a\r\ntransfer-encoding: Chunked\r\n"), E::kOk);
  EXPECT_EQ(FramedRequest("", "GET / HTTP/1.0"), E::kOk);  // HTTP/1.0 needs no Host
  EXPECT_EQ(FramedResponse("Content-Length: 2\r\n"), E::kOk);
  EXPECT_EQ(FramedResponse("Transfer-Encoding: chunked\r\n"), E::kOk);
  EXPECT_EQ(FramedResponse(""), E::kOk);  // close-delimited
}

TEST(CheckFraming, RefusesAmbiguousContentLength) {
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: 5, 5\r\n"), E::kBadContentLength);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: +5\r\n"), E::kBadContentLength);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: 0x5\r\n"), E::kBadContentLength);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length:\r\n"), E::kBadContentLength);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: 99999999999999999999\r\n"),
            E::kBadContentLength);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n"),
            E::kDuplicateContentLength);
  EXPECT_EQ(FramedResponse("Content-Length: 5\r\nContent-Length: 6\r\n"),
            E::kDuplicateContentLength);
}

TEST(CheckFraming, RefusesEveryTransferEncodingButExactlyChunked) {
  for (const char* te : {"gzip", "gzip, chunked", "chunked, gzip", "chunked, chunked",
                         "\"chunked\"", "chunked;q=1", "xchunked", "chunked\x0b", "identity", ""}) {
    EXPECT_EQ(FramedRequest(std::string("Host: a\r\nTransfer-Encoding: ") + te + "\r\n"),
              E::kUnsupportedTransferEncoding)
        << te;
  }
  EXPECT_EQ(
      FramedRequest("Host: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
      E::kDuplicateTransferEncoding);
  EXPECT_EQ(FramedRequest("Host: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n"),
            E::kTransferEncodingWithContentLength);
  EXPECT_EQ(FramedRequest("Host: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"),
            E::kTransferEncodingWithContentLength);
  EXPECT_EQ(FramedRequest("Transfer-Encoding: chunked\r\n", "POST / HTTP/1.0"),
            E::kTransferEncodingInHttp10);
  EXPECT_EQ(FramedResponse("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"),
            E::kTransferEncodingWithContentLength);
  EXPECT_EQ(FramedResponse("Transfer-Encoding: gzip\r\n"), E::kUnsupportedTransferEncoding);
}

TEST(CheckFraming, RefusesBareLineEndsObsFoldAndBadFieldLines) {
  EXPECT_EQ(FramedRequest("Host: a\nX: b\r\n"), E::kBareCrOrLf);
  EXPECT_EQ(FramedRequest("Host: a\r\nX: b\rc\r\n"), E::kBareCrOrLf);
  EXPECT_EQ(FramedRequest("Host: a\r\nX: b\r\n c\r\n"), E::kObsFold);
  EXPECT_EQ(FramedRequest("Host: a\r\nTransfer-Encoding: gzip,\r\n\tchunked\r\n"), E::kObsFold);
  EXPECT_EQ(FramedRequest("Host: a\r\nTransfer-Encoding : chunked\r\n"), E::kBadFieldLine);
  EXPECT_EQ(FramedRequest("Host: a\r\nno colon\r\n"), E::kBadFieldLine);
  EXPECT_EQ(CheckFraming("GET / HTTP/1.1\r\nHost: a\r\n", MessageKind::kRequest),
            E::kIncompleteHeader);
}

// The line-end scan is memchr-based (one pass per line, not per byte): every
// head of up to 8 bytes over {CR, LF, SP, 'a'} before the final empty line
// gets the bare-CR/LF and obs-fold verdict of the byte-by-byte reference
// below, which is the scan as it was written first.
TEST(CheckFraming, LineEndScanAgreesWithTheByteByByteReference) {
  auto reference = [](std::string_view head) {
    for (size_t i = 0; i < head.size(); ++i) {
      if (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n')) return E::kBareCrOrLf;
      if (head[i] != '\n') continue;
      if (i == 0 || head[i - 1] != '\r') return E::kBareCrOrLf;
      if (i + 1 < head.size() && (head[i + 1] == ' ' || head[i + 1] == '\t')) return E::kObsFold;
    }
    return E::kOk;
  };
  constexpr char kAlphabet[] = {'\r', '\n', ' ', 'a'};
  int checked = 0;
  for (int length = 0; length <= 8; ++length) {
    int combinations = 1;
    for (int i = 0; i < length; ++i) combinations *= 4;
    for (int n = 0; n < combinations; ++n) {
      std::string head;
      for (int i = 0, rest = n; i < length; ++i, rest /= 4) head.push_back(kAlphabet[rest % 4]);
      head += "\r\n\r\n";
      const E want = reference(head);
      const E got = CheckFraming(head, MessageKind::kRequest);
      if (want != E::kOk) {
        ASSERT_EQ(got, want) << testing::PrintToString(head);
      } else {
        ASSERT_NE(got, E::kBareCrOrLf) << testing::PrintToString(head);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 87381);  // 4^0 + ... + 4^8
}

TEST(CheckFraming, HostExactlyOnceInHttp11Requests) {
  EXPECT_EQ(FramedRequest("", "GET / HTTP/1.1"), E::kMissingHost);
  EXPECT_EQ(FramedRequest("Host: a\r\nHost: b\r\n"), E::kDuplicateHost);
  EXPECT_EQ(FramedRequest("Host: a\r\nHost: b\r\n", "GET / HTTP/1.0"), E::kDuplicateHost);
}

TEST(ToOriginForm, AbsoluteFormGivesItsPathWhenTheAuthorityIsTheHost) {
  std::string out;
  EXPECT_EQ(ToOriginForm("GET", "http://x/api/login", "x", &out), E::kOk);
  EXPECT_EQ(out, "/api/login");
  EXPECT_EQ(ToOriginForm("GET", "HTTP://X:8080?q=1", "x:8080", &out), E::kOk);
  EXPECT_EQ(out, "/?q=1");
  EXPECT_EQ(ToOriginForm("GET", "https://x/a/../b", "x", &out), E::kOk);
  EXPECT_EQ(out, "/b");
  EXPECT_EQ(ToOriginForm("GET", "http://y/api/login", "x", &out), E::kAuthorityNotHost);
  EXPECT_EQ(ToOriginForm("GET", "http://u@x/api", "x", &out), E::kAuthorityNotHost);
  EXPECT_EQ(ToOriginForm("GET", "http:///api", "", &out), E::kAuthorityNotHost);
}

TEST(ToOriginForm, OtherFormsOnlyWhereHttpAllowsThem) {
  std::string out;
  EXPECT_EQ(ToOriginForm("OPTIONS", "*", "x", &out), E::kOk);
  EXPECT_EQ(out, "*");
  EXPECT_EQ(ToOriginForm("GET", "*", "x", &out), E::kAsteriskForm);
  EXPECT_EQ(ToOriginForm("CONNECT", "x:443", "x", &out), E::kAuthorityForm);
  EXPECT_EQ(ToOriginForm("GET", "x:443", "x", &out), E::kAuthorityForm);
  EXPECT_EQ(ToOriginForm("GET", "ftp://x/a", "x", &out), E::kAuthorityForm);
}

TEST(ToOriginForm, PathsUpstreamsReadDifferentlyAreRefusedTheRestNormalised) {
  std::string out;
  EXPECT_EQ(ToOriginForm("GET", "/api%2flogin", "x", &out), E::kEncodedSlash);
  EXPECT_EQ(ToOriginForm("GET", "/api%5Clogin", "x", &out), E::kEncodedSlash);
  EXPECT_EQ(ToOriginForm("GET", "/api\\login", "x", &out), E::kBackslash);
  EXPECT_EQ(ToOriginForm("GET", "/api/login;x=1", "x", &out), E::kPathParameter);
  EXPECT_EQ(ToOriginForm("GET", "/api/login%00", "x", &out), E::kEncodedNul);
  EXPECT_EQ(ToOriginForm("GET", "/api/login#x", "x", &out), E::kFragment);
  // The query is not the path: kept as sent.
  EXPECT_EQ(ToOriginForm("GET", "/a/./b/../%61pi//login?x=%2F;y", "x", &out), E::kOk);
  EXPECT_EQ(out, "/a/api/login?x=%2F;y");
  // The base path cannot be escaped: ".." never climbs above the root.
  EXPECT_EQ(ToOriginForm("GET", "/../admin", "x", &out), E::kOk);
  EXPECT_EQ(out, "/admin");
  EXPECT_EQ(ToOriginForm("GET", "/%2e%2e/admin", "x", &out), E::kOk);
  EXPECT_EQ(out, "/admin");
}

// Issue 29: bytes outside ASCII in the path are percent-encoded (raw and
// encoded UTF-8 are one path); a space, control byte or DEL is refused.
TEST(ToOriginForm, NonAsciiPathBytesAreEncodedControlBytesRefused) {
  std::string out;
  EXPECT_EQ(ToOriginForm("GET", "/caf\xC3\xA9/./x?q=\xC3\xA9", "x", &out), E::kOk);
  EXPECT_EQ(out, "/caf%C3%A9/x?q=\xC3\xA9");  // the query is kept as sent
  std::string encoded;
  EXPECT_EQ(ToOriginForm("GET", "/caf%c3%a9/x", "x", &encoded), E::kOk);
  EXPECT_EQ(encoded, "/caf%C3%A9/x");
  EXPECT_EQ(ToOriginForm("GET", "/\xFF%2e%2e/\x80", "x", &out), E::kOk);
  EXPECT_EQ(out, "/%FF../%80");  // "\xFF.." is no dot segment
  for (const std::string& bad : {std::string("/a b"), std::string("/a\tb"), std::string("/a\x7f"),
                                 std::string("/a?x=\x01"), std::string("/a\0b", 4)}) {
    EXPECT_EQ(ToOriginForm("GET", bad, "x", &out), E::kBadTargetByte) << bad;
  }
}

// The fast path: a target already in normal origin-form is used as it is. It
// must say yes only where NormalizePath (the independent reference) and every
// refusal leave the target alone, and no for anything ToOriginForm changes.
TEST(IsPlainOriginForm, YesExactlyWhereToOriginFormChangesNothing) {
  for (const std::string t : {"/", "/api/items", "/a-b_c~d/e.json", "/a?x=%2F;y", "/a?q=..//",
                              "/a.b/c.", "/v1/auth?x=/./"}) {
    EXPECT_TRUE(IsPlainOriginForm(t)) << t;
    std::string out = "stale";
    EXPECT_EQ(ToOriginForm("GET", t, "x", &out), E::kOk) << t;
    EXPECT_EQ(out, t);
    const std::string path = t.substr(0, t.find('?'));
    EXPECT_EQ(NormalizePath(path), path) << t;
  }
  for (const std::string& not_plain :
       {std::string(""), std::string("*"), std::string("api"), std::string("http://x/a"),
        std::string("//a"), std::string("/a//b"), std::string("/a/./b"), std::string("/a/../b"),
        std::string("/a/.hidden"), std::string("/%61"), std::string("/a;b"), std::string("/a\\b"),
        std::string("/a#b"), std::string("/a?x#y"), std::string("/a b"), std::string("/a?x=\x01"),
        std::string("/caf\xC3\xA9"), std::string("/a\x7f"), std::string("/a\0b", 4)}) {
    EXPECT_FALSE(IsPlainOriginForm(not_plain)) << not_plain;
  }
}

// X-Original-URI: the same origin-form, and no Host to meet an absolute-form.
TEST(OriginalUriToOriginForm, IsToOriginFormWithoutAHost) {
  std::string out;
  EXPECT_EQ(OriginalUriToOriginForm("GET", "//api/../%61pi/login?a=%2F", &out), E::kOk);
  EXPECT_EQ(out, "/api/login?a=%2F");
  EXPECT_EQ(OriginalUriToOriginForm("GET", "/api%2Flogin", &out), E::kEncodedSlash);
  EXPECT_EQ(OriginalUriToOriginForm("GET", "http://x/api/login", &out), E::kAuthorityNotHost);
  EXPECT_EQ(OriginalUriToOriginForm("GET", "", &out), E::kAuthorityForm);
  EXPECT_EQ(OriginalUriToOriginForm("OPTIONS", "*", &out), E::kOk);
  EXPECT_EQ(OriginalUriToOriginForm("GET", "/a b", &out), E::kBadTargetByte);
}

TEST(AcceptRequestHead, RewritesTheTargetAndSaysWhyItRefuses) {
  boost::beast::http::request_header<> req;
  req.method(boost::beast::http::verb::get);
  req.target("http://x/a/../api/login");
  req.set(boost::beast::http::field::host, "x");
  const std::string raw = "GET http://x/a/../api/login HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_FALSE(AcceptRequestHead(raw, req));
  EXPECT_EQ(req.target(), "/api/login");
  boost::system::error_code ec =
      AcceptRequestHead("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n", req);
  EXPECT_EQ(ec, HttpFramingError::kBadContentLength);
  EXPECT_EQ(ec.message(), "Content-Length is not one decimal number");
}

}  // namespace
}  // namespace tollgate
