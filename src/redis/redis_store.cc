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

#include "redis/connection.h"
#include "redis/deny_cache.h"
#include "redis/gcra_script.h"
#include "redis/redis_keys.h"

namespace tollgate {

namespace asio = boost::asio;
using redis::Connection;
using redis::ReplyPtr;
using redis::ScriptItem;
using redis::SteadyTime;

namespace {

// One caller's batch (or plain command) waiting for, or inside, a script call.
struct Request {
  // Decisions.
  std::vector<std::string> keys;  // Redis keys
  std::vector<Limit> limits;
  std::vector<ScriptItem> items;
  Store::Callback done;
  std::string cache_entry;  // non-empty when the deny cache may learn from the answer
  // Plain command (when cmd_done is set).
  std::vector<std::string> argv;
  std::function<void(Result<RedisReply>)> cmd_done;

  SteadyTime deadline;
  int64_t sent_ns = 0;  // local steady time the call was sent (deny cache)

  void Fail(const Status& s) {
    if (cmd_done) {
      cmd_done(s);
    } else {
      done(s);
    }
  }
};
using RequestPtr = std::unique_ptr<Request>;

Status ErrorReplyStatus(std::string_view text) {
  std::string msg = "redis: " + std::string(text.substr(0, 300));
  if (text.starts_with("ERR Error running script") || text.starts_with("ERR user_script") ||
      text.find("user_script") != std::string_view::npos || text.starts_with("NOSCRIPT")) {
    return Status(StatusCode::kScript, msg);
  }
  return Status(StatusCode::kServer, msg);
}

int64_t SteadyNs(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

class RedisStore::Impl : public Connection::Listener {
 public:
  explicit Impl(const RedisOptions& options)
      : options_(options),
        work_(asio::make_work_guard(io_)),
        ticker_(io_),
        deny_cache_(options.deny_cache_entries) {}

  ~Impl() override { Shutdown(); }

  void Start() {
    for (size_t i = 0; i < options_.connections; ++i) {
      conns_.push_back(std::make_shared<Connection>(io_, options_, redis::GcraScript(), this));
      backoff_.push_back(options_.reconnect_backoff_min);
      retry_at_.push_back(SteadyTime::max());
    }
    thread_ = std::thread([this] { io_.run(); });
    asio::post(io_, [this] {
      for (auto& c : conns_) c->Connect();
      Tick();
    });
  }

  void Shutdown() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      stopping_ = true;
      ticker_.cancel();
      for (auto& c : conns_) c->Fail(UnavailableError("redis store is shutting down"));
      FailQueued(UnavailableError("redis store is shutting down"));
      io_.stop();
    });
    work_.reset();
    thread_.join();
    // Anything enqueued after the I/O thread stopped.
    FailQueued(UnavailableError("redis store is shutting down"));
  }

  // ---- submission (any thread) ----

