// Zero-downtime restarts of the real tollgated (issue 36): keep-alive clients
// at full speed against /v1/auth and through the gateway while tollgated is
// replaced five times (a new one listens beside the old with reuse_port, the
// old one gets SIGTERM and drains). No request may fail and no connection may
// break: a connection closed after a complete answer that said
// Connection: close is reopened (that is the polite drain), anything else (a
// refused connect, a reset or an EOF before the whole answer, a 5xx) is
// counted as an error. With a state file the new process waits for the old
// one's save (the state file's lock) and loads it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

// Keep-alive clients, each on its own thread, sending one request after the
// other as fast as the server answers.
class LoadClients {
 public:
  struct Target {
    std::string path;
    Headers headers;
  };
  LoadClients(int port, const std::vector<Target>& targets) : port_(port) {
    for (const Target& t : targets) threads_.emplace_back([this, t] { Run(t); });
  }
  ~LoadClients() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  uint64_t sent() const { return sent_.load(); }
  uint64_t served() const { return served_.load(); }
  uint64_t refused() const { return refused_.load(); }
  uint64_t failed() const { return failed_.load(); }
  uint64_t connection_errors() const { return connection_errors_.load(); }
  uint64_t polite_closes() const { return polite_closes_.load(); }
  std::string Errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& e : errors_) out += e + "\n";
    return out;
  }

 private:
  void Note(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (errors_.size() < 20) errors_.push_back(std::move(what));
  }
  void Run(const Target& t) {
    std::unique_ptr<HttpConnection> c;
    while (!stop_.load()) {
      if (!c) {
        c = std::make_unique<HttpConnection>(port_, 10s);
        if (!c->connected()) {
          connection_errors_.fetch_add(1);
          Note(t.path + ": connect failed");
          c.reset();
          continue;
        }
      }
      sent_.fetch_add(1);
      HttpResponse r = c->Request("GET", t.path, t.headers);
      if (!r.ok) {
        connection_errors_.fetch_add(1);
        Note(t.path + ": " + r.error);
        c.reset();
        continue;
      }
      if (r.status >= 200 && r.status < 300) {
        served_.fetch_add(1);
      } else if (r.status == 429) {
        refused_.fetch_add(1);  // the policy's own refusal
      } else {
        failed_.fetch_add(1);
        Note(t.path + ": status " + std::to_string(r.status) + " " + r.body.substr(0, 200));
      }
      if (!r.keep_alive) {
        polite_closes_.fetch_add(1);
        c.reset();
      }
    }
  }

  const int port_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0}, served_{0}, refused_{0}, failed_{0}, connection_errors_{0},
      polite_closes_{0};
  mutable std::mutex mu_;
  std::vector<std::string> errors_;  // the first few, guarded by mu_
  std::vector<std::thread> threads_;
};

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    policy_ = dir_ + "/policy.json";
    // Most requests pass; a client over its rate gets the policy's 429, not an error.
    WriteFile(policy_, R"({"rules": [
      {"name": "per_client", "limit_keys": ["header:x-client"], "algorithm": "token_bucket",
       "algorithm_config": {"count": 20000, "period": "1s"}}
    ]})");
  }
  void WriteConfig(int port, int admin_port, bool state_file) {
    std::string store = R"({"url": "local")";
    if (state_file) {
      store += R"(, "local_state_file": ")" + dir_ + R"(/state", "state_save_interval_ms": 0)";
    }
    store += "}";
    WriteFile(dir_ + "/tollgated.json",
              R"({"policy": ")" + policy_ + R"(", "listen": "127.0.0.1:)" + std::to_string(port) +
                  R"(", "admin": "127.0.0.1:)" + std::to_string(admin_port) +
                  R"(", "threads": 2, "reuse_port": )" + (reuse_port_ ? "true" : "false") +
                  R"(, "store": )" + store + R"(, "gateway": {"upstream": "http://127.0.0.1:)" +
                  std::to_string(upstream_.port()) + R"("}})");
  }
  std::unique_ptr<Tollgated> Launch() {
    const std::string run = dir_ + "/run" + std::to_string(++runs_);
    std::filesystem::create_directories(run);
    return std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir_ + "/tollgated.json"}, run);
  }
  static bool Logged(const Tollgated& t, const std::string& msg) {
    return t.Log().find(R"("msg":")" + msg + R"(")") != std::string::npos;
  }

  // Five replacements under load; returns the clients' counts in `summary`.
  void RestartFiveTimesUnderLoad(bool state_file, std::string* summary) {
    WriteConfig(0, 0, state_file);
    auto current = Launch();
    ASSERT_TRUE(current->WaitStarted()) << current->Log();
    const int port = current->port();
    // The next processes listen on the same ports.
    WriteConfig(port, current->admin_port(), state_file);

    LoadClients load(port, {{"/v1/auth", {{"X-Original-URI", "/api"}, {"X-Client", "a1"}}},
                            {"/v1/auth", {{"X-Original-URI", "/api"}, {"X-Client", "a2"}}},
                            {"/api/g1", {{"X-Client", "g1"}}},
                            {"/api/g2", {{"X-Client", "g2"}}}});
    ASSERT_TRUE(WaitFor([&] { return load.served() > 200; }, 10s)) << load.Errors();
    for (int restart = 1; restart <= 5; ++restart) {
      auto next = Launch();
      // The new process listens beside the old one before the old one stops.
      ASSERT_TRUE(WaitFor([&] { return Logged(*next, "listening"); }, 10s))
          << "restart " << restart << ": " << next->Log();
      if (state_file) {
        // The handshake: it waits for the old process's lock on the state file.
        ASSERT_TRUE(WaitFor([&] { return Logged(*next, "state_lock_wait"); }, 10s)) << next->Log();
        EXPECT_FALSE(Logged(*next, "started")) << next->Log();
      } else {
        ASSERT_TRUE(next->WaitStarted()) << next->Log();
      }
      current->Signal(SIGTERM);
      ASSERT_EQ(current->WaitExit(30s), 0) << "restart " << restart << ": " << current->Log();
      ASSERT_TRUE(next->WaitStarted()) << next->Log();
      if (state_file) {
        // It loaded what the old one saved on its way out.
        EXPECT_TRUE(Logged(*current, "state_saved")) << current->Log();
        EXPECT_NE(next->Log().find(R"("found":true)"), std::string::npos) << next->Log();
      }
      HttpResponse ready = Fetch(port, "GET", "/readyz");
      EXPECT_EQ(ready.status, 200) << ready.body;
      // Served throughout: the new process answers the clients.
      const uint64_t served = load.served();
      ASSERT_TRUE(WaitFor([&] { return load.served() > served + 200; }, 10s))
          << "restart " << restart << ": " << load.Errors();
      current = std::move(next);
    }
    load.Stop();
    *summary = "sent " + std::to_string(load.sent()) + ", served " + std::to_string(load.served()) +
               ", refused (429) " + std::to_string(load.refused()) + ", failed " +
               std::to_string(load.failed()) + ", connection errors " +
               std::to_string(load.connection_errors()) + ", closed politely " +
               std::to_string(load.polite_closes());
    std::cout << "restart under load (state file " << (state_file ? "on" : "off")
              << "): " << *summary << std::endl;
    EXPECT_EQ(load.failed(), 0u) << load.Errors();
    EXPECT_EQ(load.connection_errors(), 0u) << load.Errors();
    EXPECT_GT(load.polite_closes(), 0u);  // the drains did close keep-alive connections
  }

  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  TestUpstream upstream_;
  std::string policy_;
  bool reuse_port_ = true;
  int runs_ = 0;
};

