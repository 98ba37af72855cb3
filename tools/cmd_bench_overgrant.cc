// `tollgate bench overgrant`: the seed's correctness test. Callers (in one or
// several processes) race for one key; the tokens granted are checked against
// what the bucket could grant over the time the run really took:
//
//   bound = burst + floor(span / interval)      (<= burst + rate * span)
//
// where span runs from the first decision to the last granted one, both in the
// clock the store decided by: Redis TIME for lua and lua-single (read on the
// node that holds the key, just before the first decision is sent and just
// after each grant is received, so the span can only come out longer than the
// truth, never shorter), and the client's wall clock for multicmd and watch
// (which compute each step with it; the exact `now` of each step is kept).
//
// Why that bounds a token bucket (GCRA, see algorithm.h): a fresh key's TAT
// starts at the first grant's `now` t1, and every grant adds one interval to
// max(TAT, now), so after n grants TAT >= t1 + n * interval; the n-th grant at
// t_n needs TAT <= t_n + tolerance = t_n + burst * interval. So n <= burst +
// (t_n - t1) / interval, and as n is whole, n <= burst + floor((t_n - t1) /
// interval). The floor is taken on integer ns (exact), and interval is
// ceil(1e9 / rate), so the bound never exceeds burst + rate * span: no +1 is
// needed for discretisation. Each child process runs --seconds from when it is
// ready; one that starts late widens the span, it never adds to the bound
// without the time it used. `nominal_max` (burst + rate * --seconds, what this
// reported before) is printed beside it for comparison.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <thread>

#include "base/redact.h"
#include "bench_redis.h"
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#include "tollgate/store_spec.h"

namespace tollgate::cli::bench {
namespace {

// Redis TIME from a script that names the bucket's key: it runs on the node
// that holds the key.
constexpr const char* kTimeScript = "return redis.call('TIME')";

// The store's clock, read through a store of its own opened from the same URL
// (the runtime's store spec): on a cluster, Command routes by the key's slot
// and follows MOVED/ASK inside the cluster store.
// Thread safety: as RedisStore.
class StoreClock {
 public:
  static Result<std::unique_ptr<StoreClock>> Open(const BenchArgs& a, std::string redis_key) {
    StoreSpec spec;
    spec.url = a.url;
    spec.call_timeout = std::chrono::milliseconds(5000);
    auto opened = OpenStore(spec);
    if (!opened.ok()) return opened.status();
    if (opened->redis == nullptr && opened->cluster == nullptr) {
      return InvalidArgument("overgrant: " + base::RedactUrl(a.url) + " is not a Redis store");
    }
    std::unique_ptr<StoreClock> clock(new StoreClock(std::move(redis_key), std::move(*opened)));
    Result<int64_t> t = clock->Now();  // the first read also waits for the connection
    if (!t.ok()) return t.status();
    return clock;
  }

  // ns since the epoch, on the store's clock.
  Result<int64_t> Now() {
    return Parse(store_.cluster != nullptr ? store_.cluster->Command(redis_key_, Argv())
                                           : store_.redis->Command(Argv()));
  }
  // `done` runs once, on the clock's I/O thread.
  void NowAsync(std::function<void(Result<int64_t>)> done) {
    auto parsed = [done = std::move(done)](Result<RedisReply> r) { done(Parse(std::move(r))); };
    if (store_.cluster != nullptr) {
      store_.cluster->CommandAsync(redis_key_, Argv(), std::move(parsed));
    } else {
      store_.redis->CommandAsync(Argv(), std::move(parsed));
    }
  }

 private:
  StoreClock(std::string redis_key, OpenedStore store)
      : redis_key_(std::move(redis_key)), store_(std::move(store)) {}

  std::vector<std::string> Argv() const { return {"EVAL", kTimeScript, "1", redis_key_}; }

  // TIME's reply: [seconds, microseconds], as the decision script reads it.
  static Result<int64_t> Parse(Result<RedisReply> r) {
    if (!r.ok()) return r.status();
    int64_t part[2] = {0, 0};
    bool ok = r->type == RedisReply::Type::kArray && r->elements.size() == 2;
    for (size_t i = 0; ok && i < 2; ++i) {
      const std::string& s = r->elements[i].str;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), part[i]);
      ok = ec == std::errc() && end == s.data() + s.size() && part[i] >= 0;
    }
    if (!ok) return Status(StatusCode::kServer, "overgrant: unexpected reply to TIME: " + r->str);
    return part[0] * 1'000'000'000 + part[1] * 1'000;
  }

