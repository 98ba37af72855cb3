#include "tollgate/redis_cluster_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <thread>
#include <unordered_map>

#include "base/one_shot.h"
#include "base/redact.h"
#include "redis/cluster_slots.h"
#include "redis/key_admin.h"
#include "redis/lease_script.h"
#include "redis/node_client.h"
#include "redis/redis_keys.h"
#include "redis/settle_script.h"

namespace tollgate {

namespace asio = boost::asio;
using redis::JobResult;
using redis::NodeClient;
using redis::NodeJob;
using redis::NodeJobPtr;
using redis::SteadyTime;
using Final = std::function<void(Result<BatchDecision>)>;

namespace {

bool SplitEndpoint(const std::string& ep, std::string* host, int* port) {
  const size_t colon = ep.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = ep.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    *port = std::stoi(ep.substr(colon + 1));
  } catch (const std::exception&) {
    return false;
  }
  return *port > 0 && *port < 65536;
}

// Gives back the charges of a cross-node batch that was denied after some
// masters were charged (LocalStore's Refund). Buckets: TAT -= increment; a
// TAT at or below now is a full bucket: the key is deleted (with a client
// clock it is kept for the 1 s slack). Windows: the count of the window the
// charge went into (used, or a sliding window's current count) -= cost, only
// while the key's state is still in that window (compared as the stored
// decimal index); a state that moved on (or expired) keeps it: dropped. Keys
// travel in ARGV (several slots of one node, like the batch script): ARGV[1]
// now or "", ARGV[2] n, then n keys, then n increments in ns; then m, then m
// window refunds of 4 values: key, the digits of counts after the stored index
// (7 or 13 fixed, 14 sliding), the charged window index, the cost. Sent once, never retried: a
// refund that ran twice would grant tokens never charged.
constexpr std::string_view kRefundScript =
    R"lua(#!lua flags=allow-cross-slot-keys
-- tollgate refund v3: give back GCRA and window charges
local E9 = 1000000000
local function split(v)
  local len = #v
  if len <= 9 then return 0, tonumber(v) end
  return tonumber(string.sub(v, 1, len - 9)), tonumber(string.sub(v, len - 8))
end
local now_s, now_n, slack
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now_s, now_n, slack = tonumber(t[1]), tonumber(t[2]) * 1000, 0
else
  now_s, now_n = split(ARGV[1])
  slack = 1000
end
local n = tonumber(ARGV[2])
for i = 1, n do
  local key = ARGV[2 + i]
  local v = redis.call('GET', key)
  if v then
    local s, ns = split(v)
    local is, ins = split(ARGV[2 + n + i])
    s, ns = s - is, ns - ins
    if ns < 0 then s, ns = s - 1, ns + E9 end
    local rs, rn = s - now_s, ns - now_n
    if rn < 0 then rs, rn = rs - 1, rn + E9 end
    local ms = rs * 1000 + math.ceil(rn / 1000000) + slack
    if ms < 1 then
      redis.call('DEL', key)
    else
      local nv
      if s > 0 then nv = string.format('%d%09d', s, ns) else nv = string.format('%d', ns) end
      redis.call('SET', key, nv, 'PX', string.format('%d', ms))
    end
  end
end
local b = 3 + 2 * n
local m = tonumber(ARGV[b] or '0')
for i = 0, m - 1 do
  local key, tail = ARGV[b + 1 + 4 * i], tonumber(ARGV[b + 2 + 4 * i])
  local v = redis.call('GET', key)
  if v and #v > tail and string.sub(v, 1, #v - tail) == ARGV[b + 3 + 4 * i] then
    local len, cw = #v, 7
    if tail == 13 then cw = 13 end  -- a fixed window above 9999999 a window
    local cnt = tonumber(string.sub(v, len - cw + 1))
    cnt = cnt - math.min(cnt, tonumber(ARGV[b + 4 + 4 * i]))
    redis.call('SET', key, string.sub(v, 1, len - cw) .. string.format('%0' .. cw .. 'd', cnt),
               'KEEPTTL')
  end
end
return 0
)lua";

}  // namespace

class RedisClusterStore::Impl {
 public:
  Impl(const RedisClusterOptions& options, redis::TlsContextPtr tls)
      : options_(options), tls_(std::move(tls)), work_(asio::make_work_guard(io_)), ticker_(io_) {
    slot_node_.fill(nullptr);
  }

  ~Impl() { Shutdown(); }

  void Start() {
    thread_ = std::thread([this] { io_.run(); });
    asio::post(io_, [this] {
      for (const auto& s : options_.seeds) candidates_.push_back(s);
      RequestRefresh(true);
      Tick();
    });
  }

  void Shutdown() {
    if (!thread_.joinable()) return;
    closed_.store(true);
    asio::post(io_, [this] {
      stopping_ = true;
      ticker_.cancel();
      const Status why = UnavailableError("redis cluster store is shutting down");
      for (auto& [ep, node] : nodes_) node->Close(why);
      auto parked = std::move(parked_);
      for (auto& p : parked) Finish(p.job, why);
      auto waiting = std::move(predispatch_);
      for (auto& p : waiting) p.second(why);
      io_.stop();
    });
    work_.reset();
    thread_.join();
    const Status why = UnavailableError("redis cluster store is shutting down");
    for (auto& [ep, node] : nodes_) node->Close(why);
  }

  const RedisOptions& node_options() const { return options_.node; }

  const RedisClusterOptions& options() const { return options_; }
  std::string KeyFor(std::string_view key) const {
    return redis::ClusterRedisKey(options_.node.key_prefix, key);
  }

