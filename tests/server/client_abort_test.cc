// A streamed cost cannot be dodged (issue 29, finding 1): through tollgated's
// gateway, over real sockets, with examples/policies/llm-tokens.json and an
// upstream that streams SSE, "data: [DONE]", then the trailer
// "x-llm-tokens: 50000". A client that reads to the end, and one that resets
// the connection (SO_LINGER {1, 0}) right after [DONE], are both charged
// 50,000; a client that leaves before the trailer, whose upstream does not
// finish within gateway.abort_drain_ms / abort_drain_bytes, is charged the
// rule's abort_cost (max_response_cost, 200,000, by default).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "testing/test_paths.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadExample(const std::string& name) {
  std::ifstream in(tollgate::testing::SourcePathOf("examples/policies/" + name));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of the sample `series` (name and labels) in a metrics page, or -1.
double Sample(const std::string& page, const std::string& series) {
  const size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::atof(page.c_str() + at + series.size() + 2);
}

std::string Chunk(const std::string& data) {
  std::ostringstream s;
  s << std::hex << data.size() << "\r\n" << data << "\r\n";
  return s.str();
}

// The upstream's answer up to and including [DONE]; the last chunk and the
// trailer are sent by the test (kEnd).
const std::string kStreamHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTrailer: x-llm-tokens\r\n"
    "Transfer-Encoding: chunked\r\n\r\n" +
    Chunk("data: {\"token\": \"Hello\"}\n\n") + Chunk("data: [DONE]\n\n");
const std::string kEnd = "0\r\nx-llm-tokens: 50000\r\n\r\n";

// An upstream for one request at a time whose answer the test writes, step by
// step, on the connection the request came on.
class ScriptedUpstream {
 public:
  ScriptedUpstream() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 8) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~ScriptedUpstream() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  // Waits until a request head arrived.
  bool WaitRequest() {
    return WaitFor([&] { return got_request_.load(); }, 10s);
  }
  // Writes `bytes` on the request's connection; false once it is closed.
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

 private:
  void Accept() {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string head;
    char c[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, c, sizeof c, 0);
      if (n <= 0) break;
      head.append(c, static_cast<size_t>(n));
    }
    fd_ = fd;
    got_request_ = true;
  }
  int listen_fd_ = -1;
  int port_ = 0;
  int fd_ = -1;  // written before got_request_ is set
  std::atomic<bool> got_request_{false};
  std::thread acceptor_;
};

class ClientAbortE2E : public ::testing::Test {
 protected:
  std::unique_ptr<TestServer> Start(const std::string& policy,
                                    server::Millis drain = server::Millis(30000),
                                    uint64_t drain_bytes = 8 << 20) {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.upstream = "http://127.0.0.1:" + std::to_string(upstream_.port());
    c.abort_drain_timeout = drain;
    c.abort_drain_bytes = drain_bytes;
    std::string error;
    auto s = TestServer::Start(std::move(c), policy, &error);
    EXPECT_TRUE(s != nullptr) << error;
    return s;
  }
  // Sends the streamed request and reads the answer up to [DONE].
  int RequestUpToDone(const TestServer& s) {
    const int fd = ConnectLoopback(s.port, Scaled(10s));
    EXPECT_GE(fd, 0);
    const std::string req =
        "GET /v1/chat/completions HTTP/1.1\r\nHost: llm\r\nX-Api-Key: " +
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "\r\n\r\n";
    EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    EXPECT_TRUE(upstream_.WaitRequest());
    EXPECT_TRUE(upstream_.Send(kStreamHead));
    EXPECT_NE(ReadUntil(fd, "[DONE]").find("[DONE]"), std::string::npos);
    return fd;
  }
  // Reads until `marker` arrived (or the connection ended); returns what was read.
  static std::string ReadUntil(int fd, const std::string& marker) {
    std::string got;
    char c[4096];
    while (got.find(marker) == std::string::npos) {
      const ssize_t n = ::recv(fd, c, sizeof c, 0);
      if (n <= 0) break;
      got.append(c, static_cast<size_t>(n));
    }
    return got;
  }
  // Closes with a reset, as a client that has what it wants may.
  static void Reset(int fd) {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
  }
  // The llm-tokens rule's settled cost once its one settlement landed.
  static double SettledCost(const TestServer& s) {
    std::string page;
    const bool settled = WaitFor(
        [&] {
          page = Fetch(s.admin_port, "GET", "/metrics").body;
          return Sample(page, "tollgate_settlements_total{rule=\"llm-tokens\"}") == 1;
        },
        10s);
    EXPECT_TRUE(settled) << page;
    return Sample(page, "tollgate_settled_cost_total{rule=\"llm-tokens\"}");
  }

  ScriptedUpstream upstream_;
};

