// `tollgate bench redis`: the seed benchmark (Lua vs multi-command vs WATCH
// token buckets on Redis), reproduced; and the drivers `tollgate bench
// overgrant` shares (see bench_redis.h for the strategies).
#include "bench_redis.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/redact.h"
#include "tollgate/algorithm.h"
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#include "tollgate/store_spec.h"

namespace tollgate::cli {
namespace bench {
namespace {

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

uint64_t NextRandom(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

void AtomicMin(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load();
  while (v < cur && !a.compare_exchange_weak(cur, v)) {
  }
}

void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load();
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

}  // namespace

std::string ParseBenchArgs(const std::vector<std::string>& args, BenchArgs* a, bool overgrant) {
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

int StartBench(const std::vector<std::string>& args, const char* command, const char* usage,
               bool overgrant, BenchArgs* a, std::optional<Limit>* limit) {
  for (const auto& x : args) {
    if (x == "--help" || x == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
  }
  if (std::string err = ParseBenchArgs(args, a, overgrant); !err.empty()) {
    std::fprintf(stderr, "%s: %s\n", command, err.c_str());
    return 2;
  }
  LimitSpec spec;
  spec.rate = a->rate;
  spec.burst = a->burst;
  auto made = Limit::Create(spec);
  if (!made.ok()) {
    std::fprintf(stderr, "%s: %s\n", command, made.status().ToString().c_str());
    return 2;
  }
  limit->emplace(*made);
  return -1;
}

bool IsClusterUrl(std::string_view url) {
  auto scheme = StoreSchemeOf(url);  // the one store grammar (tollgate/store_spec.h)
  return scheme.ok() && *scheme == StoreScheme::kRedisCluster;
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Histogram::Histogram() : counts_(new std::atomic<uint64_t>[kBuckets]) {
  for (size_t i = 0; i < kBuckets; ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Record(SteadyClock::duration d) {
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  counts_[static_cast<size_t>(std::clamp<int64_t>(us, 0, kBuckets - 1))].fetch_add(
      1, std::memory_order_relaxed);
}

double Histogram::Percentile(double p) const {
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

// ---- lua / lua-single: RedisStore driven by async chains ----

void LuaDriver::Run(int callers) {
  running.store(callers);
  for (int i = 0; i < callers; ++i) Issue(i);
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return running.load() == 0; });
}

void LuaDriver::Issue(int caller) {
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
                          if (on_grant) on_grant();
                        }
                        Issue(caller);
                      });
}

Result<BenchStore> OpenStore(const BenchArgs& a, bool single) {
  const bool cluster = IsClusterUrl(a.url);
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
    out.redis_key = [raw](std::string_view key) { return raw->RedisKeyFor(key); };
    out.store = std::move(*s);
  } else {
    auto s = RedisStore::Create(*o);
    if (!s.ok()) return s.status();
    RedisStore* raw = s->get();
    out.script_calls = [raw] { return raw->Stats().script_calls; };
    out.redis_key = [raw](std::string_view key) { return raw->RedisKeyFor(key); };
    out.store = std::move(*s);
  }
  // Wait (bounded) for the connections (and cluster topology) so the run measures decisions.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (!out.store->Healthy() && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!out.store->Healthy())
    return ConnectionError("redis " + base::RedactUrl(a.url) + ": not reachable");
  return out;
}

namespace {

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
  d.Run(concurrency);
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

uint64_t ParseTat(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return 0;
  return std::strtoull(r->str, nullptr, 10);
}

// One decision, client-side computed; returns false on a Redis error.
// `calls` counts Redis commands sent; *decided_at is the wall-clock `now` the
// deciding attempt's step used.
bool ClientSideDecision(redisContext* c, const std::string& key, const Limit& limit, bool watch,
                        bool* allowed, uint64_t* calls, int64_t* decided_at) {
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
    *decided_at = now;
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

}  // namespace

RunResult RunClientSide(const BenchArgs& a, const std::string& strategy,
                        const std::string& scenario, int concurrency, const Limit& limit,
                        const std::vector<std::string>& keys, SteadyClock::time_point start_at) {
  RunResult res;
  res.strategy = strategy;
  res.scenario = scenario;
  res.concurrency = concurrency;
  if (IsClusterUrl(a.url)) {
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
  std::atomic<int64_t> first_decision{INT64_MAX}, last_grant{0};
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
      int64_t my_first = INT64_MAX, my_last_grant = 0;
      redisContext* c = conns[static_cast<size_t>(i)]->c;
      while (SteadyClock::now() < stop_at) {
        const std::string& key = hot ? keys[0] : keys[NextRandom(rng) % keys.size()];
        const auto t0 = SteadyClock::now();
        bool ok_allowed = false;
        int64_t at = 0;
        const bool ok = ClientSideDecision(c, key, limit, watch, &ok_allowed, &my_calls, &at);
        hist.Record(SteadyClock::now() - t0);
        ++my_decisions;
        if (!ok) {
          ++my_errors;
          if (c->err) break;  // the connection is gone
          continue;
        }
        my_first = std::min(my_first, at);
        if (ok_allowed) {
          ++my_allowed;
          my_last_grant = std::max(my_last_grant, at);
        }
      }
      decisions += my_decisions;
      allowed += my_allowed;
      errors += my_errors;
      calls += my_calls;
      AtomicMin(first_decision, my_first);
      AtomicMax(last_grant, my_last_grant);
    });
  }
  for (auto& t : threads) t.join();
  res.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  res.decisions = decisions;
  res.allowed = allowed;
  res.errors = errors;
  res.redis_calls = calls;
  res.first_decision_ns = first_decision == INT64_MAX ? 0 : first_decision.load();
  res.last_grant_ns = last_grant;
  res.p50_us = hist.Percentile(0.50);
  res.p99_us = hist.Percentile(0.99);
  if (res.errors > 0 && res.first_error.empty()) {
    res.first_error = watch ? "WATCH retries exhausted (20)" : "redis error";
  }
  return res;
}

namespace {

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

int RedisMain(const std::vector<std::string>& args) {
  BenchArgs a;
  std::optional<Limit> limit;
  const int exit_code = StartBench(
      args, "tollgate bench redis",
      "usage: tollgate bench redis [--redis-url redis://HOST:PORT] [--strategy "
      "lua,multicmd,watch,lua-single]\n  [--scenario hot_key,per_user] [--concurrency "
      "1,16,64,256] [--seconds 3] [--json]\n  [--users 10000] [--rate 1e6] [--burst 1000000] "
      "[--connections 2] [--max-batch 256] [--inflight 4] [--deny-cache]\n",
      false, &a, &limit);
  if (exit_code >= 0) return exit_code;
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

}  // namespace bench
}  // namespace tollgate::cli
