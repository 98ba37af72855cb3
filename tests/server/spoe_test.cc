// tollgated's SPOE agent (spoe.listen, server/spoe_session.h) over sockets:
//   - a hostile SPOP peer (garbage, a truncated HELLO, an oversized frame, a
//     fragment, a peer that never reads) is answered with AGENT-DISCONNECT
//     and closed, within bounds, without stalling other connections;
//   - pipelined NOTIFYs decided exactly, each ACK with its own ids;
//   - the shipped examples/haproxy/ run by Debian's real HAProxy, as shipped
//     (from its folder, addresses from the environment), in front of a real
//     upstream: a limit enforced exactly, 429 with Retry-After and the
//     RateLimit fields, tollgated down failing open or closed as configured,
//     and (Redis) two HAProxy instances sharing one limit exactly.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>

#include "server/server_fixture.h"
#include "server/spoe/spop.h"
#include "server/test_http.h"
#include "testing/haproxy_server.h"
#include "testing/nginx_server.h"
#include "testing/timing.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using spop::DataType;
using spop::FrameType;

std::string Varint(uint64_t v) {
  std::string s;
  spop::AppendVarint(v, &s);
  return s;
}
std::string Str(std::string_view s) { return Varint(s.size()) + std::string(s); }
std::string TypedStr(std::string_view s) { return char(DataType::kString) + Str(s); }

// A frame with its length prefix, as HAProxy writes it.
std::string Wire(FrameType type, uint32_t flags, uint64_t stream, uint64_t id,
                 const std::string& payload) {
  std::string f(1, char(type));
  f += std::string{char(flags >> 24), char(flags >> 16), char(flags >> 8), char(flags)};
  f += Varint(stream) + Varint(id) + payload;
  const uint32_t n = uint32_t(f.size());
  return std::string{char(n >> 24), char(n >> 16), char(n >> 8), char(n)} + f;
}

std::string Hello(uint64_t max_frame = 16380, bool healthcheck = false) {
  std::string kv = Str("supported-versions") + TypedStr("2.0") + Str("max-frame-size") +
                   char(DataType::kUint32) + Varint(max_frame) + Str("capabilities") +
                   TypedStr("pipelining");
  if (healthcheck) kv += Str("healthcheck") + char(uint8_t(DataType::kBool) | 0x10);
  return Wire(FrameType::kHaproxyHello, spop::kFlagFin, 0, 0, kv);
}

std::string Notify(uint64_t stream, uint64_t id, std::string_view key) {
  const std::string block = Str("x-api-key") + Str(key) + Str("") + Str("");
  std::string msg = Str("tollgate") + char(4) + Str("method") + TypedStr("GET") + Str("path") +
                    TypedStr("/api/items") + Str("src") + char(DataType::kIpv4) +
                    std::string("\x7f\x00\x00\x01", 4) + Str("headers") + char(DataType::kBinary) +
                    Str(block);
  return Wire(FrameType::kNotify, spop::kFlagFin, stream, id, msg);
}

// A raw SPOP peer on tollgated's SPOE port.
class SpopPeer {
 public:
  explicit SpopPeer(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) {  // a small window, and a small send queue of our own
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
      const int sndbuf = 16384;
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~SpopPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return fd_ >= 0; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
  }
  // Sends without blocking; the bytes the kernel took.
  size_t SendSome(const std::string& bytes) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return n > 0 ? size_t(n) : 0;
  }
  // The next frame (without its prefix), or nullopt at EOF, on error or at the deadline.
  std::optional<std::string> ReadFrame(
      std::chrono::milliseconds deadline = std::chrono::seconds(5)) {
    while (true) {
      std::string_view frame;
      size_t consumed = 0;
      if (spop::CutFrame(buffer_, 1 << 20, &frame, &consumed) == spop::Cut::kFrame) {
        std::string out(frame);
        buffer_.erase(0, consumed);
        return out;
      }
      if (!Fill(deadline)) return std::nullopt;
    }
  }
  // Whether the server closed or reset the connection (unread bytes left unread).
  bool PeerClosed() {
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }
  // Whether the server closed the connection within `deadline` (bytes read meanwhile are dropped).
  bool WaitClosed(std::chrono::milliseconds deadline) {
    const auto until = std::chrono::steady_clock::now() + Scaled(deadline);
    while (std::chrono::steady_clock::now() < until) {
      buffer_.clear();
      if (!Fill(std::chrono::milliseconds(100))) {
        if (eof_) return true;
      }
    }
    return false;
  }

 private:
  bool Fill(std::chrono::milliseconds deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, int(Scaled(deadline).count())) <= 0) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(chunk, size_t(n));
    return true;
  }
  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

