// outage_bench: decision latency during a Redis outage, per failure mode, and
// the time decisions take to return to Redis after it recovers.
//
// For each mode it starts a real redis-server (tests/testing fixture), runs a
// steady paced load of `--threads` callers through ResilientStore(RedisStore),
// then: SIGKILL for --outage-ms, restart; SIGSTOP for --outage-ms, SIGCONT.
// Latency percentiles cover every call that started and ended while Redis was
// down (including the few that waited for the deadline before the breaker
// opened). Recovery = from the moment Redis is back (restart answered PING /
// SIGCONT sent) to the first decision answered by Redis. "waited" counts the
// outage's calls that took at least half the deadline (they waited on Redis).
//
// Usage: outage_bench [--threads N] [--outage-ms MS] [--deadline-ms MS]
//                     [--open-ms MS] [--reconnect-max-ms MS] [--pace-us US]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/redis_server.h"
#include "tollgate/redis_store.h"
#include "tollgate/resilient_store.h"

namespace tollgate {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Config {
  int threads = 4;
  int outage_ms = 2000;
  int deadline_ms = 100;
  int open_ms = 250;
  int reconnect_max_ms = 200;
  int pace_us = 100;
};

constexpr int64_t kBurst = 1000;

enum Phase : int { kUp, kDown, kBack };

class Runner {
 public:
  Runner(ResilientStore& store, FailureMode mode, const Config& cfg)
      : store_(store), mode_(mode), cfg_(cfg) {
    LimitSpec s;
    s.rate = 1e6;
    s.burst = kBurst;
    limit_ = std::make_unique<Limit>(*Limit::Create(s));
    for (int t = 0; t < cfg.threads; ++t) per_thread_.push_back(std::make_unique<PerThread>());
    for (int t = 0; t < cfg.threads; ++t) threads_.emplace_back([this, t] { Run(t); });
  }
  ~Runner() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  void SetPhase(Phase p) {
    std::lock_guard<std::mutex> lock(mu_);
    phase_start_ = Steady::now();
    first_redis_ns_ = 0;
    phase_.store(p);
  }
  int64_t first_redis_ns() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_redis_ns_;
  }
  // Latencies (ns) of the calls made entirely inside the down phases; clears them.
  std::vector<int64_t> TakeDown() {
    std::vector<int64_t> all;
    for (auto& pt : per_thread_) {
      std::lock_guard<std::mutex> lock(pt->mu);
      all.insert(all.end(), pt->down.begin(), pt->down.end());
      pt->down.clear();
    }
    return all;
  }

 private:
  struct PerThread {
    std::mutex mu;
    std::vector<int64_t> down;
  };

  bool FromRedis(const Result<Decision>& r) const {
    switch (mode_) {
      case FailureMode::kOpen:
        return r.ok() && r->remaining != r->limit;
      case FailureMode::kClosed:
        return r.ok();
      case FailureMode::kDegrade:
        return r.ok() && r->limit == kBurst;
    }
    return false;
  }

  void Run(int t) {
    const std::string key = "bench\x1f" + std::to_string(t);
    PerThread& pt = *per_thread_[t];
    while (!stop_) {
      const Phase p0 = phase_.load();
      const auto t0 = Steady::now();
      Result<Decision> r = AcquireOne(store_, key, *limit_, 1);
      const auto t1 = Steady::now();
      const Phase p1 = phase_.load();
      if (p0 == p1 && p0 == kDown) {
        std::lock_guard<std::mutex> lock(pt.mu);
        pt.down.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      if (p0 == p1 && p0 == kBack && FromRedis(r)) {
        std::lock_guard<std::mutex> lock(mu_);
        if (first_redis_ns_ == 0 && t0 >= phase_start_)
          first_redis_ns_ =
              std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - phase_start_).count();
      }
      if (cfg_.pace_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(cfg_.pace_us));
    }
  }

  ResilientStore& store_;
  const FailureMode mode_;
  const Config cfg_;
  std::unique_ptr<Limit> limit_;
  std::atomic<bool> stop_{false};
  std::atomic<Phase> phase_{kUp};
  std::mutex mu_;
  Steady::time_point phase_start_;  // guarded by mu_
  int64_t first_redis_ns_ = 0;      // guarded by mu_
  std::vector<std::unique_ptr<PerThread>> per_thread_;
  std::vector<std::thread> threads_;
};

double Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return static_cast<double>(v[i]) / 1e3;  // us
}

