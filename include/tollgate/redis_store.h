// RedisStore: rate-limit state in one Redis, decided by one atomic Lua script.
//
// Every decision is core's exact step (see algorithm.h), run inside Redis by a
// Lua script that reproduces the same int64 nanosecond arithmetic on two exact
// limbs (seconds, nanoseconds): no floating point ever touches a time.
// Supported algorithms: token_bucket, leaky_bucket (meter and shaper),
// fixed_window and sliding_window, with the same Decision fields as LocalStore.
// sliding_log returns kInvalidArgument (its log of up to `burst` grants per
// key does not fit the one-script design; see docs/redis.md).
//
// Throughput: callers never talk to Redis directly. Decisions are queued and an
// I/O thread (Boost.Asio; hiredis parses RESP) packs whatever is waiting into
// one EVALSHA per connection turn: many batches, many keys, one script call.
// Several calls are pipelined per connection over a small pool. Decisions for
// the same hot key in one call are granted in arrival order: exact, and one
// call for all of them. A batch (Acquire with several items) stays
// all-or-nothing: the script checks every item and charges all or none.
//
// Time: Redis TIME by default; with use_client_clock the caller's wall clock
// is passed instead. Either way the stored TAT never moves backwards.
//
// Keys: key_prefix + an injective escape of the item key (no '{' or '}', so
// untrusted text never forms a hash tag); escaped keys longer than 128 bytes
// are replaced by "#" + 128 bits of SHA-256. Each key expires when its bucket
// is full again. See docs/redis.md for the layout and the value format.
//
// Failures never throw: every call ends with a Status: kTimeout (no answer
// within call_timeout; the decision may or may not have been charged),
// kConnection (not connected / connection broke), kScript (Lua error),
// kServer (an error reply: OOM, READONLY, BUSY...), kUnavailable (queue full,
// shutting down), kInvalidArgument (bad item or unsupported limit). NOSCRIPT is
// recovered by resending the same call as EVAL, which is safe: a NOSCRIPT call
// did not run, so nothing is charged twice.
//
// Thread safety: all public methods may be called from any thread. Callbacks
// run on the store's I/O thread and must not block; never call the blocking
// Acquire()/Command() from inside a callback.
// Ownership: the store owns its thread and connections; the destructor fails
// queued calls with kUnavailable and joins the thread.
#ifndef TOLLGATE_REDIS_STORE_H_
#define TOLLGATE_REDIS_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/store.h"

namespace tollgate {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;  // ACL user; empty = "default" / legacy AUTH
  std::string password;  // empty = no AUTH
  int db = 0;
  // TLS (rediss://): Boost.Asio SSL over OpenSSL (hiredis only parses RESP).
  // The peer is verified by default: its chain against tls_ca_file (or the
  // system trust store when empty) and its name against tls_server_name (or
  // host) as a DNS name or IP address SAN; SNI carries the name unless it is
  // an IP address. tls_cert_file + tls_key_file (PEM) present a client
  // certificate (mTLS). The handshake counts against connect_timeout.
  bool tls = false;
  std::string tls_ca_file;      // PEM bundle; empty = system trust store
  std::string tls_cert_file;    // client certificate chain (PEM), with tls_key_file
  std::string tls_key_file;     // client private key (PEM), unencrypted
  std::string tls_server_name;  // name to verify and send as SNI; empty = host
  // Accepts any server certificate (no chain, no name check): encryption
  // without authentication, open to a man in the middle. Tests only.
  bool tls_insecure_skip_verify = false;
  std::string key_prefix = "tg:";

  // Redis Sentinel (redis-sentinel://, ParseRedisSentinelUrl): when
  // `sentinels` is not empty, host and port name no server: the store asks
  // the sentinels for sentinel_master's address, checks it with ROLE, and
  // follows +switch-master, READONLY replies and lost connections
  // (src/redis/sentinel.h). username/password then authenticate to the
  // master (and to a promoted replica); sentinel_username/sentinel_password
  // to the sentinels. With tls (rediss-sentinel://) the sentinels and the
  // master are reached over TLS with the same tls_* settings: the master's
  // certificate is verified against the address a sentinel names (an IP
  // address unless the sentinels announce names) or tls_server_name.
  std::vector<std::string> sentinels;  // "host:port" or "[v6]:port", asked in this order
  std::string sentinel_master;         // the master's name in the sentinels' configuration
  std::string sentinel_username;       // ACL user on the sentinels; empty = legacy AUTH
  std::string sentinel_password;       // empty = no AUTH to the sentinels

  size_t connections = 2;                           // pool size, 1..64
  size_t max_inflight_per_connection = 4;           // pipelined script calls per connection
  size_t max_batch = 256;                           // decisions (batches) per script call
  size_t max_queue = 100000;                        // waiting decisions before kUnavailable
  std::chrono::milliseconds connect_timeout{1000};  // TCP connect + AUTH/SELECT/SCRIPT LOAD
  std::chrono::milliseconds call_timeout{500};      // from enqueue to reply
  std::chrono::milliseconds reconnect_backoff_min{20};
  std::chrono::milliseconds reconnect_backoff_max{1000};

  // Pass the caller's wall clock (clock->WallNow()) instead of Redis TIME.
  bool use_client_clock = false;
  const Clock* clock = &SystemClock::Instance();  // not owned; must outlive the store
  // Times the I/O: call_timeout and connect_timeout deadlines, reconnect
  // backoff (and the cluster store's topology refresh and retry timers). A
  // ManualClock here expires them only when moved; the I/O thread looks at it
  // every 5 ms. Separate from `clock`, so a test can freeze decisions' time
  // while calls still time out. Not owned; must outlive the store.
  const Clock* io_clock = &SystemClock::Instance();