spop::Frame Parsed(const std::string& bytes) {
  spop::Frame f;
  EXPECT_EQ(spop::ParseFrame(bytes, &f), spop::Error::kNone);
  return f;
}

uint64_t DisconnectStatus(const std::optional<std::string>& frame) {
  if (!frame) return 1000;
  spop::Frame f = Parsed(*frame);
  EXPECT_EQ(f.type, FrameType::kAgentDisconnect);
  spop::Disconnect d;
  EXPECT_EQ(spop::ParseDisconnect(f.payload, &d), spop::Error::kNone);
  return d.status_code;
}

// An ACK's set-var actions: name -> value as text.
std::map<std::string, std::string> AckVars(const spop::Frame& f) {
  std::map<std::string, std::string> vars;
  std::string_view p = f.payload;
  while (p.size() >= 3) {
    p.remove_prefix(3);  // SET-VAR, NB-ARGS, scope
    uint64_t n = 0;
    if (!spop::ReadVarint(&p, &n) || n > p.size()) break;
    std::string name(p.substr(0, n));
    p.remove_prefix(n);
    spop::Value v;
    if (!spop::ReadValue(&p, &v)) break;
    vars[name] = v.type == DataType::kBool    ? (v.boolean ? "true" : "false")
                 : v.type == DataType::kInt64 ? std::to_string(int64_t(v.integer))
                                              : std::string(v.bytes);
  }
  return vars;
}

server::ServerConfig SpoeConfig() {
  server::ServerConfig cfg = TestServer::DefaultConfig();
  cfg.spoe_listen = "127.0.0.1:0";
  return cfg;
}

class SpoeAgent : public ::testing::Test {
 protected:
  void Start(server::ServerConfig cfg) {
    std::string error;
    server_ = TestServer::Start(cfg, TightPolicy(), &error);
    ASSERT_TRUE(server_) << error;
    port_ = server_->server->spoe_port();
    ASSERT_NE(port_, 0);
  }
  std::unique_ptr<TestServer> server_;
  int port_ = 0;
};

TEST_F(SpoeAgent, PipelinedNotifiesAreDecidedExactlyEachAckedWithItsIds) {
  Start(SpoeConfig());
  SpopPeer peer(port_);
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send(Hello(1024)));
  auto hello = peer.ReadFrame();
  ASSERT_TRUE(hello);
  EXPECT_EQ(Parsed(*hello).type, FrameType::kAgentHello);
  // Burst 3: four NOTIFYs in one write, four ACKs, three allowed.
  std::string four;
  for (uint64_t i = 1; i <= 4; ++i) four += Notify(100 + i, i, "pipelined");
  ASSERT_TRUE(peer.Send(four));
  int allowed = 0, denied = 0;
  std::map<uint64_t, uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto ack = peer.ReadFrame();
    ASSERT_TRUE(ack) << i;
    spop::Frame f = Parsed(*ack);
    ASSERT_EQ(f.type, FrameType::kAck);
    ids[f.frame_id] = f.stream_id;
    auto vars = AckVars(f);
    if (vars["deny"] == "false") {
      ++allowed;
      EXPECT_EQ(vars["status"], "200");
      EXPECT_NE(vars["h_ratelimit"].find("\"keyed\";r="), std::string::npos) << vars["h_ratelimit"];
    } else {
      ++denied;
      EXPECT_EQ(vars["status"], "429");
      EXPECT_GE(std::stoi(vars["retry_after"]), 1);
      EXPECT_EQ(vars["h_retry_after"], vars["retry_after"]);
      EXPECT_EQ(vars["rule"], "keyed");
    }
  }
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(denied, 1);
  EXPECT_EQ(ids, (std::map<uint64_t, uint64_t>{{1, 101}, {2, 102}, {3, 103}, {4, 104}}));
  // HAPROXY-DISCONNECT: answered, then closed.
  ASSERT_TRUE(peer.Send(Wire(FrameType::kHaproxyDisconnect, spop::kFlagFin, 0, 0,
                             Str("status-code") + char(DataType::kUint32) + Varint(0) +
                                 Str("message") + TypedStr("bye"))));
  EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), 0u);
  EXPECT_TRUE(peer.WaitClosed(std::chrono::seconds(5)));
}