// (a) The whole answer read: the trailer's 50,000 (the estimate of 1 charged first).
TEST_F(ClientAbortE2E, AClientReadingToTheEndIsChargedTheTrailersCost) {
  auto s = Start(ReadExample("llm-tokens.json"));
  ASSERT_TRUE(s);
  const int fd = RequestUpToDone(*s);
  ASSERT_TRUE(upstream_.Send(kEnd));
  EXPECT_NE(ReadUntil(fd, "0\r\n\r\n").find("0\r\n\r\n"), std::string::npos);
  ::close(fd);
  EXPECT_EQ(SettledCost(*s), 49999);
}

// (b) Reset right after [DONE], before the trailer was relayed: the last write
// to the client fails, and the trailer still settles the request.
TEST_F(ClientAbortE2E, AClientResettingAfterDoneIsStillChargedTheTrailersCost) {
  auto s = Start(ReadExample("llm-tokens.json"));
  ASSERT_TRUE(s);
  Reset(RequestUpToDone(*s));
  ASSERT_TRUE(upstream_.Send(kEnd));
  EXPECT_EQ(SettledCost(*s), 49999);
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_EQ(Sample(m, "tollgate_gateway_client_aborts_total{drain=\"finished\"}"), 1) << m;
  EXPECT_EQ(Sample(m, "tollgate_response_cost_invalid_total{rule=\"llm-tokens\"}"), 0) << m;
}

// (c) Reset before the trailer, and the upstream never sends it: once the
// drain's time (100 ms here) is up, abort_cost, max_response_cost by default.
// The upstream keeps the stream alive with SSE comments (so the gateway has
// something to write and notices the reset), never finishing.
TEST_F(ClientAbortE2E, AClientLeavingBeforeAStalledTrailerIsChargedTheAbortCost) {
  auto s = Start(ReadExample("llm-tokens.json"), server::Millis(100));
  ASSERT_TRUE(s);
  Reset(RequestUpToDone(*s));
  std::string page;
  ASSERT_TRUE(PollUntil(
      [&] {
        upstream_.Send(Chunk(": keep-alive\n\n"));
        page = Fetch(s->admin_port, "GET", "/metrics").body;
        return Sample(page, "tollgate_settlements_total{rule=\"llm-tokens\"}") == 1;
      },
      Scaled(10s), 20ms))
      << page;
  EXPECT_EQ(SettledCost(*s), 199999);
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_EQ(Sample(m, "tollgate_gateway_client_aborts_total{drain=\"cut\"}"), 1) << m;
}

// The drain's byte bound: an upstream that streams on past abort_drain_bytes
// (16 KiB here; the time bound an hour) is cut at once, charged the rule's own
// abort_cost (70,000).
TEST_F(ClientAbortE2E, AnUpstreamStreamingPastTheDrainBoundIsChargedTheAbortCost) {
  std::string policy = ReadExample("llm-tokens.json");
  const std::string bound = "\"max_response_cost\": 200000";
  ASSERT_NE(policy.find(bound), std::string::npos);
  policy.replace(policy.find(bound), bound.size(), bound + ", \"abort_cost\": 70000");
  auto s = Start(policy, server::Millis(3600000), 16 << 10);
  ASSERT_TRUE(s);
  Reset(RequestUpToDone(*s));
  const std::string big = Chunk(std::string(8 << 10, 'x'));
  std::string page;
  ASSERT_TRUE(PollUntil(
      [&] {
        upstream_.Send(big);
        page = Fetch(s->admin_port, "GET", "/metrics").body;
        return Sample(page, "tollgate_settlements_total{rule=\"llm-tokens\"}") == 1;
      },
      Scaled(10s), 20ms))
      << page;
  EXPECT_EQ(SettledCost(*s), 69999);
}

// (e) An answer whose chunked body is only its last chunk and the trailer, in one write: the
// parser reads the trailer in the relay's first read, before the head went to the client. The
// trailer still settles the request, and none of its fields reaches the client as a head field
// (tollgated relays no trailer).
TEST_F(ClientAbortE2E, ATrailerReadWithTheBodyIsNotRelayedAsHeadFields) {
  auto s = Start(ReadExample("llm-tokens.json"));
  ASSERT_TRUE(s);
  const int fd = ConnectLoopback(s->port, Scaled(10s));
  ASSERT_GE(fd, 0);
  const std::string req =
      "GET /v1/chat/completions HTTP/1.1\r\nHost: llm\r\nX-Api-Key: whole\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  ASSERT_TRUE(upstream_.WaitRequest());
  ASSERT_TRUE(upstream_.Send(
      "HTTP/1.1 200 OK\r\nTrailer: x-llm-tokens\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\nx-llm-tokens: 7\r\nX-From-Trailer: 1\r\n\r\n"));
  const std::string got = ReadUntil(fd, "0\r\n\r\n");
  ::close(fd);
  const size_t head_end = got.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << got;
  const std::string head = got.substr(0, head_end);
  EXPECT_EQ(head.find("X-From-Trailer"), std::string::npos) << head;
  EXPECT_EQ(head.find("x-llm-tokens: 7"), std::string::npos) << head;
  EXPECT_EQ(SettledCost(*s), 6);
}

}  // namespace
}  // namespace tollgate::testing