  void AcquireAsync(std::span<const AcquireItem> items, Store::Callback done) {
    if (items.empty()) {
      done(BatchDecision{true, true, -1, {}});
      return;
    }
    if (closed_.load()) {
      done(UnavailableError("redis cluster store is shutting down"));
      return;
    }
    if (items.size() >= redis::kMaxItemsPerCall) {
      done(InvalidArgument("items: at most " + std::to_string(redis::kMaxItemsPerCall - 1) +
                           " per batch on redis"));
      return;
    }
    auto job = std::make_unique<NodeJob>();
    for (size_t i = 0; i < items.size(); ++i) {
      const AcquireItem& it = items[i];
      if (it.limit == nullptr || it.cost < 0) {
        done(InvalidArgument("items[" + std::to_string(i) + "]: needs a limit and a cost >= 0"));
        return;
      }
      if (Status st = redis::CheckScriptLimit(*it.limit); !st.ok()) {
        done(st);
        return;
      }
      job->keys.push_back(KeyFor(it.key) + redis::StateKeySuffix(*it.limit));
      job->limits.push_back(*it.limit);
      job->items.push_back(redis::MakeScriptItem(*it.limit, it.cost));
    }
    job->deadline = redis::IoNow(options_.node) + options_.node.call_timeout;
    // Runs on the I/O thread; if the I/O thread stopped first, the holder's
    // destructor answers, so `done` always runs exactly once.
    struct Holder {
      NodeJobPtr job;
      Store::Callback done;
      Holder(NodeJobPtr j, Store::Callback d) : job(std::move(j)), done(std::move(d)) {}
      Holder(Holder&&) = default;
      ~Holder() {
        if (done) done(UnavailableError("redis cluster store is shutting down"));
      }
    };
    asio::post(io_, [this, h = Holder(std::move(job), std::move(done))]() mutable {
      Dispatch(std::move(h.job), std::exchange(h.done, nullptr));
    });
  }

  bool Healthy() const { return healthy_.load(std::memory_order_relaxed); }

  // A plain command routed by the slot of `key` (a Redis key, hash tag
  // included). Redirections, unsent failures and retryable errors are followed
  // within the call's deadline, as for decisions; error replies are values.
  void CommandAsync(std::string key, std::vector<std::string> argv,
                    std::function<void(Result<RedisReply>)> done) {
    if (argv.empty()) {
      done(InvalidArgument("command: empty argv"));
      return;
    }
    if (closed_.load()) {
      done(UnavailableError("redis cluster store is shutting down"));
      return;
    }
    auto job = std::make_unique<NodeJob>();
    job->keys.push_back(std::move(key));
    job->argv = std::move(argv);
    job->deadline = redis::IoNow(options_.node) + options_.node.call_timeout;
    auto shared = std::make_shared<std::function<void(Result<RedisReply>)>>(std::move(done));
    job->done = [this, shared](NodeJobPtr& j, const JobResult& r) { HandleCommand(j, r, *shared); };
    struct Holder {
      NodeJobPtr job;
      ~Holder() {
        if (job) {
          JobResult r;
          r.status = UnavailableError("redis cluster store is shutting down");
          auto& d = job->done;
          d(job, r);
        }
      }
      Holder(NodeJobPtr j) : job(std::move(j)) {}
      Holder(Holder&&) = default;
    };
    asio::post(io_, [this, h = Holder(std::move(job))]() mutable {
      NodeJobPtr j = std::move(h.job);
      if (stopping_) {
        Finish(j, UnavailableError("redis cluster store is shutting down"));
        return;
      }
      if (!have_map_) {
        Park(std::move(j), redis::IoNow(options_.node));
        RequestRefresh(false);
        return;
      }
      Route(std::move(j));
    });
  }

  RedisClusterStats Stats() const {
    RedisClusterStats s;
    s.decisions = decisions_.load();
    s.script_calls = node_stats_.script_calls.load();
    s.moved = moved_.load();
    s.ask = ask_.load();
    s.tryagain = tryagain_.load();
    s.refreshes = refreshes_.load();
    s.retired_nodes = retired_nodes_.load();
    s.retried_unsent = retried_unsent_.load();
    s.cross_node_batches = cross_.load();
    s.cross_node_refunds = refunds_.load();
    s.slot_fallbacks = undeclared_fallbacks_.load();
    s.timeouts = node_stats_.timeouts.load() + timeouts_.load();
    s.errors = node_stats_.errors.load() + errors_.load();
    s.masters = masters_.load();
    return s;
  }

 private:
  struct Parked {
    SteadyTime retry_at;
    NodeJobPtr job;
  };

  // ---- I/O thread ----

  NodeClient* Node(const std::string& endpoint) {
    auto it = nodes_.find(endpoint);
    if (it != nodes_.end()) return it->second.get();
    RedisOptions o = options_.node;
    if (!SplitEndpoint(endpoint, &o.host, &o.port)) return nullptr;
    o.deny_cache = false;
    auto node = std::make_unique<NodeClient>(io_, o, redis::GcraClusterScript(), &node_stats_,
                                             /*cluster=*/true, tls_);
    NodeClient* raw = node.get();
    nodes_.emplace(endpoint, std::move(node));
    raw->Start();
    return raw;
  }

  // The one node holding every key of `job`; nullptr + *unknown when a slot has
  // no owner yet; nullptr + !*unknown when the keys span nodes.
  NodeClient* OwnerOf(const NodeJob& job, bool* unknown) const {
    *unknown = false;
    NodeClient* owner = nullptr;
    for (const auto& k : job.keys) {
      NodeClient* n = slot_node_[static_cast<size_t>(redis::KeySlot(k))];
      if (n == nullptr) {
        *unknown = true;
        return nullptr;
      }
      if (owner != nullptr && owner != n) return nullptr;
      owner = n;
    }
    return owner;
  }

  void Dispatch(NodeJobPtr job, Store::Callback done) {
    if (stopping_) {
      done(UnavailableError("redis cluster store is shutting down"));
      return;
    }
    if (!have_map_) {  // decided where to go once the first topology arrives
      predispatch_.emplace_back(std::move(job), std::move(done));
      RequestRefresh(false);
      return;
    }
    bool unknown = false;
    NodeClient* owner = OwnerOf(*job, &unknown);
    if (owner == nullptr && !unknown) {
      CrossNode(std::move(job), std::move(done));
      return;
    }
    Final final = [this, done = std::move(done)](Result<BatchDecision> r) {
      if (r.ok()) decisions_.fetch_add(1, std::memory_order_relaxed);
      done(std::move(r));
    };
    Attach(*job, std::move(final), /*reroutable=*/true);
    Route(std::move(job));
  }