// One sample of tollgated's /metrics (its series with labels, as written), or -1.
double Metric(int admin_port, const std::string& series) {
  const std::string page = Fetch(admin_port, "GET", "/metrics").body;
  const size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::atof(page.c_str() + at + series.size() + 2);
}

TEST_F(SpoeAgent, CountsFramesErrorsAndDecisionsInPrometheus) {
  Start(SpoeConfig());
  const int admin = server_->admin_port;
  EXPECT_EQ(Metric(admin, "tollgate_spoe_decisions_total{result=\"allowed\"}"), 0);
  {
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Hello()));
    ASSERT_TRUE(peer.ReadFrame());
    std::string five;  // burst 3: three allowed, one limited, then a message without a path
    for (uint64_t i = 1; i <= 4; ++i) five += Notify(i, i, "counted");
    five += Wire(FrameType::kNotify, spop::kFlagFin, 5, 5,
                 Str("tollgate") + char(1) + Str("method") + TypedStr("GET"));
    ASSERT_TRUE(peer.Send(five));
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(peer.ReadFrame()) << i;
    EXPECT_EQ(Metric(admin, "tollgate_spoe_in_flight"), 0);
    EXPECT_EQ(Metric(admin, "tollgate_spoe_connections"), 1);
  }
  {  // A frame over the size: AGENT-DISCONNECT with status 3.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kTooBig));
  }
  auto frames = [&](const char* direction, const char* type) {
    return Metric(admin, std::string("tollgate_spoe_frames_total{direction=\"") + direction +
                             "\",type=\"" + type + "\"}");
  };
  auto result = [&](const char* r) {
    return Metric(admin, std::string("tollgate_spoe_decisions_total{result=\"") + r + "\"}");
  };
  EXPECT_EQ(frames("in", "haproxy_hello"), 1);
  EXPECT_EQ(frames("in", "notify"), 5);
  EXPECT_EQ(frames("out", "agent_hello"), 1);
  EXPECT_EQ(frames("out", "ack"), 5);
  EXPECT_EQ(frames("out", "agent_disconnect"), 1);
  EXPECT_EQ(result("allowed"), 3);
  EXPECT_EQ(result("limited"), 1);
  EXPECT_EQ(result("message_error"), 1);
  EXPECT_EQ(result("denied"), 0);
  EXPECT_EQ(Metric(admin, "tollgate_spoe_errors_total{kind=\"too_big\"}"), 1);
  EXPECT_EQ(Metric(admin, "tollgate_spoe_errors_total{kind=\"invalid\"}"), 0);
  EXPECT_EQ(Metric(admin, "tollgate_spoe_connections_total"), 2);
  EXPECT_TRUE(WaitFor([&] { return Metric(admin, "tollgate_spoe_connections") == 0; }));
  EXPECT_EQ(Metric(admin, "tollgate_spoe_in_flight"), 0);
}

