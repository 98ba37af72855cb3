#include "tollgate/redis_store.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "base/one_shot.h"
#include "redis/connection.h"
#include "redis/deny_cache.h"
#include "redis/gcra_script.h"
#include "redis/key_admin.h"
#include "redis/lease_script.h"
#include "redis/node_client.h"
#include "redis/redis_keys.h"
#include "redis/sentinel.h"
#include "redis/settle_script.h"

namespace tollgate {

namespace asio = boost::asio;
using redis::NodeClient;
using redis::NodeJob;
using redis::NodeJobPtr;
using redis::SteadyTime;

class RedisStore::Impl {
 public:
  Impl(const RedisOptions& options, redis::TlsContextPtr tls)
      : options_(options),
        work_(asio::make_work_guard(io_)),
        ticker_(io_),
        tls_(std::move(tls)),
        deny_cache_(options.deny_cache_entries) {
    if (options.sentinels.empty()) {
      node_ = std::make_shared<NodeClient>(io_, options, redis::GcraScript(), &stats_,
                                           /*cluster=*/false, tls_);
    } else {
      no_master_ = ConnectionError("redis sentinel: master '" + options.sentinel_master +
                                   "' not discovered yet");
      sentinel_ = std::make_unique<redis::SentinelWatcher>(
          io_, options, tls_,
          [this](const std::optional<redis::MasterAddress>& master, const Status& why) {
            OnMaster(master, why);
          });
    }
  }

  ~Impl() { Shutdown(); }

  void Start() {
    thread_ = std::thread([this] { io_.run(); });
    asio::post(io_, [this] {
      if (node_) node_->Start();
      if (sentinel_) sentinel_->Start();
      Tick();
    });
  }