  // Gives `job` the result handler that follows redirections and ends in `final`.
  // `reroutable`: a caller's whole batch (not a part of a cross-node batch),
  // which a resharding that splits it across masters sends to CrossNode.
  void Attach(NodeJob& job, Final final, bool reroutable = false) {
    job.declare_keys = false;  // many slots of one node per call, until a redirection
    job.done = [this, final = std::move(final), reroutable](NodeJobPtr& j, const JobResult& r) {
      Handle(j, r, final, reroutable);
    };
  }

  // Route's answer for a job whose keys the map places on several masters.
  static constexpr std::string_view kSplit = "tollgate: keys split across masters";

  void Finish(NodeJobPtr& job, const Status& st) {
    JobResult r;
    r.status = st;
    auto& done = job->done;
    done(job, r);
  }

  void Route(NodeJobPtr job) {
    job->asking = false;
    if (job->declare_keys && job->argv.empty()) {
      const int slot = redis::KeySlot(job->keys.front());
      for (const auto& k : job->keys) {
        if (redis::KeySlot(k) == slot) continue;
        bool unknown = false;
        if (have_map_ && OwnerOf(*job, &unknown) == nullptr && !unknown) {
          job->declare_keys = false;  // split across masters: answered below
          break;
        }
        // Declared keys must share a slot: during a resharding a multi-slot
        // batch cannot be followed through redirections atomically. Wait
        // for the migration to move on, then go again as one multi-slot call.
        if (RetrySplit(job)) return;
        errors_.fetch_add(1, std::memory_order_relaxed);
        Finish(job, Status(StatusCode::kServer,
                           "redis cluster: a batch over several slots met a resharding that "
                           "outlasted its retries; retry"));
        return;
      }
    }
    bool unknown = false;
    NodeClient* owner = have_map_ ? OwnerOf(*job, &unknown) : nullptr;
    if (owner != nullptr) {
      owner->Submit(std::move(job));
      return;
    }
    if (!have_map_ || unknown) {
      Park(std::move(job), redis::IoNow(options_.node));
      RequestRefresh(false);
      return;
    }
    // A resharding split the keys of one group apart: one call cannot decide
    // them. Handle sends a caller's batch through the cross-node path.
    JobResult split;
    split.sent = false;
    split.error = kSplit;
    auto& done = job->done;
    done(job, split);
  }

  // TRYAGAIN-like backoff: retry_backoff doubled per redirection, at most 200 ms.
  std::chrono::milliseconds Backoff(const NodeJob& job) const {
    return std::min<std::chrono::milliseconds>(
        options_.retry_backoff * (1 << std::min(job.redirects, 5)), std::chrono::milliseconds(200));
  }

  // A multi-slot job that cannot be sent as one call now: park it for a
  // backoff (bounded by max_redirects and its deadline) after asking for a
  // fresh map, then send it again undeclared. Nothing ran (Route runs before
  // sending; the script reads every key before it writes one, so a call that
  // failed on a moved key wrote nothing): no charge twice. False: give up.
  bool RetrySplit(NodeJobPtr& job) {
    const auto now = redis::IoNow(options_.node);
    if (stopping_ || ++job->redirects > options_.max_redirects) return false;
    const auto backoff = Backoff(*job);
    if (now + backoff >= job->deadline) return false;
    tryagain_.fetch_add(1, std::memory_order_relaxed);
    job->declare_keys = false;
    RequestRefresh(false);
    Park(std::move(job), now + backoff);
    return true;
  }

  void Park(NodeJobPtr job, SteadyTime retry_at) {
    parked_.push_back(Parked{retry_at, std::move(job)});
  }

  void Handle(NodeJobPtr& job, const JobResult& r, const Final& final, bool reroutable) {
    const auto now = redis::IoNow(options_.node);
    if (r.error.data() == kSplit.data()) {
      // Nothing of this job ran. A caller's batch becomes a cross-node batch
      // (dry run, then charges with refunds), decided within its deadline. A
      // part of one (already dry-run) retries (bounded) in case the map is
      // stale or the migration is undone, then fails: never charged twice.
      if (reroutable && !stopping_) {
        CrossNode(std::move(job), final, /*counted=*/true);
        return;
      }
      if (RetrySplit(job)) return;
      errors_.fetch_add(1, std::memory_order_relaxed);
      final(Status(StatusCode::kServer,
                   "redis cluster: the keys of one batch moved to different nodes during "
                   "a resharding; retry"));
      return;
    }
    if (!r.status.ok()) {
      if (!RetryUnsent(job, r, now)) final(r.status);
      return;
    }
    if (!r.error.empty()) {
      if (!job->declare_keys &&
          (r.error.find("non local key") != std::string_view::npos ||
           r.error.find("CROSSSLOT") != std::string_view::npos ||
           r.error.find("do not hash to the same slot") != std::string_view::npos)) {
        // A multi-slot call met a slot that moved or is migrating. The script
        // failed before writing; resend this job with declared keys so that
        // Redis answers with MOVED/ASK for its slot.
        if (++job->redirects > options_.max_redirects) {
          errors_.fetch_add(1, std::memory_order_relaxed);
          final(Status(StatusCode::kServer, "redis cluster: too many redirections"));
          return;
        }
        undeclared_fallbacks_.fetch_add(1, std::memory_order_relaxed);
        job->declare_keys = true;
        RequestRefresh(false);
        Route(std::move(job));
        return;
      }
      Status failed;
      switch (Redirect(job, r.error, now, &failed)) {
        case Redirected::kTaken:
          return;
        case Redirected::kFailed:
          final(failed);
          return;
        case Redirected::kNone:
          errors_.fetch_add(1, std::memory_order_relaxed);
          final(redis::ErrorReplyStatus("cluster", r.error));
          return;
      }
    }
    final(redis::DecodeJob(*job, r.triples));
  }

  // A job whose call failed before it was written (kConnection or kTimeout,
  // unsent) is safe to retry once the topology says where to go: parked
  // after a refresh, within its deadline. True when the job was taken.
  bool RetryUnsent(NodeJobPtr& job, const JobResult& r, SteadyTime now) {
    const auto code = r.status.code();
    if (r.sent || (code != StatusCode::kConnection && code != StatusCode::kTimeout) ||
        now >= job->deadline || stopping_) {
      return false;
    }
    retried_unsent_.fetch_add(1, std::memory_order_relaxed);
    RequestRefresh(false);
    Park(std::move(job), now + options_.retry_backoff);
    return true;
  }

