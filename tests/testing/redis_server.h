// RedisServer: a real redis-server for integration tests.
//
// Starts /usr/bin/redis-server (or the one on PATH) on a free loopback port
// with persistence off (--save '' --appendonly no) in a fresh temp directory,
// and waits (bounded, polling PING) until it answers. Kill/Pause/Resume let a
// test inject failures; Restart brings a fresh server back on the same port.
//
// Usage in a GoogleTest:
//   auto server = tollgate::testing::RedisServer::Start();
//   if (!server) GTEST_SKIP() << server.error;   // only when not installed
//   ASSERT_TRUE(server.ok()) << server.error;
//   ... server->url() ...
// or simply TOLLGATE_START_REDIS(server) (skips/fails as above).
//
// Thread safety: not thread safe; drive it from the test thread. The server
// gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a
// crashed or aborted test never leaves servers behind: start it from a thread
// that outlives its use (the test's main thread).
// Ownership: owns the child process and its temp dir; the destructor kills the
// process (SIGKILL after SIGCONT) and removes the directory.
// Errors: Start/Restart report failures as text, never throw.
//
// Sentinel: Options::sentinel_config starts redis-sentinel on the free port
// instead (its config file in dir(), which the sentinel rewrites), with the
// same readiness check, Kill, Pause and Command.
//
// TLS: Options::tls generates certificates with the openssl CLI into dir() (a
// CA, a server certificate for IP 127.0.0.1 and DNS localhost signed by it, a
// client certificate signed by it, and an unrelated CA) and listens on
// tls_port() as well; the plain port() stays open for Command() and Ping.
// Options::tls_pki_dir reuses another server's files instead (one CA for a
// replica or a sentinel group).
#ifndef TOLLGATE_TESTS_TESTING_REDIS_SERVER_H_
#define TOLLGATE_TESTS_TESTING_REDIS_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "testing/scoped_temp_dir.h"

namespace tollgate::testing {

class RedisServer {
 public:
  struct Options {
    std::vector<std::string> extra_args;              // e.g. {"--requirepass", "pw"}
    std::chrono::milliseconds start_deadline{10000};  // scaled (testing/timing.h)
    std::string password;  // used by the readiness PING when requirepass is set
    // Pick a port whose cluster bus port (port + 10000) is free too.
    bool cluster_bus = false;
    // Also listen with TLS on tls_port() (certificates generated at start).
    bool tls = false;
    bool tls_auth_clients = false;  // --tls-auth-clients yes: require a client certificate
    // With tls: the PEM files of this directory (another server's dir(), so that
    // a replica or a sentinel shares its CA) instead of generating new ones.
    std::string tls_pki_dir;
    // Run redis-sentinel instead, with these lines in its (writable) config
    // file, e.g. "sentinel monitor m 127.0.0.1 6379 1". Start() reports
    // `missing` when redis-sentinel is not installed.
    std::vector<std::string> sentinel_config;
  };

  // The outcome of Start(): a server, or why not (missing = not installed).
  struct StartResult {
    std::unique_ptr<RedisServer> server;
    std::string error;
    bool missing = false;
    explicit operator bool() const { return server != nullptr; }
    RedisServer* operator->() const { return server.get(); }
    RedisServer& operator*() const { return *server; }
  };

  static StartResult Start() { return Start(Options{}); }
  static StartResult Start(Options options);

  // Whether a redis-server binary can be found at all.
  static bool Installed();
  static std::string BinaryPath();  // "" when not installed
  // /usr/bin/redis-sentinel (Debian's redis-sentinel), TOLLGATE_REDIS_SENTINEL, or "".
  static std::string SentinelBinaryPath();

  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // With Options::tls: the TLS port, and the generated PEM files.
  int tls_port() const { return tls_port_; }
  std::string tls_url() const { return "rediss://127.0.0.1:" + std::to_string(tls_port_); }
  std::string ca_file() const { return PkiFile("ca.pem"); }
  std::string other_ca_file() const { return PkiFile("other-ca.pem"); }  // signed nothing here
  std::string client_cert_file() const { return PkiFile("client.pem"); }
  std::string client_key_file() const { return PkiFile("client.key"); }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_.path(); }
  bool running() const { return pid_ > 0; }

  void Kill();    // SIGKILL, reaps the child
  void Pause();   // SIGSTOP: connections stay open, nothing answers
  void Resume();  // SIGCONT
  void Stop();    // SIGTERM then SIGKILL after a bounded wait
  // Starts a fresh server (empty data) on the same port; kills the old one first.
  // Returns "" on success, else an error message.
  std::string Restart();

  // Runs one command synchronously (a tiny blocking RESP client for tests) and
  // returns the reply rendered as text ("OK", "1", "(nil)", "ERR ...", arrays
  // joined with '\n'). Empty string and ok=false on connection failure.
  std::string Command(const std::vector<std::string>& argv, bool* ok = nullptr) const;

 private:
  RedisServer(int port, int tls_port, Options options, ScopedTempDir dir);
  std::string Launch();  // fork+exec, then wait for PING
  bool Ping() const;
  // A PEM file of the test PKI: in dir() or Options::tls_pki_dir.
  std::string PkiFile(const std::string& name) const {
    return options_.tls_pki_dir.empty() ? dir_.File(name) : options_.tls_pki_dir + "/" + name;
  }

  int port_;
  int tls_port_;  // -1 without Options::tls
  Options options_;
  ScopedTempDir dir_;  // data, log, certificates; removed after the process is gone
  pid_t pid_ = -1;
  bool paused_ = false;
};

// Returns a free loopback TCP port (bind to port 0, read it back, close).
// The test PKI (redis-server's and etcd's TLS fixtures), written into `dir` by
// the openssl CLI: ca.pem/.key, other-ca.pem/.key (an unrelated CA),
// server.pem/.key (IP 127.0.0.1, DNS localhost; serverAuth) and
// client.pem/.key (CN tollgate-test-client; clientAuth), EC P-256, valid
// two days. "" or why not.
std::string MakeTestCertificates(const std::string& dir);

int FreeLoopbackPort();
// A free port p <= 55535 with p + 10000 free as well (Redis Cluster bus).
int FreeClusterPort();

}  // namespace tollgate::testing

// Starts a server named `var` in a test body; skips when redis-server is not
// installed, fails the test when it is installed but cannot start.
#define TOLLGATE_START_REDIS(var)                                  \
  auto var##_start = ::tollgate::testing::RedisServer::Start();    \
  if (var##_start.missing) GTEST_SKIP() << var##_start.error;      \
  ASSERT_TRUE(var##_start.server != nullptr) << var##_start.error; \
  ::tollgate::testing::RedisServer& var = *var##_start.server

#endif  // TOLLGATE_TESTS_TESTING_REDIS_SERVER_H_
