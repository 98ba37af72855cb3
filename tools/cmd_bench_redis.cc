// `tollgate bench redis` and `tollgate bench overgrant`: the seed benchmark
// (Lua vs multi-command vs WATCH token buckets on Redis), reproduced.
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
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tollgate/algorithm.h"
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"

namespace tollgate::cli {
namespace {

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

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Returns "" or an error message.
std::string ParseArgs(const std::vector<std::string>& args, BenchArgs* a, bool overgrant) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    try {
      if (k == "--json") {
        a->json = true;
      } else if (k == "--deny-cache") {
        a->deny_cache = true;
      } else if (!value(&v)) {
        return "unknown option or missing value: " + k;
      } else if (k == "--redis-url") {
        a->url = v;
      } else if (k == "--strategy") {
        a->strategies = SplitList(v);
      } else if (k == "--scenario") {
        a->scenarios = SplitList(v);
      } else if (k == "--concurrency") {
        a->concurrency.clear();
        for (const auto& c : SplitList(v)) a->concurrency.push_back(std::stoi(c));
      } else if (k == "--seconds") {
        a->seconds = std::stod(v);
      } else if (k == "--users") {
        a->users = std::stoi(v);
      } else if (k == "--rate") {
        a->rate = std::stod(v);
      } else if (k == "--burst") {
        a->burst = std::stoll(v);
      } else if (k == "--connections") {
        a->connections = std::stoul(v);
      } else if (k == "--max-batch") {
        a->max_batch = std::stoul(v);
      } else if (k == "--inflight") {
        a->inflight = std::stoul(v);
      } else if (k == "--processes" && overgrant) {
        a->processes = std::stoi(v);
      } else {
        return "unknown option: " + k;
      }
    } catch (const std::exception&) {
      return "bad value for " + k + ": " + v;
    }
  }
  for (const auto& s : a->strategies) {
    if (s != "lua" && s != "lua-single" && s != "multicmd" && s != "watch") {
      return "unknown strategy '" + s + "' (lua, lua-single, multicmd, watch)";
    }
  }
  for (const auto& s : a->scenarios) {
    if (s != "hot_key" && s != "per_user") return "unknown scenario '" + s + "'";
  }
  for (int c : a->concurrency) {
    if (c < 1 || c > 4096) return "concurrency must be 1..4096";
  }
  if (a->seconds <= 0 || a->seconds > 3600) return "seconds must be in (0, 3600]";
  if (a->users < 1) return "users must be >= 1";
  if (a->processes < 1 || a->processes > 64) return "processes must be 1..64";
  return "";
}

// Latency histogram: 1 us buckets up to 1 s, then one overflow bucket.
class Histogram {
 public:
  static constexpr size_t kBuckets = 1000001;
  Histogram() : counts_(new std::atomic<uint64_t>[kBuckets]) {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i].store(0, std::memory_order_relaxed);
  }
  void Record(SteadyClock::duration d) {
    const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    counts_[static_cast<size_t>(std::clamp<int64_t>(us, 0, kBuckets - 1))].fetch_add(
        1, std::memory_order_relaxed);
  }
  double Percentile(double p) const {
    uint64_t total = 0;
    for (size_t i = 0; i < kBuckets; ++i) total += counts_[i].load(std::memory_order_relaxed);
    if (total == 0) return 0;
    const uint64_t want = static_cast<uint64_t>(p * static_cast<double>(total - 1)) + 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i].load(std::memory_order_relaxed);
      if (seen >= want) return static_cast<double>(i);
    }
    return static_cast<double>(kBuckets - 1);
  }

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
};