  // "Known denied until t": single-item decisions that Redis denied are answered
  // locally until the retry time passes (same key, cost and limit only). The
  // time is clock->Now(), so a test's ManualClock expires the entries.
  bool deny_cache = false;
  size_t deny_cache_entries = 65536;
};

// redis://[[user]:password@]host[:port][/db][?prefix=P&timeout_ms=N&connect_timeout_ms=N&pool=N]
// rediss://... is the same over TLS (tls = true), with the extra options
// tls_ca_file, tls_cert_file, tls_key_file, tls_server_name (%-escaped values)
// and tls_insecure_skip_verify=1.
Result<RedisOptions> ParseRedisUrl(std::string_view url);

// redis-sentinel://[[user]:password@]host:port[,host:port...]/<master-name>[?options]
// The hosts are sentinels, asked in order; the user info authenticates to
// them (sentinel_username/sentinel_password). The master's own credentials
// are the options master_username and master_password (%-escaped); db=N
// selects its database. Every other option is redis://'s (prefix,
// timeout_ms, connect_timeout_ms, pool, client_clock). The master name is
// 1..128 bytes of [A-Za-z0-9._-]. rediss-sentinel:// is the same over TLS,
// to the sentinels and the master, with rediss://'s tls_* options.
// Errors are kInvalidArgument "redis sentinel url: ..." with the URL redacted.
Result<RedisOptions> ParseRedisSentinelUrl(std::string_view url);

// A reply of RedisStore::Command, rendered from hiredis' reply tree.
struct RedisReply {
  enum class Type { kString, kStatus, kInteger, kNil, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // string, status or error text
  int64_t integer = 0;
  std::vector<RedisReply> elements;
};

// The integer of an integer reply (e.g. a script's count): an error reply is
// kServer with its text (at most 200 bytes), another type kServer naming it,
// and a failed call its own Status.
Result<int64_t> IntegerReply(Result<RedisReply> reply);

struct RedisStoreStats {
  uint64_t decisions = 0;         // batches decided by Redis
  uint64_t script_calls = 0;      // EVALSHA/EVAL sent
  uint64_t noscript_reloads = 0;  // NOSCRIPT answered by resending as EVAL
  uint64_t connects = 0;          // successful (re)connections
  uint64_t timeouts = 0;          // calls failed with kTimeout
  uint64_t errors = 0;            // calls failed otherwise
  uint64_t deny_cache_hits = 0;
  uint64_t master_changes = 0;  // sentinel mode: the master replaced or lost
};

class RedisStore final : public Store {
 public:
  // Validates options and starts connecting in the background; does not wait
  // for Redis (calls made before the first connection wait up to call_timeout).
  static Result<std::unique_ptr<RedisStore>> Create(const RedisOptions& options);
  ~RedisStore() override;

  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override;
  // `done` runs exactly once, on the I/O thread (or inline for invalid input,
  // deny-cache hits and a full queue).
  void AcquireAsync(std::span<const AcquireItem> items, Callback done) override;
  std::string Name() const override { return "redis"; }
  // Key administration (see Store): a DEL of the key's state, or one script
  // that forgets and charges it (src/redis/key_admin.h). Both also drop the
  // key from this store's deny cache.
  Status ResetKey(std::string_view key, const Limit& limit) override;
  Result<Decision> SetRemaining(std::string_view key, const Limit& limit,
                                int64_t remaining) override;
  bool AsyncNative() const override { return true; }
  // At least one connection is up.
  bool Healthy() const override;

  // Concurrency leases (lease.h): one sorted set per key (RedisKeyFor(key) +
  // "|cc"), changed by one Lua script, so exact across every client of this
  // Redis. Ids are 32 hex digits. Blocking (up to call_timeout): never call
  // from a callback. kTimeout leaves it unknown whether a lease was taken; an
  // untracked lease then comes back at its expiry.
  bool SupportsLeases() const override { return true; }
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) override;
  Result<bool> ReleaseLease(std::string_view key, std::string_view lease_id) override;
  void AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                         LeaseCallback done) override;
  void ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                         ReleaseCallback done) override;
  // Settlements (Store::Settle): one settle script call per item
  // (src/redis/settle_script.h), exact like the batch script; the store's
  // clock choice (server TIME or the client's) applies. A call whose reply
  // is lost is not retried: a settlement lands at most once.
  bool SupportsSettle() const override { return true; }
  Result<std::vector<Settled>> Settle(std::span<const SettleItem> items) override;
  void SettleAsync(std::span<const SettleItem> items, SettleCallback done) override;

  // Runs one plain command (e.g. {"SET", k, v, "PX", "3000"}) on the pool, with
  // the same timeouts. Error replies come back as a value of Type::kError.
  void CommandAsync(std::vector<std::string> argv, std::function<void(Result<RedisReply>)> done);
  Result<RedisReply> Command(std::vector<std::string> argv);

  // The Redis key that holds `key`'s bucket state (prefix + escaped or hashed
  // key). Window algorithms append "|fw:<window ns>" or "|sw:<window ns>".
  std::string RedisKeyFor(std::string_view key) const;
  // Whether `limit` can be decided exactly by the script; kInvalidArgument says why not.
  static Status CheckLimit(const Limit& limit);

  // The master decisions go to, "host:port"; in sentinel mode the one last
  // discovered, or "" while none is known.
  std::string MasterEndpoint() const;

  RedisStoreStats Stats() const;
  const RedisOptions& options() const;

  class Impl;

 private:
  explicit RedisStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate

#endif  // TOLLGATE_REDIS_STORE_H_
