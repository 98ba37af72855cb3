// RedisClusterStore: rate-limit state spread over the masters of a Redis Cluster.
//
// The same exact GCRA script as RedisStore (see redis_store.h), routed by slot:
// the store discovers the topology (CLUSTER SHARDS, falling back to CLUSTER
// SLOTS), keeps a pipelined connection pool per master, and packs the
// decisions waiting for one master into one script call (the script carries
// the Redis 7 flag allow-cross-slot-keys, so one call may touch every slot the
// master holds; Redis >= 7.0 is required).
//
// Key layout: prefix + "{" + 8 hex of SHA-256(identity) + "}" + escaped key,
// where identity is the text after the last '\x1f' of the item key (the policy
// layer's "<rule>\x1f<algorithm>\x1f<identity>"). All buckets of one identity
// share a slot, so a batch over one identity is decided atomically by one
// script. A batch whose identities live on different masters is checked on
// every master first (a dry run, nothing written) and then charged master by
// master: it never over-grants, but a race between the check and the charge
// can leave an earlier master's items charged while the batch is reported
// denied (an under-grant; see docs/redis.md).
//
// Redirections: MOVED updates the slot map and retries on the new owner; ASK
// retries once on the target with ASKING (no map update); TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN and LOADING retry with backoff until the call's
// deadline. Every redirection means the script did not run, so no decision is
// charged twice. Calls that failed before they were written (node down,
// connection refused) are retried after a topology refresh; a call that may
// have run (timeout or a connection lost mid-call) is never retried: it fails
// with kTimeout/kConnection. Topology refreshes are rate limited (one in
// flight, at most one per refresh_interval) so redirection storms do not stampede.
// Topology may be read from any node, replicas included; writes go to masters only.
//
// Thread safety, ownership and errors: as RedisStore.
#ifndef TOLLGATE_REDIS_CLUSTER_STORE_H_
#define TOLLGATE_REDIS_CLUSTER_STORE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/redis_store.h"
#include "tollgate/store.h"

namespace tollgate {

struct RedisClusterOptions {
  std::vector<std::string> seeds;  // "host:port" of any cluster nodes
  // Per-node settings: auth, key_prefix, pool size, timeouts, batching, clock.
  // host/port are ignored; deny_cache is not used by the cluster store.
  RedisOptions node;
  int max_redirects = 8;                             // per decision
  std::chrono::milliseconds refresh_interval{100};   // min gap between topology reads
  std::chrono::milliseconds periodic_refresh{5000};  // re-read topology this often
  std::chrono::milliseconds retry_backoff{10};       // TRYAGAIN/CLUSTERDOWN, doubled per try
  // Tests only: runs on the store's I/O thread after a cross-node batch's dry
  // run passed, before part `part` (0-based, in order) is charged; a test
  // uses it to lose the race between dry run and charge deterministically.
  std::function<void(size_t part)> before_cross_charge_for_testing;
};

// redis-cluster://[[user]:password@]host:port[,host:port...][?options as redis://]
Result<RedisClusterOptions> ParseRedisClusterUrl(std::string_view url);

struct RedisClusterStats {
  uint64_t decisions = 0;
  uint64_t script_calls = 0;
  uint64_t moved = 0;
  uint64_t ask = 0;
  // Waits before a resend: TRYAGAIN, CLUSTERDOWN, MASTERDOWN, LOADING, a
  // batch split by a resharding, a MOVED bounce between two masters.
  uint64_t tryagain = 0;
  uint64_t refreshes = 0;
  uint64_t retired_nodes = 0;   // node clients closed because the topology dropped their node
  uint64_t retried_unsent = 0;  // calls re-routed after failing before being sent
  uint64_t cross_node_batches = 0;
  uint64_t cross_node_refunds = 0;  // refund calls after a cross-node batch lost a race
  uint64_t slot_fallbacks = 0;      // multi-slot calls resent one slot per call (resharding)
  uint64_t timeouts = 0;
  uint64_t errors = 0;
  size_t masters = 0;
};

class RedisClusterStore final : public Store {
 public:
  static Result<std::unique_ptr<RedisClusterStore>> Create(const RedisClusterOptions& options);
  ~RedisClusterStore() override;

  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override;
  void AcquireAsync(std::span<const AcquireItem> items, Callback done) override;
  std::string Name() const override { return "redis-cluster"; }
  // Key administration (see Store; src/redis/key_admin.h), sent to the master
  // owning the key's slot like any Command.
  Status ResetKey(std::string_view key, const Limit& limit) override;
  Result<Decision> SetRemaining(std::string_view key, const Limit& limit,
                                int64_t remaining) override;
  bool AsyncNative() const override { return true; }
  // The slot map covers every slot and every master has a connection up.
  bool Healthy() const override;

  // Concurrency leases, as RedisStore's: one sorted set per key on the master
  // owning the key's hash tag (RedisKeyFor(key) + "|cc"), followed through
  // MOVED / ASK like Command.
  bool SupportsLeases() const override { return true; }
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) override;
  Result<bool> ReleaseLease(std::string_view key, std::string_view lease_id) override;
  void AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                         LeaseCallback done) override;
  void ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                         ReleaseCallback done) override;
  // Settlements (Store::Settle): one settle script call per item on
  // the master of its key's slot
  // (src/redis/settle_script.h), exact like the batch script; the store's
  // clock choice (server TIME or the client's) applies. A call whose reply
  // is lost is not retried: a settlement lands at most once.
  bool SupportsSettle() const override { return true; }
  Result<std::vector<Settled>> Settle(std::span<const SettleItem> items) override;
  void SettleAsync(std::span<const SettleItem> items, SettleCallback done) override;

  // Runs one plain command (e.g. {"EVAL", script, "1", key, ...}) on the master
  // owning the slot of `key`, a Redis key as sent (its {hash tag} decides the
  // slot; key_prefix is not added). MOVED, ASK, TRYAGAIN-like errors and calls
  // that failed before being sent are followed inside the store within the
  // call_timeout deadline and max_redirects; any other error reply comes back as a
  // value of Type::kError. Same threading rules as RedisStore::Command.
  void CommandAsync(std::string_view key, std::vector<std::string> argv,
                    std::function<void(Result<RedisReply>)> done);
  Result<RedisReply> Command(std::string_view key, std::vector<std::string> argv);

  // The Redis key of `key` (with its hash tag) and its slot.
  std::string RedisKeyFor(std::string_view key) const;
  static int SlotOf(std::string_view redis_key);

  RedisClusterStats Stats() const;

  class Impl;

 private:
  explicit RedisClusterStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate

#endif  // TOLLGATE_REDIS_CLUSTER_STORE_H_