uint64_t NextRandom(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// ---- lua / lua-single: RedisStore driven by async chains ----

struct LuaDriver {
  Store* store = nullptr;
  const Limit* limit = nullptr;
  const std::vector<std::string>* keys = nullptr;
  bool hot = false;
  SteadyClock::time_point stop_at;
  std::atomic<uint64_t> decisions{0}, allowed{0}, errors{0};
  std::atomic<int> running{0};
  Histogram hist;
  std::mutex mu;
  std::condition_variable cv;
  std::string first_error;
  std::vector<uint64_t> rng;

  void Issue(int caller) {
    const auto start = SteadyClock::now();
    if (start >= stop_at) {
      if (running.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
      return;
    }
    const std::string& key =
        hot ? (*keys)[0] : (*keys)[NextRandom(rng[static_cast<size_t>(caller)]) % keys->size()];
    AcquireItem item{key, limit, 1};
    store->AcquireAsync(std::span<const AcquireItem>(&item, 1),
                        [this, caller, start](Result<BatchDecision> r) {
                          hist.Record(SteadyClock::now() - start);
                          decisions.fetch_add(1, std::memory_order_relaxed);
                          if (!r.ok()) {
                            if (errors.fetch_add(1) == 0) {
                              std::lock_guard<std::mutex> lock(mu);
                              first_error = r.status().ToString();
                            }
                          } else if (r->allowed) {
                            allowed.fetch_add(1, std::memory_order_relaxed);
                          }
                          Issue(caller);
                        });
  }
};

// A RedisStore (redis://) or RedisClusterStore (redis-cluster://) and its
// script call counter.
struct BenchStore {
  std::unique_ptr<Store> store;
  std::function<uint64_t()> script_calls;
};

Result<BenchStore> OpenStore(const BenchArgs& a, bool single) {
  const bool cluster =
      a.url.starts_with("redis-cluster://") || a.url.starts_with("rediss-cluster://");
  Result<RedisOptions> o = cluster ? Result<RedisOptions>(RedisOptions{}) : ParseRedisUrl(a.url);
  Result<RedisClusterOptions> co =
      cluster ? ParseRedisClusterUrl(a.url) : Result<RedisClusterOptions>(RedisClusterOptions{});
  if (!o.ok()) return o.status();
  if (!co.ok()) return co.status();
  RedisOptions& n = cluster ? co->node : *o;
  n.connections = a.connections;
  n.max_batch = single ? 1 : a.max_batch;
  n.max_inflight_per_connection = single ? 64 : a.inflight;
  n.call_timeout = std::chrono::milliseconds(5000);
  n.max_queue = 1 << 20;
  n.deny_cache = a.deny_cache;
  n.key_prefix = "bench:";
  BenchStore out;
  if (cluster) {
    auto s = RedisClusterStore::Create(*co);
    if (!s.ok()) return s.status();
    RedisClusterStore* raw = s->get();
    out.script_calls = [raw] { return raw->Stats().script_calls; };
    out.store = std::move(*s);
  } else {
    auto s = RedisStore::Create(*o);
    if (!s.ok()) return s.status();
    RedisStore* raw = s->get();
    out.script_calls = [raw] { return raw->Stats().script_calls; };
    out.store = std::move(*s);
  }
  // Wait (bounded) for the connections (and cluster topology) so the run measures decisions.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (!out.store->Healthy() && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!out.store->Healthy()) return ConnectionError("redis " + a.url + ": not reachable");
  return out;
}

RunResult RunLua(const BenchArgs& a, const std::string& strategy, const std::string& scenario,
                 int concurrency, const Limit& limit, const std::vector<std::string>& keys) {
  RunResult res;
  res.strategy = strategy;
  res.scenario = scenario;
  res.concurrency = concurrency;
  auto store = OpenStore(a, strategy == "lua-single");
  if (!store.ok()) {
    res.errors = 1;
    res.first_error = store.status().ToString();
    return res;
  }
  LuaDriver d;
  d.store = store->store.get();
  d.limit = &limit;
  d.keys = &keys;
  d.hot = scenario == "hot_key";
  d.rng.resize(static_cast<size_t>(concurrency));
  for (int i = 0; i < concurrency; ++i)
    d.rng[static_cast<size_t>(i)] = 0x9e3779b97f4a7c15ULL * (i + 1);
  const auto start = SteadyClock::now();
  d.stop_at = start + std::chrono::duration_cast<SteadyClock::duration>(
                          std::chrono::duration<double>(a.seconds));
  const uint64_t calls_before = store->script_calls();
  d.running.store(concurrency);
  for (int i = 0; i < concurrency; ++i) d.Issue(i);
  {
    std::unique_lock<std::mutex> lock(d.mu);
    d.cv.wait(lock, [&] { return d.running.load() == 0; });
  }
  res.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  res.decisions = d.decisions.load();
  res.allowed = d.allowed.load();
  res.errors = d.errors.load();
  res.redis_calls = store->script_calls() - calls_before;
  res.p50_us = d.hist.Percentile(0.50);
  res.p99_us = d.hist.Percentile(0.99);
  res.first_error = d.first_error;
  return res;
}

// ---- multicmd / watch: one blocking hiredis connection per caller ----

struct Conn {
  redisContext* c = nullptr;
  ~Conn() {
    if (c) redisFree(c);
  }
};

redisReply* Cmd(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> p;
  std::vector<size_t> l;
  for (const auto& s : argv) {
    p.push_back(s.data());
    l.push_back(s.size());
  }
  return static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), p.data(), l.data()));
}