TEST_F(RestartTest, FiveRestartsUnderLoadFailNoRequest) {
  std::string summary;
  RestartFiveTimesUnderLoad(false, &summary);
}

TEST_F(RestartTest, FiveRestartsUnderLoadWithTheStateFileHandshake) {
  std::string summary;
  RestartFiveTimesUnderLoad(true, &summary);
}

// Without reuse_port the new process cannot listen beside the old one: it
// exits at once saying why (the address is in use), and the old one serves on.
TEST_F(RestartTest, WithoutReusePortASecondProcessIsRefusedTheAddress) {
  reuse_port_ = false;
  WriteConfig(0, 0, false);
  auto current = Launch();
  ASSERT_TRUE(current->WaitStarted()) << current->Log();
  WriteConfig(current->port(), current->admin_port(), false);
  auto next = Launch();
  EXPECT_EQ(next->WaitExit(10s), 1) << next->Log();
  EXPECT_NE(next->Log().find("reuse_port is off"), std::string::npos) << next->Log();
  EXPECT_EQ(Fetch(current->port(), "GET", "/readyz").status, 200);
}

// The handshake's bound: a second process on the same state file waits at
// most store.state_lock_wait_ms for the first to exit, then fails naming it;
// the first serves on.
TEST_F(RestartTest, AStartWaitsForTheStateFileLockAtMostItsBound) {
  WriteConfig(0, 0, true);
  auto first = Launch();
  ASSERT_TRUE(first->WaitStarted()) << first->Log();
  WriteFile(dir_ + "/tollgated.json",
            std::regex_replace(ReadAll(dir_ + "/tollgated.json"),
                               std::regex(R"("state_save_interval_ms": 0)"),
                               R"("state_save_interval_ms": 0, "state_lock_wait_ms": 300)"));
  auto second = Launch();
  EXPECT_EQ(second->WaitExit(10s), 1) << second->Log();
  EXPECT_TRUE(Logged(*second, "state_lock_wait")) << second->Log();
  EXPECT_NE(second->Log().find("is still locked by process " + std::to_string(first->pid())),
            std::string::npos)
      << second->Log();
  EXPECT_EQ(Fetch(first->port(), "GET", "/readyz").status, 200);
}