  void Submit(RequestPtr r) {
    r->deadline = std::chrono::steady_clock::now() + options_.call_timeout;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (closed_ || queue_.size() >= options_.max_queue) {
        lock.unlock();
        r->Fail(UnavailableError(closed_ ? "redis store is shutting down"
                                         : "redis store queue is full (" +
                                               std::to_string(options_.max_queue) + " waiting)"));
        return;
      }
      queue_.push_back(std::move(r));
      if (pump_posted_) return;
      pump_posted_ = true;
    }
    asio::post(io_, [this] { Pump(); });
  }

  void AcquireAsync(std::span<const AcquireItem> items, Store::Callback done) {
    if (items.empty()) {
      done(BatchDecision{true, true, -1, {}});
      return;
    }
    auto r = std::make_unique<Request>();
    r->keys.reserve(items.size());
    r->limits.reserve(items.size());
    r->items.reserve(items.size());
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
      r->keys.push_back(redis::RedisKey(options_.key_prefix, it.key));
      r->limits.push_back(*it.limit);
      r->items.push_back(redis::MakeScriptItem(*it.limit, it.cost));
    }
    if (options_.deny_cache && items.size() == 1) {
      r->cache_entry = redis::DenyCache::EntryKey(r->keys[0], *items[0].limit, items[0].cost);
      if (auto d = deny_cache_.Lookup(r->cache_entry, SteadyNs(std::chrono::steady_clock::now()))) {
        deny_cache_hits_.fetch_add(1, std::memory_order_relaxed);
        BatchDecision out;
        out.allowed = false;
        out.denied_index = 0;
        out.decisions.push_back(*d);
        done(std::move(out));
        return;
      }
    }
    r->done = std::move(done);
    Submit(std::move(r));
  }

  void CommandAsync(std::vector<std::string> argv, std::function<void(Result<RedisReply>)> done) {
    if (argv.empty()) {
      done(InvalidArgument("command: empty argv"));
      return;
    }
    auto r = std::make_unique<Request>();
    r->argv = std::move(argv);
    r->cmd_done = std::move(done);
    Submit(std::move(r));
  }

  bool Healthy() const { return ready_count_.load(std::memory_order_relaxed) > 0; }

  RedisStoreStats Stats() const {
    RedisStoreStats s;
    s.decisions = decisions_.load(std::memory_order_relaxed);
    s.script_calls = script_calls_.load(std::memory_order_relaxed);
    s.noscript_reloads = noscript_.load(std::memory_order_relaxed);
    s.connects = connects_.load(std::memory_order_relaxed);
    s.timeouts = timeouts_.load(std::memory_order_relaxed);
    s.errors = errors_.load(std::memory_order_relaxed);
    s.deny_cache_hits = deny_cache_hits_.load(std::memory_order_relaxed);
    return s;
  }

  const RedisOptions options_;

 private:
  // ---- I/O thread ----

  void OnReady(Connection&) override {
    connects_.fetch_add(1, std::memory_order_relaxed);
    for (size_t i = 0; i < conns_.size(); ++i) {
      if (conns_[i]->ready()) backoff_[i] = options_.reconnect_backoff_min;
    }
    UpdateReady();
    Pump();
  }

  void OnDown(Connection& c, const Status& why) override {
    UpdateReady();
    if (stopping_) return;
    for (size_t i = 0; i < conns_.size(); ++i) {
      if (conns_[i].get() != &c) continue;
      // Exponential backoff with jitter in [backoff/2, backoff].
      const auto b = backoff_[i];
      std::uniform_int_distribution<int64_t> jitter(b.count() / 2, b.count());
      retry_at_[i] = std::chrono::steady_clock::now() + std::chrono::milliseconds(jitter(rng_));
      backoff_[i] = std::min(options_.reconnect_backoff_max, b * 2);
    }
    // Post, so that a caller failing inside Fail() does not re-enter Pump.
    asio::post(io_, [this] { Pump(); });
  }

  void UpdateReady() {
    int ready = 0;
    for (auto& c : conns_) ready += c->ready() ? 1 : 0;
    ready_count_.store(ready, std::memory_order_relaxed);
  }

  bool AnyConnecting() const {
    for (auto& c : conns_) {
      if (c->state() == Connection::State::kConnecting) return true;
    }
    return false;
  }

  Status LastError() const {
    for (auto& c : conns_) {
      if (!c->last_error().ok()) return c->last_error();
    }
    return ConnectionError("redis " + options_.host + ":" + std::to_string(options_.port) +
                           ": not connected");
  }

  void Tick() {
    if (stopping_) return;
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < conns_.size(); ++i) {
      conns_[i]->CheckDeadlines(now);
      const auto st = conns_[i]->state();
      if ((st == Connection::State::kClosed || st == Connection::State::kIdle) &&
          now >= retry_at_[i]) {
        retry_at_[i] = SteadyTime::max();
        conns_[i]->Connect();
      }
    }
    ExpireQueued(now);
    ticker_.expires_after(std::chrono::milliseconds(5));
    ticker_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Tick();
    });
  }

  void ExpireQueued(SteadyTime now) {
    std::vector<RequestPtr> expired;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!queue_.empty() && queue_.front()->deadline < now) {
        expired.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (auto& r : expired) {
      timeouts_.fetch_add(1, std::memory_order_relaxed);
      r->Fail(TimeoutError("redis " + options_.host + ":" + std::to_string(options_.port) +
                           ": no connection answered within " +
                           std::to_string(options_.call_timeout.count()) + "ms"));
    }
  }

  void FailQueued(const Status& why) {
    std::deque<RequestPtr> failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed.swap(queue_);
      if (why.code() == StatusCode::kUnavailable) closed_ = true;
    }
    for (auto& r : failed) {
      errors_.fetch_add(1, std::memory_order_relaxed);
      r->Fail(why);
    }
  }

  Connection* PickConnection() {
    Connection* best = nullptr;
    for (auto& c : conns_) {
      if (!c->ready() || c->inflight() >= options_.max_inflight_per_connection) continue;
      if (best == nullptr || c->inflight() < best->inflight()) best = c.get();
    }
    return best;
  }

  void Pump() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pump_posted_ = false;
    }
    if (stopping_) return;
    for (;;) {
      Connection* c = PickConnection();
      if (c == nullptr) break;
      std::vector<RequestPtr> batch;
      {
        std::lock_guard<std::mutex> lock(mu_);
        while (!queue_.empty() && batch.size() < options_.max_batch) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      if (batch.empty()) return;
      std::vector<RequestPtr> decisions;
      decisions.reserve(batch.size());
      for (auto& r : batch) {
        if (r->cmd_done) {
          SendCommand(*c, std::move(r));
        } else {
          decisions.push_back(std::move(r));
        }
      }
      if (!decisions.empty()) SendScript(*c, std::move(decisions), /*eval=*/false);
    }
    if (ready_count_.load(std::memory_order_relaxed) == 0 && !AnyConnecting()) {
      FailQueued(LastError());  // every connection is backing off: fail fast
    }
  }

  void SendCommand(Connection& c, RequestPtr r) {
    std::string resp;
    redis::AppendCommand(resp, r->argv);
    auto* raw = r.release();
    c.Send(std::move(resp), 1, raw->deadline, [this, raw](Status st, std::vector<ReplyPtr>& got) {
      RequestPtr req(raw);
      if (!st.ok()) {
        CountFailure(st);
        req->cmd_done(st);
        return;
      }
      req->cmd_done(redis::ToRedisReply(got.front().get()));
      Pump();
    });
  }

  void CountFailure(const Status& st) {
    if (st.code() == StatusCode::kTimeout) {
      timeouts_.fetch_add(1, std::memory_order_relaxed);
    } else {
      errors_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // One EVALSHA (or EVAL after NOSCRIPT) for every request in `reqs`.
  void SendScript(Connection& c, std::vector<RequestPtr> reqs, bool eval) {
    // Distinct keys and distinct (kind, increment, threshold) entries of the
    // call, 1-based, in first-seen order.
    std::unordered_map<std::string_view, int> index;
    std::vector<std::string_view> keys;
    std::vector<const ScriptItem*> entries;
    std::vector<int> item_key, item_entry;
    SteadyTime deadline = SteadyTime::max();
    for (auto& r : reqs) {
      deadline = std::min(deadline, r->deadline);
      for (size_t i = 0; i < r->items.size(); ++i) {
        auto [it, fresh] = index.emplace(r->keys[i], static_cast<int>(keys.size()) + 1);
        if (fresh) keys.push_back(r->keys[i]);
        item_key.push_back(it->second);
        const ScriptItem& si = r->items[i];
        int e = 0;
        for (size_t j = entries.size(); j-- > 0;) {  // few distinct limits per call
          if (entries[j]->kind == si.kind && entries[j]->increment == si.increment &&
              entries[j]->threshold == si.threshold) {
            e = static_cast<int>(j) + 1;
            break;
          }
        }
        if (e == 0) {
          entries.push_back(&si);
          e = static_cast<int>(entries.size());
        }
        item_entry.push_back(e);
      }
    }
    std::vector<std::string> nums;  // owns the numeric argument texts
    nums.reserve(3 + 3 * entries.size() + reqs.size() + 2 * item_key.size());
    nums.push_back(std::to_string(keys.size()));
    nums.push_back(options_.use_client_clock ? std::to_string(options_.clock->WallNow())
                                             : std::string());
    nums.push_back(std::to_string(entries.size()));
    for (const ScriptItem* e : entries) {
      nums.push_back(std::to_string(static_cast<int>(e->kind)));
      nums.push_back(std::to_string(e->increment));
      nums.push_back(std::to_string(e->threshold));
    }
    size_t n = 0;
    for (auto& r : reqs) {
      nums.push_back(std::to_string(r->items.size()));
      for (size_t i = 0; i < r->items.size(); ++i, ++n) {
        nums.push_back(std::to_string(item_key[n]));
        nums.push_back(std::to_string(item_entry[n]));
      }
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(3 + keys.size() + nums.size());
    lens.reserve(argv.capacity());
    auto push = [&](std::string_view s) {
      argv.push_back(s.data());
      lens.push_back(s.size());
    };
    const std::string_view script = redis::GcraScript();
    push(eval ? "EVAL" : "EVALSHA");
    push(eval ? script : std::string_view(c.script_sha()));
    push(nums[0]);
    for (auto k : keys) push(k);
    for (size_t i = 1; i < nums.size(); ++i) push(nums[i]);
    std::string resp;
    redis::AppendCommand(resp, static_cast<int>(argv.size()), argv.data(), lens.data());

    const int64_t sent = SteadyNs(std::chrono::steady_clock::now());
    for (auto& r : reqs) r->sent_ns = sent;
    script_calls_.fetch_add(1, std::memory_order_relaxed);
    auto shared = std::make_shared<std::vector<RequestPtr>>(std::move(reqs));
    Connection* conn = &c;
    c.Send(std::move(resp), 1, deadline,
           [this, shared, conn, eval](Status st, std::vector<ReplyPtr>& got) {
             OnScriptReply(*conn, *shared, eval, st, got);
             Pump();
           });
  }

  void OnScriptReply(Connection& c, std::vector<RequestPtr>& reqs, bool eval, const Status& st,
                     std::vector<ReplyPtr>& got) {
    if (!st.ok()) {
      for (auto& r : reqs) {
        CountFailure(st);
        r->done(st);
      }
      return;
    }
    const redisReply* reply = got.front().get();
    if (reply->type == REDIS_REPLY_ERROR) {
      std::string_view text(reply->str, reply->len);
      if (text.starts_with("NOSCRIPT") && !eval && c.ready()) {
        // The call did not run: resend it with the script body (which also loads it).
        noscript_.fetch_add(1, std::memory_order_relaxed);
        SendScript(c, std::move(reqs), /*eval=*/true);
        return;
      }
      const Status err = ErrorReplyStatus(text);
      for (auto& r : reqs) {
        CountFailure(err);
        r->done(err);
      }
      return;
    }
    size_t total = 0;
    for (auto& r : reqs) total += r->items.size();
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 * total) {
      const Status err(StatusCode::kScript, "redis: script returned a malformed reply");
      for (auto& r : reqs) {
        CountFailure(err);
        r->done(err);
      }
      return;
    }
    size_t e = 0;
    for (auto& r : reqs) {
      BatchDecision out;
      out.decisions.reserve(r->items.size());
      bool all = true;
      for (size_t i = 0; i < r->items.size(); ++i, e += 3) {
        const int64_t code = reply->element[e]->integer;
        const int64_t rel =
            reply->element[e + 1]->integer * 1'000'000'000 + reply->element[e + 2]->integer;
        out.decisions.push_back(redis::DecodeDecision(r->limits[i], r->items[i], code, rel));
        if (code != 1) all = false;
        if ((code == 0 || code == 2) && out.denied_index < 0)
          out.denied_index = static_cast<int>(i);
      }
      out.allowed = all;
      decisions_.fetch_add(1, std::memory_order_relaxed);
      if (!r->cache_entry.empty() && !out.allowed) {
        deny_cache_.Insert(r->cache_entry, out.decisions[0], r->sent_ns);
      }
      r->done(std::move(out));
    }
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer ticker_;
  std::thread thread_;
  // I/O thread only.
  std::vector<std::shared_ptr<Connection>> conns_;
  std::vector<std::chrono::milliseconds> backoff_;
  std::vector<SteadyTime> retry_at_;
  std::minstd_rand rng_{std::random_device{}()};
  bool stopping_ = false;
  // Guarded by mu_.
  std::mutex mu_;
  std::deque<RequestPtr> queue_;
  bool pump_posted_ = false;
  bool closed_ = false;

  redis::DenyCache deny_cache_;
  std::atomic<int> ready_count_{0};
  std::atomic<uint64_t> decisions_{0}, script_calls_{0}, noscript_{0}, connects_{0}, timeouts_{0},
      errors_{0}, deny_cache_hits_{0};
};

Result<std::unique_ptr<RedisStore>> RedisStore::Create(const RedisOptions& options) {
  if (options.tls) {
    return InvalidArgument(
        "redis: tls is not supported: Debian's libhiredis-dev 0.14 ships no hiredis_ssl");
  }
  if (options.host.empty()) return InvalidArgument("redis: host must not be empty");
  if (options.port < 1 || options.port > 65535) return InvalidArgument("redis: port 1..65535");
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
  auto impl = std::make_unique<Impl>(options);
  impl->Start();
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisStore::~RedisStore() = default;

void RedisStore::AcquireAsync(std::span<const AcquireItem> items, Callback done) {
  impl_->AcquireAsync(items, std::move(done));
}

namespace {
template <typename T>
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<T> value;
  void Set(T v) {
    std::lock_guard<std::mutex> lock(mu);
    value.emplace(std::move(v));
    cv.notify_one();
  }
  T Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return value.has_value(); });
    return std::move(*value);
  }
};
}  // namespace