TEST_F(SpoeAgent, HealthCheckHelloIsAnsweredThenClosed) {
  Start(SpoeConfig());
  SpopPeer peer(port_);
  ASSERT_TRUE(peer.Send(Hello(16380, true)));
  auto hello = peer.ReadFrame();
  ASSERT_TRUE(hello);
  EXPECT_EQ(Parsed(*hello).type, FrameType::kAgentHello);
  EXPECT_TRUE(peer.WaitClosed(std::chrono::seconds(5)));
}

TEST_F(SpoeAgent, HostileFramesAreAnsweredWithTheirStatusAndClosed) {
  server::ServerConfig cfg = SpoeConfig();
  cfg.spoe_hello_timeout = server::Millis(300);
  Start(cfg);
  {  // HTTP instead of SPOP: "GET " read as a length far above the frame size.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kTooBig));
    EXPECT_TRUE(peer.WaitClosed(std::chrono::seconds(5)));
  }
  {  // A NOTIFY before any HELLO.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Notify(1, 1, "k")));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kInvalid));
  }
  {  // A HELLO without a 2.x version.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Wire(FrameType::kHaproxyHello, spop::kFlagFin, 0, 0,
                               Str("supported-versions") + TypedStr("1.0") + Str("max-frame-size") +
                                   char(DataType::kUint32) + Varint(16380) + Str("capabilities") +
                                   TypedStr(""))));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kBadVersion));
  }
  {  // After a HELLO of 256 bytes: a frame announced larger.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Hello(256)));
    ASSERT_TRUE(peer.ReadFrame());
    ASSERT_TRUE(peer.Send(std::string("\x00\x00\x01\x01", 4) + std::string(257, 'x')));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kTooBig));
    EXPECT_TRUE(peer.WaitClosed(std::chrono::seconds(5)));
  }
  {  // A fragment (no FIN): fragmentation was never announced.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Hello()));
    ASSERT_TRUE(peer.ReadFrame());
    std::string frag = Notify(1, 1, "k");
    frag[4 + 4] = 0;  // the FIN bit: flags' last byte
    ASSERT_TRUE(peer.Send(frag));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kFragmentation));
  }
  {  // A NOTIFY whose message lies about its arguments.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Hello()));
    ASSERT_TRUE(peer.ReadFrame());
    ASSERT_TRUE(peer.Send(Wire(FrameType::kNotify, spop::kFlagFin, 1, 1,
                               Str("tollgate") + char(9) + Str("method") + TypedStr("GET"))));
    EXPECT_EQ(DisconnectStatus(peer.ReadFrame()), uint64_t(spop::Error::kInvalid));
  }
  {  // A truncated HELLO: closed at spoe.hello_timeout, not held open.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Hello().substr(0, 9)));
    EXPECT_TRUE(peer.WaitClosed(std::chrono::seconds(5)));
  }
  {  // A message without a path: no decision, message_error says why.
    SpopPeer peer(port_);
    ASSERT_TRUE(peer.Send(Hello()));
    ASSERT_TRUE(peer.ReadFrame());
    ASSERT_TRUE(peer.Send(Wire(FrameType::kNotify, spop::kFlagFin, 1, 1,
                               Str("tollgate") + char(1) + Str("method") + TypedStr("GET"))));
    auto ack = peer.ReadFrame();
    ASSERT_TRUE(ack);
    auto vars = AckVars(Parsed(*ack));
    EXPECT_EQ(vars["message_error"], "path: missing");
    EXPECT_EQ(vars.count("deny"), 0u);
  }
  // The agent still decides.
  SpopPeer peer(port_);
  ASSERT_TRUE(peer.Send(Hello()));
  ASSERT_TRUE(peer.ReadFrame());
  ASSERT_TRUE(peer.Send(Notify(1, 1, "after-hostile")));
  auto ack = peer.ReadFrame();
  ASSERT_TRUE(ack);
  EXPECT_EQ(AckVars(Parsed(*ack))["deny"], "false");
}