// A listening TCP socket on 127.0.0.1 (a free port) as systemd holds one, or -1.
int ListeningSocket(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 4096) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

class SystemdSocketTest : public RestartTest {
 protected:
  std::unique_ptr<Tollgated> LaunchWith(Tollgated::Inherit inherit) {
    const std::string run = dir_ + "/run" + std::to_string(++runs_);
    std::filesystem::create_directories(run);
    return std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir_ + "/tollgated.json"}, run, std::move(inherit));
  }
};

// sd_listen_fds semantics on hostile values: a clear error naming the
// variable or the descriptor and exit 2, never a crash; variables meant for
// another process are ignored.
TEST_F(SystemdSocketTest, HostileVariablesAndDescriptorsAreClearErrors) {
  WriteConfig(0, 0, false);
  const int file_fd = ::open((dir_ + "/tollgated.json").c_str(), O_RDONLY | O_CLOEXEC);
  const int udp_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int unconnected_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(file_fd, 0);
  ASSERT_GE(udp_fd, 0);
  ASSERT_GE(unconnected_fd, 0);
  int port = 0;
  const int listening_fd = ListeningSocket(&port);
  ASSERT_GE(listening_fd, 0);
  struct Case {
    std::vector<std::string> env;
    int fd;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"LISTEN_PID=$PID", "LISTEN_FDS=99999999999999999999999"}, -1, "LISTEN_FDS: "},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=-1"}, -1, "LISTEN_FDS: \"-1\" must be a number"},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=one"}, -1, "LISTEN_FDS: \"one\""},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=17"}, -1, "must be a number from 0 to 16"},
      {{"LISTEN_PID=x1", "LISTEN_FDS=1"}, listening_fd, "LISTEN_PID: \"x1\" is not a process id"},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=1"},
       file_fd,
       "systemd socket 3 (\"listen\") is not a socket"},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=1"}, udp_fd, "is not a TCP (stream) socket"},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=1"}, unconnected_fd, "is not listening"},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=1", "LISTEN_FDNAMES=tollgated.socket"},
       listening_fd,
       "name it FileDescriptorName=listen"},
      {{"LISTEN_PID=$PID", "LISTEN_FDS=1", "LISTEN_FDNAMES=listen:admin"},
       listening_fd,
       "LISTEN_FDNAMES: 2 names for LISTEN_FDS=1"},
  };
  for (const Case& c : cases) {
    auto t = LaunchWith({c.env, c.fd});
    EXPECT_EQ(t->WaitExit(10s), 2) << c.message << "\n" << t->Log();
    EXPECT_NE(t->Log().find(c.message), std::string::npos) << c.message << "\n" << t->Log();
  }
  // Meant for another process (the variables were inherited): ignored, and the config's
  // address is bound.
  auto t = LaunchWith({{"LISTEN_PID=1", "LISTEN_FDS=1"}, listening_fd});
  ASSERT_TRUE(t->WaitStarted()) << t->Log();
  EXPECT_NE(t->port(), port);
  EXPECT_TRUE(Logged(*t, "systemd_sockets_ignored")) << t->Log();
  EXPECT_EQ(Fetch(t->port(), "GET", "/readyz").status, 200);
  for (int fd : {file_fd, udp_fd, unconnected_fd, listening_fd}) ::close(fd);
}