std::string OpenConn(const RedisOptions& o, Conn* conn) {
  conn->c = redisConnectWithTimeout(o.host.c_str(), o.port, timeval{2, 0});
  if (conn->c == nullptr || conn->c->err) {
    return std::string("connect: ") + (conn->c ? conn->c->errstr : "out of memory");
  }
  redisSetTimeout(conn->c, timeval{5, 0});
  std::vector<std::vector<std::string>> setup;
  if (!o.password.empty()) {
    setup.push_back(o.username.empty() ? std::vector<std::string>{"AUTH", o.password}
                                       : std::vector<std::string>{"AUTH", o.username, o.password});
  }
  if (o.db != 0) setup.push_back({"SELECT", std::to_string(o.db)});
  for (const auto& argv : setup) {
    redisReply* r = Cmd(conn->c, argv);
    const bool bad = r == nullptr || r->type == REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (bad) return "handshake failed";
  }
  return "";
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t ParseTat(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return 0;
  return std::strtoull(r->str, nullptr, 10);
}

// One decision, client-side computed; returns false on a Redis error.
// `calls` counts Redis commands sent.
bool ClientSideDecision(redisContext* c, const std::string& key, const Limit& limit, bool watch,
                        bool* allowed, uint64_t* calls) {
  for (int attempt = 0; attempt < (watch ? 20 : 1); ++attempt) {
    if (watch) {
      redisReply* w = Cmd(c, {"WATCH", key});
      ++*calls;
      if (w == nullptr) return false;
      freeReplyObject(w);
    }
    redisReply* g = Cmd(c, {"GET", key});
    ++*calls;
    if (g == nullptr) return false;
    const uint64_t tat = ParseTat(g);
    freeReplyObject(g);
    const int64_t now = WallNs();
    StepResult s = Step(limit, tat, 1, now);
    *allowed = s.decision.allowed;
    if (!s.changed) {
      if (watch) {
        redisReply* u = Cmd(c, {"UNWATCH"});
        ++*calls;
        if (u) freeReplyObject(u);
      }
      return true;
    }
    const int64_t ttl_ms =
        std::max<int64_t>(1, (static_cast<int64_t>(s.state) - now + 999999) / 1000000);
    const std::vector<std::string> set = {"SET", key, std::to_string(s.state), "PX",
                                          std::to_string(ttl_ms)};
    if (!watch) {
      redisReply* r = Cmd(c, set);
      ++*calls;
      if (r == nullptr) return false;
      freeReplyObject(r);
      return true;
    }
    // MULTI / SET / EXEC pipelined: three commands, one round trip.
    redisAppendCommand(c, "MULTI");
    std::vector<const char*> p;
    std::vector<size_t> l;
    for (const auto& x : set) {
      p.push_back(x.data());
      l.push_back(x.size());
    }
    redisAppendCommandArgv(c, static_cast<int>(set.size()), p.data(), l.data());
    redisAppendCommand(c, "EXEC");
    *calls += 3;
    bool committed = false;
    for (int i = 0; i < 3; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) return false;
      auto* r = static_cast<redisReply*>(raw);
      if (i == 2) committed = r->type == REDIS_REPLY_ARRAY;
      freeReplyObject(r);
    }
    if (committed) return true;
  }
  *allowed = false;
  return false;  // retries exhausted: a retry error, as in the article
}