  enum class Redirected { kTaken, kNone, kFailed };

  // Follows the error reply `error` of `job` when it is a redirection, for
  // decisions and plain commands alike: MOVED points the slot at the new
  // owner and routes again (a job redirected before backs off first: the
  // nodes are still agreeing on the slot), ASK goes once to the target with
  // ASKING, and
  // TRYAGAIN-like errors park the job for a backoff within its deadline; all
  // bounded by max_redirects. None of these ran the call, so nothing runs
  // twice. kTaken: the job went on. kNone: not a redirection (or no time
  // left to retry): the caller answers. kFailed: *failed says why.
  Redirected Redirect(NodeJobPtr& job, std::string_view error, SteadyTime now, Status* failed) {
    int slot = 0;
    std::string endpoint;
    const bool moved = redis::ParseRedirect(error, "MOVED", &slot, &endpoint);
    const bool ask = !moved && redis::ParseRedirect(error, "ASK", &slot, &endpoint);
    const bool retry = !moved && !ask && redis::RetryableClusterError(error);
    if (!moved && !ask && !retry) return Redirected::kNone;
    if (++job->redirects > options_.max_redirects) {
      errors_.fetch_add(1, std::memory_order_relaxed);
      *failed = Status(StatusCode::kServer, "redis cluster: too many redirections, last: " +
                                                std::string(error.substr(0, 200)));
      return Redirected::kFailed;
    }
    if (moved) {
      moved_.fetch_add(1, std::memory_order_relaxed);
      if (NodeClient* n = Node(endpoint)) slot_node_[static_cast<size_t>(slot)] = n;
      RequestRefresh(false);
      if (job->redirects == 1) {
        Route(std::move(job));  // the map was stale: go where the slot is now
        return Redirected::kTaken;
      }
      // Redirected again: the nodes disagree about the slot for a moment (a
      // resharding tool sets its new owner on one node at a time; a failover's
      // config is still spreading) and MOVED may bounce between two of them.
      // Going straight back would spend max_redirects in microseconds; wait a
      // backoff instead, as for TRYAGAIN, while the topology is read again.
      const auto backoff = Backoff(*job);
      if (now + backoff >= job->deadline) return Redirected::kNone;
      tryagain_.fetch_add(1, std::memory_order_relaxed);
      Park(std::move(job), now + backoff);
      return Redirected::kTaken;
    }
    if (ask) {
      ask_.fetch_add(1, std::memory_order_relaxed);
      NodeClient* n = Node(endpoint);
      if (n == nullptr) {
        *failed = Status(StatusCode::kServer, "redis cluster: bad ASK target " + endpoint);
        return Redirected::kFailed;
      }
      job->asking = true;
      job->declare_keys = true;  // a plain command ignores it
      n->Submit(std::move(job));
      return Redirected::kTaken;
    }
    tryagain_.fetch_add(1, std::memory_order_relaxed);
    const auto backoff = Backoff(*job);
    if (!error.starts_with("TRYAGAIN")) RequestRefresh(false);
    if (now + backoff >= job->deadline) return Redirected::kNone;
    Park(std::move(job), now + backoff);
    return Redirected::kTaken;
  }

  // A plain command's outcome: MOVED updates the map and goes again, ASK goes
  // once to the target with ASKING, TRYAGAIN-like errors back off (all bounded
  // by max_redirects and the deadline); any other reply is the caller's.
  void HandleCommand(NodeJobPtr& job, const JobResult& r,
                     const std::function<void(Result<RedisReply>)>& done) {
    const auto now = redis::IoNow(options_.node);
    if (!r.status.ok()) {
      if (!RetryUnsent(job, r, now)) done(r.status);
      return;
    }
    if (r.reply == nullptr) {
      done(Status(StatusCode::kServer, "redis cluster: command without a reply"));
      return;
    }
    if (r.reply->type == REDIS_REPLY_ERROR) {
      Status failed;
      switch (Redirect(job, std::string_view(r.reply->str, r.reply->len), now, &failed)) {
        case Redirected::kTaken:
          return;
        case Redirected::kFailed:
          done(failed);
          return;
        case Redirected::kNone:
          break;  // the error reply is the caller's, as a value
      }
    }
    done(redis::ToRedisReply(r.reply));
  }

  // ---- batches spanning nodes: dry run everywhere, then charge node by node ----

  struct Cross {
    std::vector<std::vector<size_t>> parts;  // item indices per node
    std::vector<NodeJobPtr> jobs;            // the charging jobs, one per part
    NodeJobPtr all;                          // the whole batch (keys and items, for refunds)
    // Per part: the batch item of each kWindowIndex item appended to its
    // charging job; per batch item: the window its charge went into (-1: none).
    std::vector<std::vector<size_t>> indexed;
    std::vector<int64_t> window_of;
    BatchDecision out;
    Store::Callback done;
    bool counted = false;  // `done` counts the decision itself (a rerouted batch)
    int pending = 0;
    Status error;
  };

  NodeJobPtr PartJob(const NodeJob& all, const std::vector<size_t>& idx, bool dry) {
    auto j = std::make_unique<NodeJob>();
    for (size_t i : idx) {
      j->keys.push_back(all.keys[i]);
      j->items.push_back(all.items[i]);
      j->limits.push_back(all.limits[i]);
    }
    j->dry_run = dry;
    j->deadline = all.deadline;
    return j;
  }