bool WaitFor(const std::function<bool()>& cond, milliseconds bound) {
  const auto until = Steady::now() + bound;
  while (Steady::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return cond();
}

int RunMode(FailureMode mode, const Config& cfg) {
  auto started = testing::RedisServer::Start();
  if (!started) {
    std::fprintf(stderr, "cannot start redis-server: %s\n", started.error.c_str());
    return 1;
  }
  testing::RedisServer& server = *started.server;
  auto ro = ParseRedisUrl(server.url());
  ro->key_prefix = "tg-bench:";
  ro->call_timeout = milliseconds(cfg.deadline_ms);
  ro->connect_timeout = milliseconds(cfg.deadline_ms);
  ro->reconnect_backoff_min = milliseconds(10);
  ro->reconnect_backoff_max = milliseconds(cfg.reconnect_max_ms);
  auto redis = RedisStore::Create(*ro);
  if (!redis.ok()) {
    std::fprintf(stderr, "%s\n", redis.status().ToString().c_str());
    return 1;
  }
  ResilientStoreOptions o;
  o.mode = mode;
  o.breaker.open_duration = milliseconds(cfg.open_ms);
  auto store = ResilientStore::Create(std::move(*redis), std::move(o));
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  Runner runner(**store, mode, cfg);
  std::this_thread::sleep_for(milliseconds(300));  // warm-up load on a healthy Redis

  struct Outage {
    const char* name;
    std::function<void()> fail, heal;
  };
  Outage outages[] = {
      {"SIGKILL", [&] { server.Kill(); },
       [&] {
         std::string e = server.Restart();
         if (!e.empty()) std::fprintf(stderr, "restart: %s\n", e.c_str());
       }},
      {"SIGSTOP", [&] { server.Pause(); }, [&] { server.Resume(); }},
  };
  int rc = 0;
  for (Outage& outage : outages) {
    outage.fail();
    runner.SetPhase(kDown);
    std::this_thread::sleep_for(milliseconds(cfg.outage_ms));  // the outage's length
    std::vector<int64_t> lat = runner.TakeDown();
    outage.heal();
    runner.SetPhase(kBack);
    const bool back = WaitFor([&] { return runner.first_redis_ns() != 0; }, milliseconds(10000));
    const double recovery_ms = back ? runner.first_redis_ns() / 1e6 : -1;
    if (!back) rc = 1;
    const size_t n = lat.size();
    const double p50 = Percentile(lat, 0.50), p99 = Percentile(lat, 0.99),
                 p999 = Percentile(lat, 0.999);
    const double max = n ? *std::max_element(lat.begin(), lat.end()) / 1e6 : 0;
    const int64_t half_deadline = int64_t{cfg.deadline_ms} * 1'000'000 / 2;
    const auto waited =
        std::count_if(lat.begin(), lat.end(), [&](int64_t ns) { return ns >= half_deadline; });
    std::printf("| %-7s | %-7s | %8zu | %6.1f | %6.1f | %8.1f | %7.1f | %6lld | %11.1f |\n",
                std::string(FailureModeName(mode)).c_str(), outage.name, n, p50, p99, p999, max,
                static_cast<long long>(waited), recovery_ms);
    std::fflush(stdout);
    std::this_thread::sleep_for(milliseconds(300));
    runner.SetPhase(kUp);
  }
  runner.Stop();
  return rc;
}

int Main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--threads")
      cfg.threads = std::max(1, v);
    else if (flag == "--outage-ms")
      cfg.outage_ms = std::max(100, v);
    else if (flag == "--deadline-ms")
      cfg.deadline_ms = std::max(1, v);
    else if (flag == "--open-ms")
      cfg.open_ms = std::max(0, v);
    else if (flag == "--reconnect-max-ms")
      cfg.reconnect_max_ms = std::max(10, v);
    else if (flag == "--pace-us")
      cfg.pace_us = std::max(0, v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::printf(
      "threads=%d outage=%dms deadline=%dms open_duration=%dms reconnect_max=%dms "
      "pace=%dus\n\n",
      cfg.threads, cfg.outage_ms, cfg.deadline_ms, cfg.open_ms, cfg.reconnect_max_ms, cfg.pace_us);
  std::printf(
      "| mode    | outage  | calls    | p50 us | p99 us | p99.9 us | max ms  | waited "
      "| recovery ms |\n");
  std::printf(
      "|---------|---------|----------|--------|--------|----------|---------|--------"
      "|-------------|\n");
  int rc = 0;
  for (FailureMode m : {FailureMode::kOpen, FailureMode::kClosed, FailureMode::kDegrade})
    rc |= RunMode(m, cfg);
  return rc;
}

}  // namespace
}  // namespace tollgate

int main(int argc, char** argv) { return tollgate::Main(argc, argv); }
