// EtcdServer: a real etcd member for integration tests (issue 21's etcd
// policy source): a single-member cluster (Start) or the members of one
// cluster (StartCluster, e.g. three, to stop one and keep a quorum).
//
// Starts /usr/bin/etcd (Debian's etcd-server; TOLLGATE_ETCD_SERVER overrides)
// with its client and peer URLs on free loopback ports and its data in a fresh
// temp directory, and waits (bounded, polling GET /health) until it answers.
// Kill and Restart let a test take etcd away and bring it back on the same
// ports with the same data (revisions continue); Pause and Resume freeze and
// thaw it (SIGSTOP / SIGCONT: it keeps its sockets, the kernel still accepts
// connections, nothing answers). Put/Get/Compact speak the v3
// API over etcd's HTTP/JSON gateway (POST /v3/kv/put, /v3/kv/range,
// /v3/kv/compaction), as the policy source does.
//
// Production-like members (Options): TLS on the client URL with certificates
// made by openssl (MakeTestCertificates, in pki()), --client-cert-auth, any
// extra flags (--auth-token-ttl); EnableAuth adds users and roles and turns
// authentication on with etcdctl (Debian's etcd-client), after which Put and
// Etcdctl act as root. Health is then asked with curl and the test CA.
//
// Usage in a GoogleTest:
//   auto etcd = tollgate::testing::EtcdServer::Start();
//   if (etcd.missing) GTEST_SKIP() << etcd.error;  // only when not installed
//   ASSERT_TRUE(etcd) << etcd.error;
//   ... etcd->endpoint() ...  // "127.0.0.1:<port>"
//
// Thread safety: not thread safe; drive it from the test thread. The server
// gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG).
// Ownership: owns the child process and its temp dir; the destructor kills the
// process and removes the directory. Errors are returned as text, never thrown.
#ifndef TOLLGATE_TESTS_TESTING_ETCD_SERVER_H_
#define TOLLGATE_TESTS_TESTING_ETCD_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "testing/scoped_temp_dir.h"

namespace tollgate::testing {

class EtcdServer {
 public:
  struct StartResult {
    std::unique_ptr<EtcdServer> server;
    std::string error;
    bool missing = false;  // etcd is not installed
    explicit operator bool() const { return server != nullptr; }
    EtcdServer* operator->() const { return server.get(); }
  };
  struct Options {
    bool tls = false;               // https:// client URL, certificates in pki()
    bool client_cert_auth = false;  // --client-cert-auth against pki()/ca.pem (with tls)
    std::vector<std::string> extra_args = {};
  };
  // `start_deadline` is scaled (testing/timing.h).
  static StartResult Start(std::chrono::milliseconds start_deadline = std::chrono::seconds(20));
  static StartResult Start(Options options,
                           std::chrono::milliseconds start_deadline = std::chrono::seconds(20));
  struct ClusterResult {
    std::vector<std::unique_ptr<EtcdServer>> members;
    std::string error;
    bool missing = false;
    explicit operator bool() const { return !members.empty(); }
  };
  // `n` members of one cluster, all started at once (a member answers once a
  // quorum elected a leader); every one healthy, or an error and none.
  static ClusterResult StartCluster(
      int n, std::chrono::milliseconds start_deadline = std::chrono::seconds(30));
  static std::string BinaryPath();  // "" when not installed

  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  int client_port() const { return client_port_; }
  // ca.pem, other-ca.pem, server.pem/.key, client.pem/.key (CN
  // tollgate-test-client: etcdctl's), gateway-client.pem/.key (no CommonName:
  // what etcd's JSON gateway accepts), etcd.pem/.key (etcd's own: serverAuth
  // and clientAuth, for its gateway's loopback dial); "" without TLS.
  std::string pki() const { return options_.tls ? dir_.path() + "/pki" : ""; }
  // etcdctl against this member with the TLS files and (after EnableAuth)
  // root's credentials; `args` as a shell would split them, stdin from
  // `stdin_file` when given. Its output (stdout and stderr); *ok on exit 0.
  std::string Etcdctl(const std::string& args, bool* ok = nullptr,
                      const std::string& stdin_file = "") const;
  // Creates root (`root_password`) and `user` (`password`) with read and
  // write on `key`, then turns authentication on. "" or why not.
  std::string EnableAuth(const std::string& root_password, const std::string& user,
                         const std::string& password, const std::string& key);
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  const std::string& dir() const { return dir_.path(); }
  bool running() const { return pid_ > 0; }

  void Kill();    // SIGKILL, reaps the child
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT
  // Starts etcd again on the same ports with the same data; "" or why not.
  std::string Restart();

  // One v3 gateway call (POST `path` with a JSON body) on a fresh connection;
  // the response body, or "" and *ok = false when it failed.
  std::string Post(const std::string& path, const std::string& body, bool* ok = nullptr) const;
  // Convenience: PUT key=value (through etcdctl with TLS or auth); the new revision, or -1.
  int64_t Put(const std::string& key, const std::string& value) const;
  // Compacts history up to `revision`; true when etcd accepted it.
  bool Compact(int64_t revision) const;

 private:
  EtcdServer(int client_port, int peer_port, std::chrono::milliseconds start_deadline);
  std::string Launch();
  std::string Spawn();        // fork + exec, no wait
  std::string WaitHealthy();  // "" once it answers, or why not (then killed)
  bool Healthy() const;

  int client_port_;
  int peer_port_;
  std::string name_ = "tollgate-test";
  std::string initial_cluster_;  // name=peer-url,...; empty: this member alone
  std::chrono::milliseconds start_deadline_;
  Options options_;
  std::string root_password_;  // set by EnableAuth
  ScopedTempDir dir_;
  pid_t pid_ = -1;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_ETCD_SERVER_H_