  std::string redis_key_;
  OpenedStore store_;
};

// The store time of the latest grant, from above: after each grant is
// received, TIME is read on the store (so it runs after the grant's script).
// One read is in flight at a time; grants received meanwhile share the next.
// Thread safety: OnGrant from any thread; Finish once, after the last OnGrant.
class GrantStamps {
 public:
  explicit GrantStamps(StoreClock* clock) : clock_(clock) {}

  void OnGrant() {
    std::unique_lock<std::mutex> lock(mu_);
    ++granted_;
    if (in_flight_) return;
    in_flight_ = true;
    const uint64_t upto = granted_;
    lock.unlock();
    Read(upto);
  }

  // Waits for the read in flight: the store time at or after the last grant,
  // 0 when nothing was granted, or the first read's error.
  Result<int64_t> Finish() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !in_flight_; });
    if (!error_.ok()) return error_;
    return granted_ == 0 ? 0 : stamped_ns_;
  }

 private:
  void Read(uint64_t upto) {
    clock_->NowAsync([this, upto](Result<int64_t> t) {
      std::unique_lock<std::mutex> lock(mu_);
      if (!t.ok()) {
        if (error_.ok()) error_ = t.status();
      } else {
        stamped_ns_ = std::max(stamped_ns_, *t);
        if (granted_ > upto) {
          const uint64_t next = granted_;
          lock.unlock();
          Read(next);
          return;
        }
      }
      in_flight_ = false;
      cv_.notify_all();
    });
  }

  StoreClock* const clock_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  uint64_t granted_ = 0;
  bool in_flight_ = false;
  int64_t stamped_ns_ = 0;
  Status error_;
};

// One child's figures, sent to the parent through a pipe. Times are ns on the
// store's clock; first_ns is 0 when the child decided nothing.
struct OvergrantCounts {
  uint64_t allowed = 0, decisions = 0, errors = 0;
  int64_t first_ns = 0, last_grant_ns = 0;
};

OvergrantCounts Failed(const std::string& what) {
  std::fprintf(stderr, "overgrant: %s\n", what.c_str());
  return {0, 0, 1, 0, 0};
}

OvergrantCounts RunLuaChild(const BenchArgs& a, const std::string& strategy, const std::string& key,
                            int callers, const Limit& limit, SteadyClock::time_point start_at) {
  const std::vector<std::string> keys = {key};
  auto store = OpenStore(a, strategy == "lua-single");
  if (!store.ok()) return Failed(store.status().ToString());
  auto clock = StoreClock::Open(a, store->redis_key(key));
  if (!clock.ok()) return Failed(clock.status().ToString());
  GrantStamps stamps(clock->get());
  LuaDriver d;
  d.store = store->store.get();
  d.limit = &limit;
  d.keys = &keys;
  d.hot = true;
  d.on_grant = [&stamps] { stamps.OnGrant(); };
  std::this_thread::sleep_until(start_at);
  // Read before the first decision is sent: that decision's script runs later.
  Result<int64_t> first = (*clock)->Now();
  if (!first.ok()) return Failed("TIME: " + first.status().ToString());
  d.stop_at = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(a.seconds));
  d.Run(callers);
  Result<int64_t> last = stamps.Finish();
  if (!d.first_error.empty()) std::fprintf(stderr, "overgrant: %s\n", d.first_error.c_str());
  OvergrantCounts c{d.allowed.load(), d.decisions.load(), d.errors.load(), *first, 0};
  if (!last.ok()) {
    std::fprintf(stderr, "overgrant: TIME: %s\n", last.status().ToString().c_str());
    ++c.errors;
  } else {
    c.last_grant_ns = *last;
  }
  return c;
}

OvergrantCounts RunChild(const BenchArgs& a, const std::string& strategy, const std::string& key,
                         int callers, const Limit& limit, SteadyClock::time_point start_at) {
  if (strategy == "lua" || strategy == "lua-single") {
    return RunLuaChild(a, strategy, key, callers, limit, start_at);
  }
  const RunResult r = RunClientSide(a, strategy, "hot_key", callers, limit, {key}, start_at);
  if (!r.first_error.empty()) std::fprintf(stderr, "overgrant: %s\n", r.first_error.c_str());
  return {r.allowed, r.decisions, r.errors, r.first_decision_ns, r.last_grant_ns};
}

}  // namespace