RunResult RunClientSide(const BenchArgs& a, const std::string& strategy,
                        const std::string& scenario, int concurrency, const Limit& limit,
                        const std::vector<std::string>& keys,
                        SteadyClock::time_point start_at = SteadyClock::time_point{}) {
  RunResult res;
  res.strategy = strategy;
  res.scenario = scenario;
  res.concurrency = concurrency;
  if (a.url.starts_with("redis-cluster://") || a.url.starts_with("rediss-cluster://")) {
    res.errors = 1;
    res.first_error = strategy + " runs against one node only (redis://), not redis-cluster://";
    return res;
  }
  auto o = ParseRedisUrl(a.url);
  if (!o.ok()) {
    res.errors = 1;
    res.first_error = o.status().ToString();
    return res;
  }
  const bool watch = strategy == "watch";
  const bool hot = scenario == "hot_key";
  Histogram hist;
  std::atomic<uint64_t> decisions{0}, allowed{0}, errors{0}, calls{0};
  std::mutex mu;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Conn>> conns;
  for (int i = 0; i < concurrency; ++i) {
    conns.push_back(std::make_unique<Conn>());
    if (std::string err = OpenConn(*o, conns.back().get()); !err.empty()) {
      res.errors = 1;
      res.first_error = err;
      return res;
    }
  }
  if (start_at != SteadyClock::time_point{}) std::this_thread::sleep_until(start_at);
  const auto start = SteadyClock::now();
  const auto stop_at = start + std::chrono::duration_cast<SteadyClock::duration>(
                                   std::chrono::duration<double>(a.seconds));
  for (int i = 0; i < concurrency; ++i) {
    threads.emplace_back([&, i] {
      uint64_t rng = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);
      uint64_t my_calls = 0, my_decisions = 0, my_allowed = 0, my_errors = 0;
      redisContext* c = conns[static_cast<size_t>(i)]->c;
      while (SteadyClock::now() < stop_at) {
        const std::string& key = hot ? keys[0] : keys[NextRandom(rng) % keys.size()];
        const auto t0 = SteadyClock::now();
        bool ok_allowed = false;
        const bool ok = ClientSideDecision(c, key, limit, watch, &ok_allowed, &my_calls);
        hist.Record(SteadyClock::now() - t0);
        ++my_decisions;
        if (!ok) {
          ++my_errors;
          if (c->err) break;  // the connection is gone
        } else if (ok_allowed) {
          ++my_allowed;
        }
      }
      decisions += my_decisions;
      allowed += my_allowed;
      errors += my_errors;
      calls += my_calls;
    });
  }
  for (auto& t : threads) t.join();
  res.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  res.decisions = decisions;
  res.allowed = allowed;
  res.errors = errors;
  res.redis_calls = calls;
  res.p50_us = hist.Percentile(0.50);
  res.p99_us = hist.Percentile(0.99);
  if (res.errors > 0 && res.first_error.empty()) {
    res.first_error = watch ? "WATCH retries exhausted (20)" : "redis error";
  }
  return res;
}

void PrintJson(const RunResult& r) {
  const double dps = r.seconds > 0 ? static_cast<double>(r.decisions) / r.seconds : 0;
  std::printf(
      "{\"strategy\":\"%s\",\"scenario\":\"%s\",\"concurrency\":%d,\"seconds\":%.3f,"
      "\"decisions\":%" PRIu64 ",\"allowed\":%" PRIu64 ",\"errors\":%" PRIu64
      ",\"decisions_per_s\":%.0f,\"ns_per_op\":%.0f,\"p50_us\":%.0f,\"p99_us\":%.0f,"
      "\"redis_calls_per_decision\":%.4f}\n",
      r.strategy.c_str(), r.scenario.c_str(), r.concurrency, r.seconds, r.decisions, r.allowed,
      r.errors, dps, dps > 0 ? 1e9 / dps : 0, r.p50_us, r.p99_us,
      r.decisions ? static_cast<double>(r.redis_calls) / static_cast<double>(r.decisions) : 0);
  std::fflush(stdout);
}