// `systemctl restart` with socket activation: the socket (held here, as systemd
// holds it) outlives each process; connections made while none runs wait in
// its queue. Keep-alive clients at full speed see no error across 5 restarts.
TEST_F(SystemdSocketTest, APassedSocketKeepsItsQueueAcrossRestartsUnderLoad) {
  int port = 0;
  const int listening_fd = ListeningSocket(&port);
  ASSERT_GE(listening_fd, 0);
  reuse_port_ = false;
  WriteConfig(0, 0, true);  // the config's own address (port 0) is not used
  WriteFile(dir_ + "/tollgated.json",
            std::regex_replace(ReadAll(dir_ + "/tollgated.json"),
                               std::regex(R"("admin": "127.0.0.1:0")"), R"("admin": "")"));
  const Tollgated::Inherit inherit{{"LISTEN_PID=$PID", "LISTEN_FDS=1", "LISTEN_FDNAMES=listen"},
                                   listening_fd};
  auto current = LaunchWith(inherit);
  ASSERT_TRUE(current->WaitStarted()) << current->Log();
  ASSERT_EQ(current->port(), port);
  LoadClients load(port, {{"/v1/auth", {{"X-Original-URI", "/api"}, {"X-Client", "a1"}}},
                          {"/api/g1", {{"X-Client", "g1"}}}});
  ASSERT_TRUE(WaitFor([&] { return load.served() > 200; }, 10s)) << load.Errors();
  for (int restart = 1; restart <= 5; ++restart) {
    current->Signal(SIGTERM);
    ASSERT_EQ(current->WaitExit(30s), 0) << current->Log();
    current = LaunchWith(inherit);
    ASSERT_TRUE(current->WaitStarted()) << current->Log();
    const uint64_t served = load.served();
    ASSERT_TRUE(WaitFor([&] { return load.served() > served + 200; }, 10s)) << load.Errors();
  }
  load.Stop();
  std::cout << "systemd socket, 5 restarts under load: sent " << load.sent() << ", failed "
            << load.failed() << ", connection errors " << load.connection_errors() << std::endl;
  EXPECT_EQ(load.failed(), 0u) << load.Errors();
  EXPECT_EQ(load.connection_errors(), 0u) << load.Errors();
  ::close(listening_fd);
}

}  // namespace
}  // namespace tollgate::testing