  void Shutdown() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      stopping_ = true;
      ticker_.cancel();
      if (sentinel_) {
        sentinel_->Close();
        ExpireFirstWaiting(SteadyTime::max(), /*all=*/true,
                           UnavailableError("redis store is shutting down"));
      }
      if (node_) node_->Close(UnavailableError("redis store is shutting down"));
      io_.stop();
    });
    work_.reset();
    thread_.join();
    // Late arrivals.
    const Status down = UnavailableError("redis store is shutting down");
    if (auto node = CurrentNode()) node->Close(down);
    if (sentinel_) {
      {
        std::lock_guard<std::mutex> lock(node_mu_);
        first_round_done_ = true;
        if (!node_) no_master_ = down;
      }
      ExpireFirstWaiting(SteadyTime::max(), /*all=*/true, down);
    }
  }

  void AcquireAsync(std::span<const AcquireItem> items, Store::Callback done) {
    if (items.empty()) {
      done(BatchDecision{true, true, -1, {}});
      return;
    }
    if (items.size() >= redis::kMaxItemsPerCall) {
      done(InvalidArgument("items: at most " + std::to_string(redis::kMaxItemsPerCall - 1) +
                           " per batch on redis"));
      return;
    }
    auto job = std::make_unique<NodeJob>();
    job->keys.reserve(items.size());
    job->limits.reserve(items.size());
    job->items.reserve(items.size());
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
      job->keys.push_back(redis::RedisKey(options_.key_prefix, it.key) +
                          redis::StateKeySuffix(*it.limit));
      job->limits.push_back(*it.limit);
      job->items.push_back(redis::MakeScriptItem(*it.limit, it.cost));
    }
    std::string cache_entry;
    if (options_.deny_cache && items.size() == 1) {
      cache_entry = redis::DenyCache::EntryKey(job->keys[0], *items[0].limit, items[0].cost);
      if (auto d = deny_cache_.Lookup(cache_entry, options_.clock->Now())) {
        deny_cache_hits_.fetch_add(1, std::memory_order_relaxed);
        BatchDecision out;
        out.allowed = false;
        out.denied_index = 0;
        out.decisions.push_back(*d);
        done(std::move(out));
        return;
      }
    }
    job->deadline = redis::IoNow(options_) + options_.call_timeout;
    job->caller_done = std::move(done);
    job->cache_entry = std::move(cache_entry);
    job->done = [this](NodeJobPtr& j, const redis::JobResult& r) {
      // Moved out first: the callback may outlive the job.
      Store::Callback done = std::move(j->caller_done);
      if (!r.status.ok()) {
        done(r.status);
        return;
      }
      if (!r.error.empty()) {
        stats_.errors.fetch_add(1, std::memory_order_relaxed);
        SuspectOnError(r.error);
        done(redis::ErrorReplyStatus(Endpoint(), r.error));
        return;
      }
      BatchDecision out = redis::DecodeJob(*j, r.triples);
      decisions_.fetch_add(1, std::memory_order_relaxed);
      if (!j->cache_entry.empty() && !out.allowed) {
        deny_cache_.Insert(j->cache_entry, out.decisions[0], j->sent_ns);
      }
      done(std::move(out));
    };
    Submit(std::move(job));
  }

  void CommandAsync(std::vector<std::string> argv, std::function<void(Result<RedisReply>)> done) {
    if (argv.empty()) {
      done(InvalidArgument("command: empty argv"));
      return;
    }
    auto job = std::make_unique<NodeJob>();
    job->argv = std::move(argv);
    job->deadline = redis::IoNow(options_) + options_.call_timeout;
    job->done = [this, done = std::move(done)](NodeJobPtr&, const redis::JobResult& r) {
      if (!r.status.ok()) {
        done(r.status);
      } else {
        if (r.reply != nullptr && r.reply->type == REDIS_REPLY_ERROR) {
          SuspectOnError(std::string_view(r.reply->str, r.reply->len));
        }
        done(redis::ToRedisReply(r.reply));
      }
    };
    Submit(std::move(job));
  }

  bool Healthy() const {
    auto node = CurrentNode();
    return node != nullptr && node->Healthy();
  }

  // Sentinel mode: the master's address, or "" while none is known.
  std::string MasterEndpoint() const {
    auto node = CurrentNode();
    return node ? node->endpoint() : std::string();
  }

  void ForgetDenials(std::string_view state_key) { deny_cache_.Forget(state_key); }

  RedisStoreStats Stats() const {
    RedisStoreStats s;
    s.decisions = decisions_.load(std::memory_order_relaxed);
    s.script_calls = stats_.script_calls.load(std::memory_order_relaxed);
    s.noscript_reloads = stats_.noscript_reloads.load(std::memory_order_relaxed);
    s.connects = stats_.connects.load(std::memory_order_relaxed);
    s.timeouts = stats_.timeouts.load(std::memory_order_relaxed);
    s.errors = stats_.errors.load(std::memory_order_relaxed);
    s.deny_cache_hits = deny_cache_hits_.load(std::memory_order_relaxed);
    s.master_changes = master_changes_.load(std::memory_order_relaxed);
    return s;
  }

  const RedisOptions options_;

 private:
  // The node decisions go to: fixed without sentinels (set before the I/O
  // thread starts, so read without the lock), else the current master's.
  std::shared_ptr<NodeClient> CurrentNode() const {
    if (!sentinel_) return node_;
    std::lock_guard<std::mutex> lock(node_mu_);
    return node_;
  }

  void Submit(NodeJobPtr job) {
    if (!sentinel_) {
      node_->Submit(std::move(job));
      return;
    }
    std::shared_ptr<NodeClient> node;
    Status why;
    {
      std::lock_guard<std::mutex> lock(node_mu_);
      node = node_;
      if (!node && !first_round_done_) {
        // The first discovery is under way: wait for it, as a plain store
        // waits for its first connection (up to the call's deadline).
        first_waiting_.push_back(std::move(job));
        return;
      }
      if (!node) why = no_master_;
    }
    if (node) {
      node->Submit(std::move(job));
      return;
    }
    FailNoMaster(job, why);
  }

  // No master known: an outage, like a Redis that cannot be reached.
  void FailNoMaster(NodeJobPtr& job, const Status& why) {
    stats_.errors.fetch_add(1, std::memory_order_relaxed);
    redis::JobResult r;
    r.status = why.ok() ? ConnectionError("redis sentinel: no master known") : why;
    r.sent = false;
    auto& done = job->done;
    done(job, r);
  }

  // I/O thread: calls waiting for the first discovery, past their deadline
  // (all of them with `all`, when the round ended without a master).
  void ExpireFirstWaiting(SteadyTime now, bool all, const Status& why) {
    std::deque<NodeJobPtr> expired;
    {
      std::lock_guard<std::mutex> lock(node_mu_);
      while (!first_waiting_.empty() && (all || first_waiting_.front()->deadline < now)) {
        expired.push_back(std::move(first_waiting_.front()));
        first_waiting_.pop_front();
      }
    }
    for (auto& j : expired) FailNoMaster(j, why);
  }

  // I/O thread: the endpoint for an error reply's message.
  std::string Endpoint() const { return node_ ? node_->endpoint() : "redis sentinel"; }

  // I/O thread: a master that answers READONLY has become a replica.
  void SuspectOnError(std::string_view error) {
    if (sentinel_ && error.starts_with("READONLY")) sentinel_->Suspect();
  }

  // I/O thread: the outcome of a discovery round.
  void OnMaster(const std::optional<redis::MasterAddress>& master, const Status& why) {
    if (stopping_) return;
    if (!master && !node_) {  // still none
      std::lock_guard<std::mutex> lock(node_mu_);
      no_master_ = why;
      first_round_done_ = true;
    }
    if (!master) ExpireFirstWaiting(SteadyTime::max(), /*all=*/true, why);
    if (master && node_ && node_->options().host == master->host &&
        node_->options().port == master->port) {
      return;  // confirmed
    }
    std::shared_ptr<NodeClient> fresh;
    if (master) {
      RedisOptions o = options_;
      o.host = master->host;
      o.port = master->port;
      o.sentinels.clear();
      fresh = std::make_shared<NodeClient>(io_, std::move(o), redis::GcraScript(), &stats_,
                                           /*cluster=*/false, tls_);
      fresh->Start();
    }
    std::shared_ptr<NodeClient> old;
    std::deque<NodeJobPtr> waiting;
    {
      std::lock_guard<std::mutex> lock(node_mu_);
      old = std::exchange(node_, fresh);
      no_master_ = master ? Status::Ok() : why;
      first_round_done_ = true;
      waiting.swap(first_waiting_);
    }
    for (auto& j : waiting) {
      if (fresh) {
        fresh->Submit(std::move(j));
      } else {
        FailNoMaster(j, why);
      }
    }
    if (old) {
      master_changes_.fetch_add(1, std::memory_order_relaxed);
      old->Close(ConnectionError(
          "redis sentinel: master " + old->endpoint() +
          (master ? " replaced by " + master->ToString() : " lost: " + why.message())));
      retired_.push_back(std::move(old));
    }
  }

  void Tick() {
    if (stopping_) return;
    const SteadyTime now = redis::IoNow(options_);
    if (node_) node_->Tick(now);
    if (sentinel_) {
      // Lost connections to the master: ask whether it moved.
      if (!node_ || !node_->Healthy()) sentinel_->Suspect();
      sentinel_->Tick(now);
      ExpireFirstWaiting(now, /*all=*/false,
                         TimeoutError("redis sentinel: no master discovered within " +
                                      std::to_string(options_.call_timeout.count()) + "ms"));
      std::erase_if(retired_, [](const std::shared_ptr<NodeClient>& n) {
        return n.use_count() == 1 && n->Released();
      });
    }
    ticker_.expires_after(std::chrono::milliseconds(5));
    ticker_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Tick();
    });
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer ticker_;
  std::thread thread_;
  redis::NodeStats stats_;
  const redis::TlsContextPtr tls_;
  // Written on the I/O thread only, under node_mu_ (sentinel mode); read
  // under it off the I/O thread.
  mutable std::mutex node_mu_;
  std::shared_ptr<NodeClient> node_;
  Status no_master_;  // why node_ is null (sentinel mode)
  bool first_round_done_ = false;
  std::deque<NodeJobPtr> first_waiting_;  // calls made before the first round ended
  std::unique_ptr<redis::SentinelWatcher> sentinel_;
  std::vector<std::shared_ptr<NodeClient>> retired_;  // I/O thread: closed, awaiting Released()
  bool stopping_ = false;                             // I/O thread only
  redis::DenyCache deny_cache_;
  std::atomic<uint64_t> decisions_{0}, deny_cache_hits_{0}, master_changes_{0};
};