std::string Commas(double v) {
  std::string s = std::to_string(static_cast<int64_t>(v + 0.5));
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

int BenchRedisMain(const std::vector<std::string>& args) {
  BenchArgs a;
  for (const auto& x : args) {
    if (x == "--help" || x == "-h") {
      std::printf(
          "usage: tollgate bench redis [--redis-url redis://HOST:PORT] [--strategy "
          "lua,multicmd,watch"
          ",lua-single]\n  [--scenario hot_key,per_user] [--concurrency 1,16,64,256] [--seconds 3]"
          " [--json]\n  [--users 10000] [--rate 1e6] [--burst 1000000] [--connections 2]"
          " [--max-batch 256] [--inflight 4] [--deny-cache]\n");
      return 0;
    }
  }
  if (std::string err = ParseArgs(args, &a, false); !err.empty()) {
    std::fprintf(stderr, "tollgate bench redis: %s\n", err.c_str());
    return 2;
  }
  LimitSpec spec;
  spec.rate = a.rate;
  spec.burst = a.burst;
  auto limit = Limit::Create(spec);
  if (!limit.ok()) {
    std::fprintf(stderr, "tollgate bench redis: %s\n", limit.status().ToString().c_str());
    return 2;
  }
  std::vector<RunResult> results;
  for (const auto& scenario : a.scenarios) {
    std::vector<std::string> keys;
    const std::string run = std::to_string(getpid()) + ":" + std::to_string(WallNs() % 1000000000);
    const int n = scenario == "hot_key" ? 1 : a.users;
    for (int i = 0; i < n; ++i) keys.push_back("r" + run + ":user:" + std::to_string(i));
    for (int c : a.concurrency) {
      for (const auto& strategy : a.strategies) {
        RunResult r = (strategy == "lua" || strategy == "lua-single")
                          ? RunLua(a, strategy, scenario, c, *limit, keys)
                          : RunClientSide(a, strategy, scenario, c, *limit, keys);
        if (a.json) PrintJson(r);
        if (!r.first_error.empty()) {
          std::fprintf(stderr, "%s %s c=%d: %" PRIu64 " errors, first: %s\n", strategy.c_str(),
                       scenario.c_str(), c, r.errors, r.first_error.c_str());
        }
        results.push_back(std::move(r));
      }
    }
  }
  if (!a.json) {
    std::printf(
        "| scenario | concurrency | strategy | decisions/s | ns/op | p50 us | p99 us | "
        "redis calls/decision | errors |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& r : results) {
      const double dps = r.seconds > 0 ? static_cast<double>(r.decisions) / r.seconds : 0;
      std::printf(
          "| %s | %d | %s | %s | %s | %.0f | %.0f | %.3f | %" PRIu64 " |\n", r.scenario.c_str(),
          r.concurrency, r.strategy.c_str(), Commas(dps).c_str(),
          Commas(dps > 0 ? 1e9 / dps : 0).c_str(), r.p50_us, r.p99_us,
          r.decisions ? static_cast<double>(r.redis_calls) / static_cast<double>(r.decisions) : 0,
          r.errors);
    }
  }
  return 0;
}

// ---- overgrant ----

namespace {

struct OvergrantCounts {
  uint64_t allowed = 0, decisions = 0, errors = 0;
};

OvergrantCounts OvergrantOnce(const BenchArgs& a, const std::string& strategy,
                              const std::string& key, int callers, const Limit& limit,
                              SteadyClock::time_point start_at) {
  std::vector<std::string> keys = {key};
  RunResult r;
  if (strategy == "lua" || strategy == "lua-single") {
    auto store = OpenStore(a, strategy == "lua-single");
    if (!store.ok()) {
      std::fprintf(stderr, "overgrant: %s\n", store.status().ToString().c_str());
      return {0, 0, 1};
    }
    std::this_thread::sleep_until(start_at);
    LuaDriver d;
    d.store = store->store.get();
    d.limit = &limit;
    d.keys = &keys;
    d.hot = true;
    d.stop_at = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                         std::chrono::duration<double>(a.seconds));
    d.running.store(callers);
    for (int i = 0; i < callers; ++i) d.Issue(i);
    std::unique_lock<std::mutex> lock(d.mu);
    d.cv.wait(lock, [&] { return d.running.load() == 0; });
    if (!d.first_error.empty()) std::fprintf(stderr, "overgrant: %s\n", d.first_error.c_str());
    return {d.allowed.load(), d.decisions.load(), d.errors.load()};
  }
  r = RunClientSide(a, strategy, "hot_key", callers, limit, keys, start_at);
  return {r.allowed, r.decisions, r.errors};
}

}  // namespace