  void CrossNode(NodeJobPtr job, Store::Callback done, bool counted = false) {
    cross_.fetch_add(1, std::memory_order_relaxed);
    auto c = std::make_shared<Cross>();
    c->done = std::move(done);
    c->counted = counted;
    c->out.decisions.resize(job->keys.size());
    std::map<NodeClient*, size_t> part_of;
    for (size_t i = 0; i < job->keys.size(); ++i) {
      NodeClient* n = slot_node_[static_cast<size_t>(redis::KeySlot(job->keys[i]))];
      auto [it, fresh] = part_of.emplace(n, c->parts.size());
      if (fresh) c->parts.emplace_back();
      c->parts[it->second].push_back(i);
    }
    c->pending = static_cast<int>(c->parts.size());
    c->all = std::move(job);
    c->indexed.resize(c->parts.size());
    c->window_of.assign(c->all->keys.size(), -1);
    for (size_t p = 0; p < c->parts.size(); ++p) {
      c->jobs.push_back(PartJob(*c->all, c->parts[p], /*dry=*/false));
      // Each charged window item reports the window it went into (an item
      // after it on its key, in the same group), so a refund can find it.
      NodeJob& charge = *c->jobs.back();
      for (size_t i : c->parts[p]) {
        const redis::ScriptItem& it = c->all->items[i];
        if (it.increment <= 0 || (it.kind != redis::ItemKind::kFixedWindow &&
                                  it.kind != redis::ItemKind::kSlidingWindow)) {
          continue;
        }
        charge.keys.push_back(c->all->keys[i]);
        charge.items.push_back(redis::ScriptItem{redis::ItemKind::kWindowIndex, 0, 0, 0});
        charge.limits.push_back(c->all->limits[i]);
        c->indexed[p].push_back(i);
      }
      NodeJobPtr dry = PartJob(*c->all, c->parts[p], /*dry=*/true);
      Attach(*dry, [this, c, p](Result<BatchDecision> r) { OnDryRun(c, p, std::move(r)); });
      Route(std::move(dry));
    }
  }

  void Merge(Cross& c, size_t p, const BatchDecision& part) {
    for (size_t k = 0; k < c.parts[p].size(); ++k) {
      const size_t i = c.parts[p][k];
      c.out.decisions[i] = part.decisions[k];
      if (!part.allowed && part.denied_index == static_cast<int>(k) &&
          (c.out.denied_index < 0 || static_cast<int>(i) < c.out.denied_index)) {
        c.out.denied_index = static_cast<int>(i);
      }
    }
  }

  void OnDryRun(const std::shared_ptr<Cross>& c, size_t p, Result<BatchDecision> r) {
    if (!r.ok()) {
      if (c->error.ok()) c->error = r.status();
    } else {
      Merge(*c, p, *r);
    }
    if (--c->pending > 0) return;
    if (!c->error.ok()) {
      c->done(c->error);
      return;
    }
    if (c->out.denied_index >= 0) {
      ReportLikeOneBatch(c->out);
      c->out.allowed = false;
      c->done(std::move(c->out));
      return;
    }
    ChargePart(c, 0);
  }

  // The parts were decided apart; report what one all-or-nothing batch (and
  // LocalStore) reports. An item denied alone stops the batch before items
  // are tried together: then items that failed only together with others of
  // their part (denied with retry_after 0, state uncharged) would fit alone.
  // Otherwise the batch stops at the first such item in batch order (parts
  // share no key, so each part's first failure is where a single pass in
  // batch order would fail); later ones would not have been tried.
  static void ReportLikeOneBatch(BatchDecision& out) {
    int alone = -1, together = -1;
    for (size_t i = 0; i < out.decisions.size(); ++i) {
      const Decision& d = out.decisions[i];
      if (d.allowed) continue;
      const bool failed_together = d.retry_after.count() == 0;
      int& first = failed_together ? together : alone;
      if (first < 0) first = static_cast<int>(i);
    }
    out.denied_index = alone >= 0 ? alone : together;
    for (size_t i = 0; i < out.decisions.size(); ++i) {
      Decision& d = out.decisions[i];
      if (!d.allowed && d.retry_after.count() == 0 && static_cast<int>(i) != out.denied_index) {
        d.allowed = true;
      }
    }
  }

  void ChargePart(const std::shared_ptr<Cross>& c, size_t p) {
    if (p == c->parts.size()) {
      c->out.allowed = true;
      c->out.denied_index = -1;
      if (!c->counted) decisions_.fetch_add(1, std::memory_order_relaxed);
      c->done(std::move(c->out));
      return;
    }
    if (options_.before_cross_charge_for_testing) options_.before_cross_charge_for_testing(p);
    NodeJobPtr j = std::move(c->jobs[p]);
    Attach(*j, [this, c, p](Result<BatchDecision> r) {
      if (!r.ok()) {  // part p charged or not (unknown): give back the parts before it
        RefundParts(*c, p, [c, st = r.status()] { c->done(st); });
        return;
      }
      if (r->allowed) {  // charged: note the windows its window items went into
        const size_t n = c->parts[p].size();
        for (size_t k = 0; k < c->indexed[p].size() && n + k < r->decisions.size(); ++k) {
          c->window_of[c->indexed[p][k]] = r->decisions[n + k].reset_after.count();
        }
      }
      Merge(*c, p, *r);
      if (!r->allowed) {  // lost a race after the dry run: give back parts 0..p-1
        c->out.allowed = false;
        RefundParts(*c, p, [c] { c->done(std::move(c->out)); });
        return;
      }
      ChargePart(c, p + 1);
    });
    Route(std::move(j));
  }