Result<BatchDecision> RedisStore::Acquire(std::span<const AcquireItem> items) {
  auto w = std::make_shared<Waiter<Result<BatchDecision>>>();
  impl_->AcquireAsync(items, [w](Result<BatchDecision> r) { w->Set(std::move(r)); });
  return w->Wait();
}

void RedisStore::CommandAsync(std::vector<std::string> argv,
                              std::function<void(Result<RedisReply>)> done) {
  impl_->CommandAsync(std::move(argv), std::move(done));
}

Result<RedisReply> RedisStore::Command(std::vector<std::string> argv) {
  auto w = std::make_shared<Waiter<Result<RedisReply>>>();
  impl_->CommandAsync(std::move(argv), [w](Result<RedisReply> r) { w->Set(std::move(r)); });
  return w->Wait();
}

bool RedisStore::Healthy() const { return impl_->Healthy(); }

std::string RedisStore::RedisKeyFor(std::string_view key) const {
  return redis::RedisKey(impl_->options_.key_prefix, key);
}

Status RedisStore::CheckLimit(const Limit& limit) { return redis::CheckScriptLimit(limit); }

RedisStoreStats RedisStore::Stats() const { return impl_->Stats(); }

const RedisOptions& RedisStore::options() const { return impl_->options_; }

}  // namespace tollgate