Result<std::unique_ptr<RedisStore>> RedisStore::Create(const RedisOptions& options) {
  if (options.sentinels.empty()) {
    if (options.host.empty()) return InvalidArgument("redis: host must not be empty");
    if (options.port < 1 || options.port > 65535) return InvalidArgument("redis: port 1..65535");
  } else {
    if (options.sentinel_master.empty()) {
      return InvalidArgument("redis: sentinel mode needs sentinel_master");
    }
    for (const auto& s : options.sentinels) {
      const size_t colon = s.rfind(':');
      int port = 0;
      if (colon == std::string::npos || colon == 0 ||
          !redis::ParsePort(std::string_view(s).substr(colon + 1), &port)) {
        return InvalidArgument("redis: bad sentinel '" + redis::Printable(s) +
                               "' (want host:port)");
      }
    }
  }
  if (options.connections < 1 || options.connections > 64) {
    return InvalidArgument("redis: connections must be 1..64");
  }
  if (options.max_inflight_per_connection < 1 || options.max_batch < 1 || options.max_queue < 1) {
    return InvalidArgument("redis: max_inflight_per_connection, max_batch, max_queue must be >= 1");
  }
  if (options.max_batch > 4096) return InvalidArgument("redis: max_batch must be <= 4096");
  if (options.call_timeout.count() < 1 || options.connect_timeout.count() < 1) {
    return InvalidArgument("redis: timeouts must be at least 1ms");
  }
  if (options.key_prefix.size() > 64) return InvalidArgument("redis: key_prefix longer than 64");
  if (options.key_prefix.find_first_of("{}") != std::string::npos) {
    return InvalidArgument("redis: key_prefix must not contain '{' or '}'");
  }
  if (options.clock == nullptr) return InvalidArgument("redis: clock must not be null");
  if (options.io_clock == nullptr) return InvalidArgument("redis: io_clock must not be null");
  auto tls = redis::MakeTlsContext(options);  // files are read once, here
  if (!tls.ok()) return tls.status();
  auto impl = std::make_unique<Impl>(options, std::move(tls).value());
  impl->Start();
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisStore::~RedisStore() = default;

void RedisStore::AcquireAsync(std::span<const AcquireItem> items, Callback done) {
  impl_->AcquireAsync(items, std::move(done));
}

Result<BatchDecision> RedisStore::Acquire(std::span<const AcquireItem> items) {
  return base::CallSync<Result<BatchDecision>>(
      [&](auto done) { impl_->AcquireAsync(items, std::move(done)); });
}

void RedisStore::CommandAsync(std::vector<std::string> argv,
                              std::function<void(Result<RedisReply>)> done) {
  impl_->CommandAsync(std::move(argv), std::move(done));
}

Result<int64_t> IntegerReply(Result<RedisReply> reply) {
  if (!reply.ok()) return reply.status();
  switch (reply->type) {
    case RedisReply::Type::kInteger:
      return reply->integer;
    case RedisReply::Type::kError:
      return Status(StatusCode::kServer, reply->str.substr(0, 200));
    default:
      return Status(StatusCode::kServer, "expected an integer reply");
  }
}

Result<RedisReply> RedisStore::Command(std::vector<std::string> argv) {
  return base::CallSync<Result<RedisReply>>(
      [&](auto done) { impl_->CommandAsync(std::move(argv), std::move(done)); });
}

Status RedisStore::ResetKey(std::string_view key, const Limit& limit) {
  if (Status st = redis::CheckScriptLimit(limit); !st.ok()) return st;
  const std::string state_key = RedisKeyFor(key) + redis::StateKeySuffix(limit);
  Status st = redis::CheckResetReply(Command(redis::ResetCommand(state_key)));
  impl_->ForgetDenials(state_key);
  return st;
}

Result<Decision> RedisStore::SetRemaining(std::string_view key, const Limit& limit,
                                          int64_t remaining) {
  if (Status st = CheckRemaining(limit, remaining); !st.ok()) return st;
  if (Status st = redis::CheckScriptLimit(limit); !st.ok()) return st;
  const std::string state_key = RedisKeyFor(key) + redis::StateKeySuffix(limit);
  const int64_t cost = limit.burst() - remaining;
  Result<Decision> d = redis::DecodeOverwriteReply(
      Command(redis::OverwriteCommand(state_key, limit, cost, impl_->options_)), limit, cost);
  impl_->ForgetDenials(state_key);
  return d;
}

void RedisStore::SettleAsync(std::span<const SettleItem> items, SettleCallback done) {
  const RedisOptions& o = impl_->options_;
  redis::SettleEachAsync(
      items,
      [&o](std::string_view key, const Limit& limit) {
        return redis::RedisKey(o.key_prefix, key) + redis::StateKeySuffix(limit);
      },
      o.use_client_clock ? std::to_string(o.clock->WallNow()) : std::string(),
      [this](std::string, std::vector<std::string> argv,
             std::function<void(Result<RedisReply>)> reply) {
        impl_->CommandAsync(std::move(argv), std::move(reply));
      },
      std::move(done));
}

Result<std::vector<Settled>> RedisStore::Settle(std::span<const SettleItem> items) {
  return base::CallSync<Result<std::vector<Settled>>>(
      [&](auto done) { SettleAsync(items, std::move(done)); });
}

bool RedisStore::Healthy() const { return impl_->Healthy(); }

std::string RedisStore::MasterEndpoint() const { return impl_->MasterEndpoint(); }

void RedisStore::AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                                   LeaseCallback done) {
  redis::AcquireLease(
      [this](std::vector<std::string> argv, std::function<void(Result<RedisReply>)> cb) {
        impl_->CommandAsync(std::move(argv), std::move(cb));
      },
      RedisKeyFor(key) + std::string(redis::kLeaseKeySuffix), limit, impl_->options_,
      std::move(done));
}

