// Internal: the etcd policy source's connection to etcd: the URL, the session
// every call of one source shares (TLS context, credentials, the current
// auth token), one connection to a member, and the unary calls (range, put,
// txn) that try the members in turn. The watch (etcd_watch.h) is built on it.
//
// `etcd://host:port[,host:port]/key` talks plain HTTP/1.1 to etcd's v3 JSON
// gateway; `etcds://...` the same over TLS (verification on: the CA file of
// EtcdClientOptions::tls, else the system's trust store; the host, or
// tls.server_name, is the name checked and sent as SNI; a client certificate
// for etcd's --client-cert-auth). A host is a DNS name, an IPv4 address or a
// bracketed IPv6 address; a name is resolved (getaddrinfo) on every
// connection, never cached, and each of its addresses tried in turn.
//
// Authentication (EtcdClientOptions::username): before its first call a
// session logs in (POST /v3/auth/authenticate with the password read from
// password_file, read again at every login so a rotated password needs no
// restart) and sends the token as the Authorization header of every call. When
// etcd says the token is no longer valid (code 16 "invalid auth token": a
// simple token idle past --auth-token-ttl, a JWT past its ttl, an etcd
// restarted), the call logs in once more and retries once; a refused login
// (wrong user or password) ends the call with an error naming
// etcd.username / etcd.password_file. No call logs in more than twice. The
// password appears in no error, event or log line.
//
// Bounds: every call, connect to last byte, takes at most io_timeout per
// member (a login is a call of its own on the same member); then the next
// member is tried. Name resolution is the system resolver's (its own timeout,
// /etc/resolv.conf). A reply head is at most 16 KiB, a body kMaxReplyBytes, a
// refusal's body 64 KiB; every reply is parsed by etcd_reply.h.
//
// Thread safety: EtcdSession is safe to share (its token under a mutex): the
// watch thread and PUT /v1/policy use one. The functions are reentrant.
#ifndef TOLLGATE_RUNTIME_ETCD_CLIENT_H_
#define TOLLGATE_RUNTIME_ETCD_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/etcd_http.h"
#include "runtime/etcd_reply.h"
#include "tollgate/config_error.h"
#include "tollgate/runtime.h"
#include "tollgate/status.h"
#include "tollgate/tls.h"

namespace tollgate::etcd {

inline constexpr size_t kMaxEndpoints = 16;

struct EtcdUrl {
  // Host (a DNS name, an IPv4 address, an IPv6 address without brackets) and port.
  std::vector<std::pair<std::string, int>> endpoints;
  std::string key;
  bool tls = false;  // etcds://
};
// "etcd://127.0.0.1:2379,etcd-2.internal:2379/tollgate/policy",
// "etcds://[fd00::1]:2379/k"; kInvalidArgument saying why. Refused: other
// schemes, user:password@ (credentials belong in etcd.username and
// etcd.password_file, never in a URL that is shown and logged).
Result<EtcdUrl> ParseEtcdUrl(std::string_view url);

// What every call of one policy source shares. Built once by Create.
class EtcdSession {
 public:
  // The TLS context (for etcds://) and the credentials' checks: errors under
  // "etcd" (etcd.password_file, etcd.tls.ca_file, ...). The password file is
  // read here to check it, and again at every login.
  static std::shared_ptr<EtcdSession> Create(const EtcdClientOptions& options, bool tls,
                                             std::vector<ConfigError>* errors);
  EtcdSession(const EtcdSession&) = delete;
  EtcdSession& operator=(const EtcdSession&) = delete;

  ssl_ctx_st* tls() const { return tls_.get(); }  // null: plain HTTP
  const std::string& server_name() const { return options_.tls.server_name; }
  bool authenticates() const { return !options_.username.empty(); }
  const std::string& username() const { return options_.username; }
  // The password from password_file, or why not (never the password itself).
  Result<std::string> ReadPassword() const;

  // The token to send ("" before the first login).
  std::string token() const;
  void SetToken(std::string token);
  // Forgets `stale` (not a newer token another thread already got).
  void DropToken(const std::string& stale);
  uint64_t logins() const { return logins_.load(); }  // successful logins so far

 private:
  explicit EtcdSession(EtcdClientOptions options) : options_(std::move(options)) {}
  EtcdClientOptions options_;
  SslCtxPtr tls_;
  mutable std::mutex mu_;
  std::string token_;  // guarded by mu_
  std::atomic<uint64_t> logins_{0};
};

struct EtcdOptions {
  EtcdUrl url;
  std::shared_ptr<EtcdSession> session;  // null: plain HTTP, no authentication
  std::chrono::milliseconds io_timeout{2000};
  std::chrono::milliseconds probe_interval{5000};  // a silent watch checks its member
  std::chrono::milliseconds retry_min{50};
  std::chrono::milliseconds retry_max{2000};
};

// One connection to an etcd member, every wait bounded by the caller's
// deadline (poll on a non-blocking socket; TLS through OpenSSL on it).
class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Resolves the host, connects to its addresses in turn, and (TLS) shakes hands.
  Status Open(const std::pair<std::string, int>& endpoint, const EtcdSession* session,
              std::chrono::steady_clock::time_point deadline);
  // POST `path` with `body` (and the token as Authorization when not empty).
  Status Post(std::string_view path, std::string_view body, std::string_view token,
              std::chrono::steady_clock::time_point deadline);
  // Appends what arrives before `deadline` to *buf: > 0 bytes, 0 at the end
  // of the stream, -1 when the deadline passed with nothing, -2 on an error.
  ssize_t Read(std::string* buf, std::chrono::steady_clock::time_point deadline);
  Status Error(std::string_view step) const;
  const std::string& where() const { return where_; }

 private:
  Status Connect(const std::string& host, int port, std::chrono::steady_clock::time_point deadline);
  Status Handshake(const std::string& host, const EtcdSession& session,
                   std::chrono::steady_clock::time_point deadline);
  // Waits for `events` on the socket until `deadline`: 1 ready, 0 timed out, -1 error.
  int Wait(short events, std::chrono::steady_clock::time_point deadline) const;
  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  std::string where_;
  std::string tls_error_;  // the last TLS failure, for Error()
};

// The response head, once it is complete; `buf` keeps what follows it. A
// refusal (not 200) is read whole (at most 64 KiB) and returned as a kServer
// error with etcd's message; *rejected_token tells whether etcd refused the token.
Status ReadHead(Connection& c, std::string* buf, ReplyHead* head,
                std::chrono::steady_clock::time_point deadline, bool* rejected_token);

// A token for a call on `endpoint`: the session's, else one from a login on
// that member ("" without authentication).
Result<std::string> TokenFor(const EtcdOptions& options,
                             const std::pair<std::string, int>& endpoint,
                             std::chrono::steady_clock::time_point deadline);

// The key's value and the store's revision; kv empty when the key is absent.
Result<RangeReply> EtcdRange(const EtcdOptions& options);
// Writes `value` to the key; the revision it was written at.
Result<int64_t> EtcdPut(const EtcdOptions& options, std::string_view value);
// Writes `value` (EtcdDeleteIfRevision: deletes the key) only while the key's
// mod_revision is `mod_revision` (0: absent), in one txn; kUnavailable when
// someone wrote the key in between (nothing written).
Result<int64_t> EtcdPutIfRevision(const EtcdOptions& options, std::string_view value,
                                  int64_t mod_revision);
Status EtcdDeleteIfRevision(const EtcdOptions& options, int64_t mod_revision);

}  // namespace tollgate::etcd

#endif  // TOLLGATE_RUNTIME_ETCD_CLIENT_H_
