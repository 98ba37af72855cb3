// NodeClient: the pipelined connection pool and job queue for one Redis node.
//
// Jobs are either one script group (one caller's all-or-nothing batch, for
// the GCRA script) or one plain command. Pump() packs every waiting script
// job into one EVALSHA per connection turn (up to max_batch jobs; jobs marked
// `asking` go alone, preceded by ASKING), pipelining up to
// max_inflight_per_connection calls per connection. NOSCRIPT is answered by
// resending the same call once as EVAL (it did not run, so nothing is charged
// twice). Every other outcome goes back to the job's callback, which decides
// what to do (RedisStore decodes; the cluster store also follows redirections).
//
// Thread safety: Submit() may be called from any thread; everything else runs
// on the io_context's thread. Callbacks run on that thread.
#ifndef TOLLGATE_SRC_REDIS_NODE_CLIENT_H_
#define TOLLGATE_SRC_REDIS_NODE_CLIENT_H_

#include <atomic>
#include <boost/container/small_vector.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "redis/gcra_script.h"
#include "tollgate/store.h"

namespace tollgate::redis {

// What a job's callback receives. Exactly one of: a transport/status error
// (status not ok), an error reply (error non-empty, e.g. "MOVED 3999 h:p"),
// or a reply: for a script job `triples` points at its 3*items integers, for a
// command `reply` is the whole reply.
struct JobResult {
  Status status;
  bool sent = true;  // false: failed before it was written to Redis (safe to retry)
  std::string_view error;
  const int64_t* triples = nullptr;
  const redisReply* reply = nullptr;
};

struct NodeJob;
using NodeJobPtr = std::unique_ptr<NodeJob>;

// Most jobs are one decision: its key, item and limit live inside the job.
template <typename T>
using OneOrMore = boost::container::small_vector<T, 1>;

struct NodeJob {
  OneOrMore<std::string> keys;  // Redis keys, one per item
  OneOrMore<ScriptItem> items;
  OneOrMore<Limit> limits;        // one per item, for decoding
  std::vector<std::string> argv;  // a plain command when non-empty
  bool asking = false;            // send ASKING first (ASK redirection)
  bool dry_run = false;           // decide without writing (cluster cross-node batches)
  // Declare keys in KEYS (standalone; cluster fallback, one slot per call). A
  // cluster packs undeclared jobs of many slots into one call instead.
  bool declare_keys = true;
  int redirects = 0;  // redirections followed so far (cluster)
  SteadyTime deadline;
  int64_t sent_ns = 0;  // RedisOptions::clock->Now() when the call was sent (deny cache)
  // Runs once per outcome; may take ownership of `job` (e.g. to resubmit it
  // elsewhere after a redirection), otherwise the job is destroyed after it.
  std::function<void(NodeJobPtr& job, const JobResult&)> done;
  // The caller's callback and deny-cache entry, kept here so that `done`
  // captures little enough to need no allocation of its own (RedisStore).
  Store::Callback caller_done;
  std::string cache_entry;
};

// Script calls carry at most this many items (Pump packs jobs up to it; a
// single caller's batch must stay below it), so an item's key and entry
// indices pack into one argument: key * kPackedItemBase + entry.
inline constexpr size_t kMaxItemsPerCall = size_t{1} << 20;
inline constexpr int64_t kPackedItemBase = int64_t{1} << 21;

// The BatchDecision of a script job from its reply triples (each one
// ValidScriptTriple: OnScriptReply refuses a reply with any other).
BatchDecision DecodeJob(const NodeJob& job, const int64_t* triples);
// The Status for an error reply: kScript for Lua errors and NOSCRIPT, else kServer.
Status ErrorReplyStatus(std::string_view endpoint, std::string_view text);

struct NodeStats {
  std::atomic<uint64_t> script_calls{0}, noscript_reloads{0}, connects{0}, timeouts{0}, errors{0};
};

class NodeClient : public Connection::Listener {
 public:
  // `options` (host, port, pool, timeouts) must outlive the client; `stats` too.
  // `cluster`: declared-key jobs go one per call (their keys share one slot),
  // undeclared-key jobs pack together. `tls`: the store's TLS context (null: TCP).
  NodeClient(boost::asio::io_context& io, RedisOptions options, std::string_view script,
             NodeStats* stats, bool cluster = false, TlsContextPtr tls = nullptr);
  ~NodeClient() override;

  const RedisOptions& options() const { return options_; }
  std::string endpoint() const { return options_.host + ":" + std::to_string(options_.port); }

  // Any thread. Fails inline with kUnavailable when the queue is full or closed.
  void Submit(NodeJobPtr job);
  // I/O thread: start connecting / periodic work / shut down.
  void Start();
  void Tick(SteadyTime now);
  void Close(const Status& why);
  // I/O thread, after Close(): true once no asynchronous operation of its
  // connections is still queued (each holds its connection), so the client
  // can be destroyed.
  bool Released() const;

  bool Healthy() const { return ready_count_.load(std::memory_order_relaxed) > 0; }

 private:
  void OnReady(Connection& c) override;
  void OnDown(Connection& c, const Status& why) override;
  void UpdateReady();
  bool AnyConnecting() const;
  Status LastError() const;
  void ExpireQueued(SteadyTime now);
  void FailQueued(const Status& why);
  Connection* PickConnection();
  void Pump();
  void SendCommand(Connection& c, NodeJobPtr job);
  void SendScript(Connection& c, std::vector<NodeJobPtr> jobs, bool eval);
  void OnScriptReply(Connection& c, std::vector<NodeJobPtr>& jobs, bool eval, const Status& st,
                     std::vector<ReplyPtr>& got);
  void CountFailure(const Status& st);

  boost::asio::io_context& io_;
  const RedisOptions options_;
  std::string_view script_;
  NodeStats* stats_;
  const bool cluster_;
  const TlsContextPtr tls_;
  // I/O thread only.
  std::vector<std::shared_ptr<Connection>> conns_;
  std::vector<std::chrono::milliseconds> backoff_;
  std::vector<SteadyTime> retry_at_;
  std::minstd_rand rng_{std::random_device{}()};
  bool stopping_ = false;
  // SendScript's scratch space, reused from call to call (no per-decision
  // allocations): distinct keys and entries, and an open-addressing index
  // of keys_ (0 = empty, else 1-based key index).
  std::vector<std::string_view> keys_;
  std::vector<const ScriptItem*> entries_;
  std::vector<int64_t> packed_;  // per item: key * kPackedItemBase + entry
  std::vector<uint32_t> key_slots_;
  std::string groups_;          // the groups argument (MessagePack)
  std::vector<int64_t> reply_;  // the decoded reply
  // Guarded by mu_.
  std::mutex mu_;
  std::deque<NodeJobPtr> queue_;
  bool pump_posted_ = false;
  bool closed_ = false;
  std::atomic<int> ready_count_{0};
};

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_NODE_CLIENT_H_