TEST_F(SpoeAgent, APeerThatNeverReadsIsBoundedAndClosedWithoutStallingOthers) {
  server::ServerConfig cfg = SpoeConfig();
  cfg.threads = 1;  // the stuck connection and the next share the one worker
  cfg.spoe_write_timeout = std::chrono::duration_cast<server::Millis>(Scaled(server::Millis(5000)));
  cfg.spoe_max_in_flight = 8;
  std::string error;
  server_ = TestServer::Start(cfg, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(server_) << error;
  port_ = server_->server->spoe_port();
  SpopPeer stuck(port_, 4096);
  ASSERT_TRUE(stuck.Send(Hello()));
  ASSERT_TRUE(stuck.ReadFrame());
  // NOTIFYs until the agent stops taking them (nothing taken for 200 ms):
  // its ACKs fill our window, its queue reaches max_in_flight, it stops
  // reading. What it takes is bounded by socket buffers, not by what we send.
  std::string batch;
  for (int i = 0; i < 64; ++i) batch += Notify(1, uint64_t(i + 1), "stuck");
  const size_t cap = size_t{64} << 20;
  size_t sent = 0;
  int refusals = 0;
  std::string pending;  // a send may take part of a frame: the rest goes next
  while (refusals < 20 && sent < cap) {
    if (pending.empty()) pending = batch;
    const size_t n = stuck.SendSome(pending);
    pending.erase(0, n);
    sent += n;
    if (n == 0) {
      ++refusals;
      ::poll(nullptr, 0, 10);  // let the agent take what it will
    } else {
      refusals = 0;
    }
  }
  EXPECT_LT(sent, cap) << "the agent kept reading from a peer that never reads";
  // It stopped reading while the connection was still open (not because the
  // write deadline closed it).
  EXPECT_FALSE(stuck.PeerClosed()) << "sent " << sent << " bytes";
  // The worker is not blocked: another connection is decided at once.
  SpopPeer other(port_);
  ASSERT_TRUE(other.Send(Hello()));
  ASSERT_TRUE(other.ReadFrame(std::chrono::seconds(2)));
  ASSERT_TRUE(other.Send(Notify(1, 1, "other")));
  auto ack = other.ReadFrame(std::chrono::seconds(2));
  ASSERT_TRUE(ack);
  EXPECT_EQ(AckVars(Parsed(*ack))["deny"], "false");
  // The stuck one is closed by the write deadline.
  EXPECT_TRUE(stuck.WaitClosed(std::chrono::seconds(15)));
}

TEST_F(SpoeAgent, RefusesPeersOutsideAllowedPeers) {
  server::ServerConfig cfg = SpoeConfig();
  cfg.spoe_allowed_peers = {"10.0.0.0/8"};
  Start(cfg);
  SpopPeer peer(port_);
  peer.Send(Hello());
  EXPECT_FALSE(peer.ReadFrame(std::chrono::seconds(2)));
  EXPECT_TRUE(peer.WaitClosed(std::chrono::seconds(2)));
}

TEST(SpoeConfig, ParsedAndCheckedWithPaths) {
  server::ServerConfig c;
  auto errors = server::ParseServerConfig(
      R"({"policy": "p.json", "spoe": {"listen": "127.0.0.1:12345", "allowed_peers": ["10.0.0.0/8"],
          "max_frame_size": 4096, "max_in_flight": 8, "idle_timeout_ms": 1000}})",
      &c);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  EXPECT_EQ(c.spoe_listen, "127.0.0.1:12345");
  EXPECT_EQ(c.spoe_allowed_peers, std::vector<std::string>{"10.0.0.0/8"});
  EXPECT_EQ(c.spoe_max_frame_size, 4096u);
  EXPECT_EQ(c.spoe_max_in_flight, 8u);
  EXPECT_TRUE(server::ValidateServerConfig(c).empty());

  server::ServerConfig bad;
  errors = server::ParseServerConfig(
      R"({"policy": "p.json", "spoe": {"max_frame_size": 100, "bogus": 1}})", &bad);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "spoe.max_frame_size");
  EXPECT_EQ(errors[1].path, "spoe.bogus");
  bad = server::ServerConfig();
  ASSERT_TRUE(server::ParseServerConfig(
                  R"({"policy": "p.json", "spoe": {"listen": "nowhere", "allowed_peers": ["x"],
                      "message": ""}})",
                  &bad)
                  .empty());
  errors = server::ValidateServerConfig(bad);
  std::vector<std::string> paths;
  for (const auto& e : errors) paths.push_back(e.path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"spoe.listen", "spoe.allowed_peers[0]", "spoe.message"}));
}