  // Gives back the charges of parts [0, end), which were charged (kRefundScript).
  // Token and leaky bucket charges: TAT -= increment. Window charges: taken
  // from the window the charge reported (kWindowIndex) while the key is still
  // in it, like LocalStore's Refund; once the window moved on the refund is
  // dropped (an under-grant, never an over-grant). One call per
  // current owner, sent once and never retried (a repeated refund would
  // grant tokens nobody paid for); a refund that fails is an under-grant.
  // `then` runs once every refund call has answered (or failed), so the
  // caller's next request already sees the tokens given back.
  void RefundParts(const Cross& c, size_t end, std::function<void()> then) {
    struct Refunds {
      std::vector<std::pair<std::string, int64_t>> buckets;  // key, increment
      std::vector<size_t> windows;                           // batch items
    };
    std::map<NodeClient*, Refunds> by_node;
    for (size_t q = 0; q < end; ++q) {
      const NodeJob& all = *c.all;
      for (size_t i : c.parts[q]) {
        const redis::ScriptItem& it = all.items[i];
        if (it.increment <= 0) continue;
        const bool bucket =
            it.kind == redis::ItemKind::kGcra || it.kind == redis::ItemKind::kShaper;
        if (!bucket && c.window_of[i] < 0) continue;
        NodeClient* n = slot_node_[static_cast<size_t>(redis::KeySlot(all.keys[i]))];
        if (n == nullptr) continue;
        if (bucket) {
          by_node[n].buckets.emplace_back(all.keys[i], it.increment);
        } else {
          by_node[n].windows.push_back(i);
        }
      }
    }
    if (by_node.empty()) {
      then();
      return;
    }
    auto left =
        std::make_shared<std::pair<size_t, std::function<void()>>>(by_node.size(), std::move(then));
    for (auto& [node, refunds] : by_node) {
      const auto& items = refunds.buckets;
      auto job = std::make_unique<NodeJob>();
      job->argv.reserve(6 + 2 * items.size() + 4 * refunds.windows.size());
      job->argv = {"EVAL", std::string(kRefundScript), "0"};
      job->argv.push_back(options_.node.use_client_clock
                              ? std::to_string(options_.node.clock->WallNow())
                              : std::string());
      job->argv.push_back(std::to_string(items.size()));
      for (const auto& kv : items) job->argv.push_back(kv.first);
      for (const auto& kv : items) job->argv.push_back(std::to_string(kv.second));
      job->argv.push_back(std::to_string(refunds.windows.size()));
      for (size_t i : refunds.windows) {
        const redis::ScriptItem& it = c.all->items[i];
        job->argv.push_back(c.all->keys[i]);
        // The stored value: the index, then 7 or 13 digits of count (fixed) or
        // two sets of 7 (sliding: previous, current; the current is refunded).
        job->argv.push_back(it.kind == redis::ItemKind::kFixedWindow
                                ? (it.burst > redis::kMaxNarrowWindowCount ? "13" : "7")
                                : "14");
        job->argv.push_back(std::to_string(c.window_of[i]));
        job->argv.push_back(std::to_string(it.increment));
      }
      job->deadline = redis::IoNow(options_.node) + options_.node.call_timeout;
      job->done = [this, left](NodeJobPtr&, const JobResult& r) {
        if (!r.status.ok() || r.reply == nullptr || r.reply->type == REDIS_REPLY_ERROR) {
          errors_.fetch_add(1, std::memory_order_relaxed);
        }
        if (--left->first == 0) left->second();
      };
      refunds_.fetch_add(1, std::memory_order_relaxed);
      node->Submit(std::move(job));
    }
  }

  // ---- topology ----

  void RequestRefresh(bool force) {
    if (stopping_) return;
    const auto now = redis::IoNow(options_.node);
    if (refresh_inflight_) return;
    if (!force && now - last_refresh_ < options_.refresh_interval) {
      refresh_wanted_ = true;  // Tick() runs it when the interval has passed
      return;
    }
    refresh_wanted_ = false;
    refresh_inflight_ = true;
    last_refresh_ = now;
    refreshes_.fetch_add(1, std::memory_order_relaxed);
    if (candidates_.empty()) {
      refresh_inflight_ = false;
      return;
    }
    const std::string endpoint = candidates_[next_candidate_++ % candidates_.size()];
    NodeClient* n = Node(endpoint);
    if (n == nullptr) {
      refresh_inflight_ = false;
      refresh_wanted_ = true;
      return;
    }
    auto job = std::make_unique<NodeJob>();
    job->argv = use_slots_ ? std::vector<std::string>{"CLUSTER", "SLOTS"}
                           : std::vector<std::string>{"CLUSTER", "SHARDS"};
    job->deadline = now + options_.node.call_timeout;
    job->done = [this, host = n->options().host](NodeJobPtr&, const JobResult& r) {
      OnTopologyReply(r, host);
    };
    n->Submit(std::move(job));
  }

  void OnTopologyReply(const JobResult& r, const std::string& asked_host) {
    refresh_inflight_ = false;
    if (stopping_) return;
    if (!r.status.ok() || r.reply == nullptr) {
      refresh_wanted_ = true;  // try the next candidate after the interval
      return;
    }
    if (r.reply->type == REDIS_REPLY_ERROR) {
      std::string_view text(r.reply->str, r.reply->len);
      if (!use_slots_ && (text.find("unknown subcommand") != std::string_view::npos ||
                          text.find("Unknown subcommand") != std::string_view::npos)) {
        use_slots_ = true;
        RequestRefresh(true);
        return;
      }
      refresh_wanted_ = true;
      return;
    }
    auto map = use_slots_ ? redis::ParseClusterSlots(r.reply, asked_host)
                          : redis::ParseClusterShards(r.reply, asked_host, tls_ != nullptr);
    if (!map.ok() || map->covered() == 0) {
      refresh_wanted_ = true;
      return;
    }
    // Masters first among topology candidates, then replicas, then the seeds.
    std::vector<std::string> cands = map->masters;
    for (const auto& reps : map->replicas) cands.insert(cands.end(), reps.begin(), reps.end());
    for (const auto& s : options_.seeds) {
      if (std::find(cands.begin(), cands.end(), s) == cands.end()) cands.push_back(s);
    }
    candidates_ = std::move(cands);
    std::vector<NodeClient*> masters;
    for (const auto& m : map->masters) masters.push_back(Node(m));
    for (size_t s = 0; s < redis::kClusterSlots; ++s) {
      const int16_t o = map->owner[s];
      slot_node_[s] = o >= 0 ? masters[static_cast<size_t>(o)] : nullptr;
    }
    masters_.store(map->masters.size());
    master_nodes_ = std::move(masters);
    RetireStaleNodes();
    slots_covered_ = map->covered();
    have_map_ = true;
    auto waiting = std::move(predispatch_);
    predispatch_.clear();
    for (auto& p : waiting) Dispatch(std::move(p.first), std::move(p.second));
    RouteParked(redis::IoNow(options_.node), /*due_only=*/false);
  }

