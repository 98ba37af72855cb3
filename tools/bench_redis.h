// What `tollgate bench redis` and `tollgate bench overgrant` share: options,
// the store under test, and the drivers of the strategies.
//
// Strategies:
//   lua         RedisStore: one exact script per batch of queued decisions,
//               pipelined over a small pool (what tollgate ships)
//   lua-single  RedisStore limited to one decision per script call (the
//               one-EVALSHA-per-decision baseline, still pipelined)
//   multicmd    GET, compute on the client, SET PX: racy, over-grants
//   watch       WATCH, GET, compute, MULTI/SET/EXEC, retried up to 20 times
// "concurrency" is the number of callers with one decision in flight each
// (async chains for lua, one thread + connection each for multicmd/watch).
#ifndef TOLLGATE_TOOLS_BENCH_REDIS_H_
#define TOLLGATE_TOOLS_BENCH_REDIS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/limit.h"
#include "tollgate/store.h"

namespace tollgate::cli::bench {

using SteadyClock = std::chrono::steady_clock;

struct BenchArgs {
  std::string url = "redis://127.0.0.1:6379";
  std::vector<std::string> strategies = {"lua", "multicmd", "watch"};
  std::vector<std::string> scenarios = {"hot_key", "per_user"};
  std::vector<int> concurrency = {1, 16, 64, 256};
  double seconds = 3;
  bool json = false;
  int users = 10000;
  double rate = 1e6;
  int64_t burst = 1000000;
  size_t connections = 2;
  size_t max_batch = 256;
  size_t inflight = 4;
  int processes = 1;
  bool deny_cache = false;
};

// Returns "" or an error message. `overgrant` accepts --processes.
std::string ParseBenchArgs(const std::vector<std::string>& args, BenchArgs* a, bool overgrant);

// A command's start: prints `usage` for --help/-h (returns 0), or parses the
// options into *a (over its defaults) and makes the bucket *limit from
// --rate/--burst; errors go to stderr prefixed by `command` (returns 2).
// Returns -1 when the command should run.
int StartBench(const std::vector<std::string>& args, const char* command, const char* usage,
               bool overgrant, BenchArgs* a, std::optional<Limit>* limit);

bool IsClusterUrl(std::string_view url);

// Wall clock ns since the epoch: the clock multicmd and watch decide by.
int64_t WallNs();

// Latency histogram: 1 us buckets up to 1 s, then one overflow bucket.
class Histogram {
 public:
  static constexpr size_t kBuckets = 1000001;
  Histogram();
  void Record(SteadyClock::duration d);
  double Percentile(double p) const;

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
};

struct RunResult {
  std::string strategy, scenario;
  int concurrency = 0;
  double seconds = 0;
  uint64_t decisions = 0, allowed = 0, errors = 0, redis_calls = 0;
  double p50_us = 0, p99_us = 0;
  std::string first_error;
  // multicmd/watch: the wall-clock `now` their client-side steps used, of the
  // first decision and of the last granted one (0 when none).
  int64_t first_decision_ns = 0, last_grant_ns = 0;
};

// A RedisStore (redis://) or RedisClusterStore (redis-cluster://), its script
// call counter, and the Redis key it keeps a bucket under.
struct BenchStore {
  std::unique_ptr<Store> store;
  std::function<uint64_t()> script_calls;
  std::function<std::string(std::string_view key)> redis_key;
};

// Opens the store for the lua strategies (single: one decision per script
// call) and waits, bounded, until it is connected.
Result<BenchStore> OpenStore(const BenchArgs& a, bool single);

// lua / lua-single: `running` callers, each with one decision in flight on
// `store`, until stop_at.
struct LuaDriver {
  Store* store = nullptr;
  const Limit* limit = nullptr;
  const std::vector<std::string>* keys = nullptr;
  bool hot = false;
  SteadyClock::time_point stop_at;
  // Runs on the store's I/O thread after each granted decision; must not block.
  std::function<void()> on_grant;
  std::atomic<uint64_t> decisions{0}, allowed{0}, errors{0};
  std::atomic<int> running{0};
  Histogram hist;
  std::mutex mu;
  std::condition_variable cv;
  std::string first_error;
  std::vector<uint64_t> rng;

  // Starts callers 0..callers-1 and waits until each has reached stop_at.
  void Run(int callers);
  void Issue(int caller);
};

// multicmd / watch: one blocking connection and thread per caller, on one
// Redis (not a cluster); the run starts at start_at when it is set.
RunResult RunClientSide(const BenchArgs& a, const std::string& strategy,
                        const std::string& scenario, int concurrency, const Limit& limit,
                        const std::vector<std::string>& keys,
                        SteadyClock::time_point start_at = SteadyClock::time_point{});

}  // namespace tollgate::cli::bench

#endif  // TOLLGATE_TOOLS_BENCH_REDIS_H_