int BenchOvergrantMain(const std::vector<std::string>& args) {
  BenchArgs a;
  a.seconds = 3;
  a.concurrency = {64};
  a.strategies = {"lua", "multicmd", "watch"};
  a.rate = 10;
  a.burst = 10;
  for (const auto& x : args) {
    if (x == "--help" || x == "-h") {
      std::printf(
          "usage: tollgate bench overgrant [--redis-url URL] [--strategy lua,multicmd,watch]\n"
          "  [--processes 1] [--concurrency 64 (callers in total)] [--seconds 3] [--rate 10]"
          " [--burst 10] [--json]\n");
      return 0;
    }
  }
  if (std::string err = ParseArgs(args, &a, true); !err.empty()) {
    std::fprintf(stderr, "tollgate bench overgrant: %s\n", err.c_str());
    return 2;
  }
  LimitSpec spec;
  spec.rate = a.rate;
  spec.burst = a.burst;
  auto limit = Limit::Create(spec);
  if (!limit.ok()) {
    std::fprintf(stderr, "tollgate bench overgrant: %s\n", limit.status().ToString().c_str());
    return 2;
  }
  const int callers = a.concurrency.front();
  const double theoretical = static_cast<double>(a.burst) + a.rate * a.seconds;
  if (!a.json) {
    std::printf(
        "| strategy | processes | callers | allowed | theoretical max | over_grant | "
        "errors |\n|---|---|---|---|---|---|---|\n");
  }
  for (const auto& strategy : a.strategies) {
    const std::string key =
        "overgrant:" + std::to_string(getpid()) + ":" + std::to_string(WallNs()) + ":" + strategy;
    // Children connect first, then all start together.
    const auto start_at = SteadyClock::now() + std::chrono::milliseconds(500);
    OvergrantCounts total;
    std::vector<std::pair<pid_t, int>> children;
    for (int p = 0; p < a.processes; ++p) {
      const int mine = callers / a.processes + (p < callers % a.processes ? 1 : 0);
      int fds[2];
      if (pipe(fds) != 0) return 1;
      const pid_t pid = fork();
      if (pid < 0) return 1;
      if (pid == 0) {
        close(fds[0]);
        OvergrantCounts c = OvergrantOnce(a, strategy, key, mine, *limit, start_at);
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
      } else {
        total.errors += 1;
      }
      close(fd);
      int status = 0;
      waitpid(pid, &status, 0);
    }
    const double over = (static_cast<double>(total.allowed) - theoretical) / theoretical * 100.0;
    if (a.json) {
      std::printf(
          "{\"strategy\":\"%s\",\"processes\":%d,\"concurrency\":%d,\"seconds\":%.3f,"
          "\"burst\":%" PRId64 ",\"rate\":%g,\"allowed\":%" PRIu64
          ",\"theoretical_max\":%.0f,\"over_grant_pct\":%.2f,\"decisions\":%" PRIu64
          ",\"errors\":%" PRIu64 "}\n",
          strategy.c_str(), a.processes, callers, a.seconds, a.burst, a.rate, total.allowed,
          theoretical, over, total.decisions, total.errors);
    } else {
      std::printf("| %s | %d | %d | %" PRIu64 " | %.0f | %.2f%% | %" PRIu64 " |\n",
                  strategy.c_str(), a.processes, callers, total.allowed, theoretical, over,
                  total.errors);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace tollgate::cli