void RedisStore::ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                                   ReleaseCallback done) {
  redis::ReleaseLease(
      [this](std::vector<std::string> argv, std::function<void(Result<RedisReply>)> cb) {
        impl_->CommandAsync(std::move(argv), std::move(cb));
      },
      RedisKeyFor(key) + std::string(redis::kLeaseKeySuffix), lease_id, impl_->options_,
      std::move(done));
}

Result<LeaseDecision> RedisStore::AcquireLease(std::string_view key, const LeaseLimit& limit) {
  return base::CallSync<Result<LeaseDecision>>(
      [&](auto done) { AcquireLeaseAsync(key, limit, std::move(done)); });
}

Result<bool> RedisStore::ReleaseLease(std::string_view key, std::string_view lease_id) {
  return base::CallSync<Result<bool>>(
      [&](auto done) { ReleaseLeaseAsync(key, lease_id, std::move(done)); });
}

std::string RedisStore::RedisKeyFor(std::string_view key) const {
  return redis::RedisKey(impl_->options_.key_prefix, key);
}

Status RedisStore::CheckLimit(const Limit& limit) { return redis::CheckScriptLimit(limit); }

RedisStoreStats RedisStore::Stats() const { return impl_->Stats(); }

const RedisOptions& RedisStore::options() const { return impl_->options_; }

}  // namespace tollgate