// examples/tollgated.json lists the spoe section with the defaults.
TEST(SpoeConfig, ExampleConfigShowsTheDefaults) {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  server::ServerConfig c;
  auto errors =
      server::LoadServerConfigFile(std::string(src ? src : ".") + "/examples/tollgated.json", &c);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  const server::ServerConfig d;
  EXPECT_EQ(c.spoe_listen, d.spoe_listen);
  EXPECT_EQ(c.spoe_allowed_peers, d.spoe_allowed_peers);
  EXPECT_EQ(c.spoe_max_connections, d.spoe_max_connections);
  EXPECT_EQ(c.spoe_max_frame_size, d.spoe_max_frame_size);
  EXPECT_EQ(c.spoe_max_in_flight, d.spoe_max_in_flight);
  EXPECT_EQ(c.spoe_hello_timeout, d.spoe_hello_timeout);
  EXPECT_EQ(c.spoe_idle_timeout, d.spoe_idle_timeout);
  EXPECT_EQ(c.spoe_write_timeout, d.spoe_write_timeout);
  EXPECT_EQ(c.spoe_message, d.spoe_message);
}

// --- A real HAProxy running the shipped example.

std::string ExampleConfig() {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  return std::string(src ? src : ".") + "/examples/haproxy/haproxy.cfg";
}

std::string Loopback(int port) { return "127.0.0.1:" + std::to_string(port); }

class HaproxySpoe : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (HaproxyServer::BinaryPath().empty()) GTEST_SKIP() << "haproxy is not installed";
    if (GetParam() == "redis") {
#if TOLLGATE_TEST_REDIS
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      store_ = redis_->url();
#else
      GTEST_SKIP() << "the Redis store is not part of this build";
#endif
    }
  }
  std::unique_ptr<TestServer> Tollgated() {
    server::ServerConfig cfg = SpoeConfig();
    cfg.store = store_;
    std::string error;
    auto t = TestServer::Start(cfg, TightPolicy(), &error);
    EXPECT_TRUE(t) << error;
    return t;
  }
  HaproxyServer::StartResult Haproxy(int bind, int upstream, int spoe, bool fail_closed = false) {
    HaproxyServer::Env env = {{"HAPROXY_BIND", Loopback(bind)},
                              {"UPSTREAM", Loopback(upstream)},
                              {"TOLLGATE_SPOE", Loopback(spoe)}};
    if (fail_closed) env.push_back({"TOLLGATE_FAIL_CLOSED", "1"});
    return HaproxyServer::Start(ExampleConfig(), env, bind);
  }
  std::string store_ = "local";
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
};