int OvergrantMain(const std::vector<std::string>& args) {
  BenchArgs a;
  a.seconds = 3;
  a.concurrency = {64};
  a.strategies = {"lua", "multicmd", "watch"};
  a.rate = 10;
  a.burst = 10;
  std::optional<Limit> limit;
  const int exit_code = StartBench(
      args, "tollgate bench overgrant",
      "usage: tollgate bench overgrant [--redis-url URL] [--strategy lua,multicmd,watch]\n"
      "  [--processes 1] [--concurrency 64 (callers in total)] [--seconds 3] [--rate 10]"
      " [--burst 10] [--json]\n"
      "Checks allowed <= bound = burst + floor(span / interval), span = first decision to\n"
      "last grant in the store's clock (Redis TIME; the client clock for multicmd/watch).\n",
      true, &a, &limit);
  if (exit_code >= 0) return exit_code;
  const int callers = a.concurrency.front();
  const double nominal = static_cast<double>(a.burst) + a.rate * a.seconds;
  if (!a.json) {
    std::printf(
        "| strategy | processes | callers | allowed | span s | bound | nominal max | over bound | "
        "errors |\n|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const auto& strategy : a.strategies) {
    const std::string key =
        "overgrant:" + std::to_string(getpid()) + ":" + std::to_string(WallNs()) + ":" + strategy;
    // Children connect first, then all start together (one that is not ready
    // by then starts late and runs its --seconds from there).
    const auto start_at = SteadyClock::now() + std::chrono::milliseconds(500);
    OvergrantCounts total;
    int64_t first_ns = INT64_MAX, last_grant_ns = 0;
    std::vector<std::pair<pid_t, int>> children;
    for (int p = 0; p < a.processes; ++p) {
      const int mine = callers / a.processes + (p < callers % a.processes ? 1 : 0);
      int fds[2];
      if (pipe(fds) != 0) return 1;
      const pid_t pid = fork();
      if (pid < 0) return 1;
      if (pid == 0) {
        close(fds[0]);
        OvergrantCounts c = RunChild(a, strategy, key, mine, *limit, start_at);
        const ssize_t w = write(fds[1], &c, sizeof c);
        _exit(w == static_cast<ssize_t>(sizeof c) ? 0 : 1);
      }
      close(fds[1]);
      children.push_back({pid, fds[0]});
    }
    for (auto [pid, fd] : children) {
      OvergrantCounts c;
      if (read(fd, &c, sizeof c) == static_cast<ssize_t>(sizeof c)) {
        total.allowed += c.allowed;
        total.decisions += c.decisions;
        total.errors += c.errors;
        if (c.first_ns > 0) first_ns = std::min(first_ns, c.first_ns);
        last_grant_ns = std::max(last_grant_ns, c.last_grant_ns);
      } else {
        total.errors += 1;
      }
      close(fd);
      int status = 0;
      waitpid(pid, &status, 0);
    }
    const int64_t span_ns =
        first_ns == INT64_MAX ? 0 : std::max<int64_t>(0, last_grant_ns - first_ns);
    const int64_t bound = a.burst + span_ns / limit->interval_ns();
    const double span_s = static_cast<double>(span_ns) / 1e9;
    const double over = (static_cast<double>(total.allowed) - static_cast<double>(bound)) /
                        static_cast<double>(bound) * 100.0;
    if (a.json) {
      std::printf(
          "{\"strategy\":\"%s\",\"processes\":%d,\"concurrency\":%d,\"seconds\":%.3f,"
          "\"burst\":%" PRId64 ",\"rate\":%g,\"allowed\":%" PRIu64
          ",\"span_s\":%.6f,\"bound\":%" PRId64
          ",\"nominal_max\":%.0f,\"over_grant_pct\":%.2f,\"decisions\":%" PRIu64
          ",\"errors\":%" PRIu64 "}\n",
          strategy.c_str(), a.processes, callers, a.seconds, a.burst, a.rate, total.allowed, span_s,
          bound, nominal, over, total.decisions, total.errors);
    } else {
      std::printf("| %s | %d | %d | %" PRIu64 " | %.3f | %" PRId64 " | %.0f | %.2f%% | %" PRIu64
                  " |\n",
                  strategy.c_str(), a.processes, callers, total.allowed, span_s, bound, nominal,
                  over, total.errors);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace tollgate::cli::bench
