// Test fixture: a tollgated Server in process on free loopback ports, with its
// policy in a temp file, and (for the Redis runs) the store URL to use.
#ifndef TOLLGATE_TESTS_SERVER_SERVER_FIXTURE_H_
#define TOLLGATE_TESTS_SERVER_SERVER_FIXTURE_H_

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "server/server.h"
#include "testing/scoped_temp_dir.h"
#include "testing/timing.h"

namespace tollgate::testing {

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path + ".tmp", std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  std::filesystem::rename(path + ".tmp", path);  // atomic: a poller never sees half a file
}

// A policy with one tight per-API-key bucket (burst 3, one token per 100 s:
// on the real clock, a slow machine never sees a refill during a test) and
// one generous per-IP bucket; names used by the tests.
inline std::string TightPolicy() {
  return R"({"rules": [
    {"name": "keyed", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
     "algorithm_config": {"rps": 0.01, "burst": 3}},
    {"name": "per-ip", "group": "ip", "limit_keys": ["ip:address"], "algorithm": "token_bucket",
     "algorithm_config": {"rps": 100000, "burst": 100000}}
  ]})";
}

inline std::string GenerousPolicy(int burst) {
  return R"({"rules": [
    {"name": "keyed", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
     "algorithm_config": {"rps": 1000000, "burst": )" +
         std::to_string(burst) + R"(}}
  ]})";
}

struct TestServer {
  ScopedTempDir dir;  // the policy file; removed after the server stopped
  std::string policy_path;
  std::unique_ptr<server::Server> server;
  int port = 0;
  int admin_port = 0;

  static server::ServerConfig DefaultConfig() {
    server::ServerConfig c;
    c.listen = "127.0.0.1:0";
    c.admin_listen = "127.0.0.1:0";
    c.threads = 2;
    c.policy_poll_interval = server::Millis(0);
    c.log_level = server::LogLevel::kWarn;
    c.drain_timeout = server::Millis(2000);
    // Decisions are expected to meet the store's timeout (a Redis store's
    // first call also waits for the connection): scaled for a loaded machine.
    c.store_timeout = Scaled(c.store_timeout);
    return c;
  }

  // Starts a server; on failure returns null and sets *error. `clock`, when
  // given, is the server's (it must outlive the server).
  static std::unique_ptr<TestServer> Start(server::ServerConfig config, const std::string& policy,
                                           std::string* error,
                                           std::shared_ptr<server::Logger> log = nullptr,
                                           const Clock* clock = &SystemClock::Instance()) {
    auto t = std::make_unique<TestServer>();
    t->policy_path = t->dir.File("policy.json");
    WriteFile(t->policy_path, policy);
    // A URL (etcd://, or one to be refused) stays as given (the file is then unused).
    if (config.policy_path.find("://") == std::string::npos) config.policy_path = t->policy_path;
    auto created = server::Server::Create(config, log, clock);
    if (!created.ok()) {
      *error = created.status().ToString();
      return nullptr;
    }
    t->server = std::move(created).value();
    t->server->Start();
    t->port = t->server->port();
    t->admin_port = t->server->admin_port();
    return t;
  }

  ~TestServer() { server.reset(); }
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_SERVER_SERVER_FIXTURE_H_