TEST_P(HaproxySpoe, ShippedExampleEnforcesTheLimitExactlyWith429AndHeaders) {
  auto tollgated = Tollgated();
  ASSERT_TRUE(tollgated);
  TestUpstream app;
  const int port = NginxServer::FreePort();
  auto haproxy = Haproxy(port, app.port(), tollgated->server->spoe_port());
  ASSERT_TRUE(haproxy) << haproxy.error;

  HttpConnection c(port);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Request("GET", "/api/items?page=2", {{"X-Api-Key", "haproxy-key"}});
    ASSERT_TRUE(r.ok) << r.error << haproxy->Output();
    ASSERT_EQ(r.status, 200) << r.body << haproxy->Output();
    EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=" + std::to_string(2 - i)), std::string::npos)
        << r.Header("ratelimit");
    EXPECT_NE(r.Header("ratelimit-policy").find("\"keyed\";q=3"), std::string::npos);
    EXPECT_FALSE(r.Has("retry-after"));
  }
  auto r = c.Request("GET", "/api/items", {{"X-Api-Key", "haproxy-key"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 429) << r.body << haproxy->Output();
  EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1) << r.Header("retry-after");
  EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=0"), std::string::npos)
      << r.Header("ratelimit");
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_EQ(app.requests(), 3);
  // Another key has its own bucket.
  r = c.Request("GET", "/api/items", {{"X-Api-Key", "other-key"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(app.requests(), 4);
  // Counted as HAProxy's decisions (its health checks add frames, not decisions).
  const int admin = tollgated->admin_port;
  EXPECT_EQ(Metric(admin, "tollgate_spoe_decisions_total{result=\"allowed\"}"), 4);
  EXPECT_EQ(Metric(admin, "tollgate_spoe_decisions_total{result=\"limited\"}"), 1);
  EXPECT_GE(Metric(admin, "tollgate_spoe_frames_total{direction=\"out\",type=\"ack\"}"), 5);
#if TOLLGATE_TEST_REDIS
  if (redis_) {
    EXPECT_NE(redis_->Command({"DBSIZE"}), "0");  // decided in Redis
  }
#endif
}

TEST_P(HaproxySpoe, TollgatedDownFailsOpenOrClosedAsConfigured) {
  if (GetParam() != "local") GTEST_SKIP() << "the store plays no part";
  auto tollgated = Tollgated();
  ASSERT_TRUE(tollgated);
  const int spoe = tollgated->server->spoe_port();
  TestUpstream app;
  const int open_port = NginxServer::FreePort();
  auto open = Haproxy(open_port, app.port(), spoe);
  ASSERT_TRUE(open) << open.error;
  const int closed_port = NginxServer::FreePort();
  auto closed = Haproxy(closed_port, app.port(), spoe, true);
  ASSERT_TRUE(closed) << closed.error;
  {
    HttpConnection c(closed_port);
    auto r = c.Request("GET", "/api/items", {{"X-Api-Key", "k"}});
    EXPECT_EQ(r.status, 200) << r.body << closed->Output();
  }
  tollgated.reset();  // the agent is gone
  HttpConnection fail_open(open_port);
  auto r = fail_open.Request("GET", "/api/items", {{"X-Api-Key", "k"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200) << r.body << open->Output();
  EXPECT_FALSE(r.Has("ratelimit"));  // nothing was decided
  HttpConnection fail_closed(closed_port);
  r = fail_closed.Request("GET", "/api/items", {{"X-Api-Key", "k"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 503) << r.body << closed->Output();
  EXPECT_EQ(app.requests(), 2);
}

TEST_P(HaproxySpoe, TwoHaproxyInstancesShareOneRedisLimitExactly) {
  if (GetParam() != "redis") GTEST_SKIP() << "a limit shared across instances needs Redis";
  auto first = Tollgated();
  auto second = Tollgated();
  ASSERT_TRUE(first && second);
  TestUpstream app;
  const int port_a = NginxServer::FreePort();
  auto a = Haproxy(port_a, app.port(), first->server->spoe_port());
  ASSERT_TRUE(a) << a.error;
  const int port_b = NginxServer::FreePort();
  auto b = Haproxy(port_b, app.port(), second->server->spoe_port());
  ASSERT_TRUE(b) << b.error;
  HttpConnection ca(port_a), cb(port_b);
  int allowed = 0, limited = 0;
  for (int i = 0; i < 8; ++i) {
    auto r = (i % 2 ? cb : ca).Request("GET", "/api/items", {{"X-Api-Key", "shared"}});
    ASSERT_TRUE(r.ok) << r.error;
    if (r.status == 200) ++allowed;
    if (r.status == 429) ++limited;
  }
  EXPECT_EQ(allowed, 3);  // the burst, across both instances
  EXPECT_EQ(limited, 5);
  EXPECT_EQ(app.requests(), 3);
}

INSTANTIATE_TEST_SUITE_P(Stores, HaproxySpoe, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