  // Closes the clients of nodes the topology no longer names (neither master,
  // replica nor seed: a node removed from the cluster, or a redirection's
  // target that is gone), after slot_node_ and master_nodes_ stopped pointing
  // at them. Calls written to them fail with kConnection (they may have run);
  // unsent ones fail unsent and are routed again (see Handle()); the clients are
  // destroyed by Tick() once their connections' pending operations are gone.
  void RetireStaleNodes() {
    std::vector<std::unique_ptr<NodeClient>> stale;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (std::find(candidates_.begin(), candidates_.end(), it->first) != candidates_.end()) {
        ++it;
        continue;
      }
      stale.push_back(std::move(it->second));
      it = nodes_.erase(it);
    }
    for (auto& node : stale) {
      node->Close(ConnectionError("redis " + node->endpoint() + ": left the cluster topology"));
      retired_nodes_.fetch_add(1, std::memory_order_relaxed);
      retired_.push_back(std::move(node));
    }
  }

  void ExpirePredispatch(SteadyTime now) {
    if (predispatch_.empty()) return;
    std::vector<std::pair<NodeJobPtr, Store::Callback>> keep, expired;
    for (auto& p : predispatch_) {
      (p.first->deadline <= now ? expired : keep).push_back(std::move(p));
    }
    predispatch_ = std::move(keep);
    for (auto& p : expired) {
      timeouts_.fetch_add(1, std::memory_order_relaxed);
      p.second(TimeoutError("redis cluster: no topology within " +
                            std::to_string(options_.node.call_timeout.count()) +
                            "ms (seeds unreachable?)"));
    }
  }

  void RouteParked(SteadyTime now, bool due_only) {
    if (parked_.empty()) return;
    std::vector<Parked> keep, go;
    for (auto& p : parked_) {
      if (p.job->deadline <= now) {
        go.push_back(std::move(p));  // expired: answered below
      } else if (!due_only || p.retry_at <= now) {
        go.push_back(std::move(p));
      } else {
        keep.push_back(std::move(p));
      }
    }
    parked_ = std::move(keep);
    for (auto& p : go) {
      if (p.job->deadline <= now) {
        timeouts_.fetch_add(1, std::memory_order_relaxed);
        Finish(p.job, TimeoutError("redis cluster: no node could take the call within " +
                                   std::to_string(options_.node.call_timeout.count()) + "ms"));
      } else {
        Route(std::move(p.job));
      }
    }
  }

  void Tick() {
    if (stopping_) return;
    const auto now = redis::IoNow(options_.node);
    for (auto& [ep, node] : nodes_) node->Tick(now);
    std::erase_if(retired_, [](const std::unique_ptr<NodeClient>& n) { return n->Released(); });
    RouteParked(now, /*due_only=*/true);
    ExpirePredispatch(now);
    if ((refresh_wanted_ && now - last_refresh_ >= options_.refresh_interval) ||
        now - last_refresh_ >= options_.periodic_refresh) {
      RequestRefresh(true);
    }
    bool healthy = have_map_ && slots_covered_ == redis::kClusterSlots;
    for (NodeClient* m : master_nodes_) healthy = healthy && m != nullptr && m->Healthy();
    healthy_.store(healthy, std::memory_order_relaxed);
    ticker_.expires_after(std::chrono::milliseconds(5));
    ticker_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Tick();
    });
  }

  const RedisClusterOptions options_;
  const redis::TlsContextPtr tls_;  // null without TLS; shared by every node's connections
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer ticker_;
  std::thread thread_;
  redis::NodeStats node_stats_;
  // I/O thread only. A node the topology drops moves to retired_, closed, and
  // is destroyed once its connections have no completion queued (Tick()).
  std::map<std::string, std::unique_ptr<NodeClient>> nodes_;
  std::vector<std::unique_ptr<NodeClient>> retired_;
  std::array<NodeClient*, redis::kClusterSlots> slot_node_;
  std::vector<NodeClient*> master_nodes_;
  int slots_covered_ = 0;
  bool have_map_ = false;
  bool use_slots_ = false;
  bool refresh_inflight_ = false;
  bool refresh_wanted_ = false;
  SteadyTime last_refresh_{};
  std::vector<std::string> candidates_;
  size_t next_candidate_ = 0;
  std::vector<Parked> parked_;
  std::vector<std::pair<NodeJobPtr, Store::Callback>> predispatch_;
  bool stopping_ = false;

  std::atomic<bool> closed_{false};
  std::atomic<bool> healthy_{false};
  std::atomic<size_t> masters_{0};
  std::atomic<uint64_t> decisions_{0}, moved_{0}, ask_{0}, tryagain_{0}, refreshes_{0},
      retried_unsent_{0}, cross_{0}, refunds_{0}, timeouts_{0}, errors_{0},
      undeclared_fallbacks_{0}, retired_nodes_{0};
};

Result<RedisClusterOptions> ParseRedisClusterUrl(std::string_view url) {
  const bool tls = url.starts_with("rediss-cluster://");
  if (!tls && !url.starts_with("redis-cluster://")) {
    return InvalidArgument(
        "redis cluster url: must start with redis-cluster:// or rediss-cluster:// (got '" +
        base::RedactUrl(url, 100) + "')");
  }
  std::string_view rest = url.substr(tls ? 17 : 16);
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q);
    rest = rest.substr(0, q);
  }
  std::string userinfo;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at + 1));
    rest = rest.substr(at + 1);
  }
  RedisClusterOptions o;
  bool first = true;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view hp = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    // Reuse the redis:// parser for host, port, credentials and options.
    auto parsed = ParseRedisUrl((tls ? "rediss://" : "redis://") + userinfo + std::string(hp) +
                                (first ? std::string(query) : std::string()));
    if (!parsed.ok()) return parsed.status();
    if (parsed->db != 0) return InvalidArgument("redis cluster url: clusters have only db 0");
    if (first) o.node = *parsed;
    first = false;
    const bool v6 = parsed->host.find(':') != std::string::npos;
    o.seeds.push_back((v6 ? "[" + parsed->host + "]" : parsed->host) + ":" +
                      std::to_string(parsed->port));
  }
  if (o.seeds.empty()) return InvalidArgument("redis cluster url: no host:port given");
  return o;
}

Result<std::unique_ptr<RedisClusterStore>> RedisClusterStore::Create(
    const RedisClusterOptions& options) {
  if (options.seeds.empty()) return InvalidArgument("redis cluster: at least one seed node");
  if (options.node.db != 0) return InvalidArgument("redis cluster: db must be 0");
  if (options.max_redirects < 1 || options.max_redirects > 100) {
    return InvalidArgument("redis cluster: max_redirects must be 1..100");
  }
  if (options.node.connections < 1 || options.node.connections > 64 || options.node.max_batch < 1 ||
      options.node.max_batch > 4096 || options.node.max_inflight_per_connection < 1 ||
      options.node.max_queue < 1) {
    return InvalidArgument("redis cluster: bad pool/batch options");
  }
  if (options.node.call_timeout.count() < 1 || options.node.connect_timeout.count() < 1) {
    return InvalidArgument("redis cluster: timeouts must be at least 1ms");
  }
  if (options.node.key_prefix.size() > 64 ||
      options.node.key_prefix.find_first_of("{}") != std::string::npos) {
    return InvalidArgument("redis cluster: key_prefix must be <= 64 bytes without '{' or '}'");
  }
  if (options.node.clock == nullptr) return InvalidArgument("redis cluster: clock is null");
  if (options.node.io_clock == nullptr) return InvalidArgument("redis cluster: io_clock is null");
  for (const auto& s : options.seeds) {
    std::string host;
    int port = 0;
    if (!SplitEndpoint(s, &host, &port)) {
      return InvalidArgument("redis cluster: bad seed '" + s + "' (want host:port)");
    }
  }
  auto tls = redis::MakeTlsContext(options.node);  // one context for every node
  if (!tls.ok()) return tls.status();
  auto impl = std::make_unique<Impl>(options, std::move(tls).value());
  impl->Start();
  return std::unique_ptr<RedisClusterStore>(new RedisClusterStore(std::move(impl)));
}

RedisClusterStore::RedisClusterStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisClusterStore::~RedisClusterStore() = default;

void RedisClusterStore::AcquireAsync(std::span<const AcquireItem> items, Callback done) {
  impl_->AcquireAsync(items, std::move(done));
}

Result<BatchDecision> RedisClusterStore::Acquire(std::span<const AcquireItem> items) {
  return base::CallSync<Result<BatchDecision>>(
      [&](auto done) { impl_->AcquireAsync(items, std::move(done)); });
}

bool RedisClusterStore::Healthy() const { return impl_->Healthy(); }

void RedisClusterStore::CommandAsync(std::string_view key, std::vector<std::string> argv,
                                     std::function<void(Result<RedisReply>)> done) {
  impl_->CommandAsync(std::string(key), std::move(argv), std::move(done));
}

Result<RedisReply> RedisClusterStore::Command(std::string_view key, std::vector<std::string> argv) {
  return base::CallSync<Result<RedisReply>>(
      [&](auto done) { impl_->CommandAsync(std::string(key), std::move(argv), std::move(done)); });
}

void RedisClusterStore::AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                                          LeaseCallback done) {
  const std::string redis_key = RedisKeyFor(key) + std::string(redis::kLeaseKeySuffix);
  redis::AcquireLease(
      [this, redis_key](std::vector<std::string> argv, std::function<void(Result<RedisReply>)> cb) {
        impl_->CommandAsync(redis_key, std::move(argv), std::move(cb));
      },
      redis_key, limit, impl_->node_options(), std::move(done));
}

void RedisClusterStore::ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                                          ReleaseCallback done) {
  const std::string redis_key = RedisKeyFor(key) + std::string(redis::kLeaseKeySuffix);
  redis::ReleaseLease(
      [this, redis_key](std::vector<std::string> argv, std::function<void(Result<RedisReply>)> cb) {
        impl_->CommandAsync(redis_key, std::move(argv), std::move(cb));
      },
      redis_key, lease_id, impl_->node_options(), std::move(done));
}

Result<LeaseDecision> RedisClusterStore::AcquireLease(std::string_view key,
                                                      const LeaseLimit& limit) {
  return base::CallSync<Result<LeaseDecision>>(
      [&](auto done) { AcquireLeaseAsync(key, limit, std::move(done)); });
}

Result<bool> RedisClusterStore::ReleaseLease(std::string_view key, std::string_view lease_id) {
  return base::CallSync<Result<bool>>(
      [&](auto done) { ReleaseLeaseAsync(key, lease_id, std::move(done)); });
}

Status RedisClusterStore::ResetKey(std::string_view key, const Limit& limit) {
  if (Status st = redis::CheckScriptLimit(limit); !st.ok()) return st;
  const std::string state_key = RedisKeyFor(key) + redis::StateKeySuffix(limit);
  return redis::CheckResetReply(Command(state_key, redis::ResetCommand(state_key)));
}

Result<Decision> RedisClusterStore::SetRemaining(std::string_view key, const Limit& limit,
                                                 int64_t remaining) {
  if (Status st = CheckRemaining(limit, remaining); !st.ok()) return st;
  if (Status st = redis::CheckScriptLimit(limit); !st.ok()) return st;
  const std::string state_key = RedisKeyFor(key) + redis::StateKeySuffix(limit);
  const int64_t cost = limit.burst() - remaining;
  return redis::DecodeOverwriteReply(
      Command(state_key, redis::OverwriteCommand(state_key, limit, cost, impl_->node_options())),
      limit, cost);
}

void RedisClusterStore::SettleAsync(std::span<const SettleItem> items, SettleCallback done) {
  const RedisClusterOptions& o = impl_->options();
  redis::SettleEachAsync(
      items,
      [this](std::string_view key, const Limit& limit) {
        return impl_->KeyFor(key) + redis::StateKeySuffix(limit);
      },
      o.node.use_client_clock ? std::to_string(o.node.clock->WallNow()) : std::string(),
      [this](std::string redis_key, std::vector<std::string> argv,
             std::function<void(Result<RedisReply>)> reply) {
        impl_->CommandAsync(std::move(redis_key), std::move(argv), std::move(reply));
      },
      std::move(done));
}

Result<std::vector<Settled>> RedisClusterStore::Settle(std::span<const SettleItem> items) {
  return base::CallSync<Result<std::vector<Settled>>>(
      [&](auto done) { SettleAsync(items, std::move(done)); });
}

std::string RedisClusterStore::RedisKeyFor(std::string_view key) const {
  return impl_->KeyFor(key);
}

int RedisClusterStore::SlotOf(std::string_view redis_key) { return redis::KeySlot(redis_key); }

RedisClusterStats RedisClusterStore::Stats() const { return impl_->Stats(); }

}  // namespace tollgate
