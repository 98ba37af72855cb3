// rlqs_bench: Rate Limit Quota Service assignment rounds per second through real gRPC on
// loopback (docs/envoy.md, "Rate Limit Quota Service"). Starts an in-process RlsServer with
// an RlqsQuota (local store, or Redis with --redis), then --streams client threads, each with
// its own connection and one StreamRateLimitQuotas stream, each reporting --buckets buckets per
// message and waiting for the answer before the next report.
//
//   rlqs_bench [--seconds 5] [--streams 4] [--buckets 1] [--shared 1] [--redis HOST:PORT]
//
// Every report is an assignment round: the bench sets RlqsOptions::min_round to 1 us (the
// server's default, 100 ms, re-sends the current assignment to faster reporters without
// acquiring). --shared 1: every stream reports the same buckets (one split, one store bucket
// each); 0: each stream its own users.
//
// Prints rounds/s in all and per stream, assignments (bucket actions) per second, the store
// calls per round (Store::Acquire calls counted by a wrapper around the store, over the rounds
// RlqsQuota counted), and the report-to-assignment latency. Not a test: no assertions on speed.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "rls/rlqs_quota.h"
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#include "tollgate/local_store.h"
#ifdef TOLLGATE_RLS_BENCH_REDIS
#include "tollgate/redis_store.h"
#endif

namespace rlqspb = ::envoy::service::rate_limit_quota::v3;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  double seconds = 5;
  int streams = 4;
  int buckets = 1;
  bool shared = true;
  std::string redis;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--seconds") {
      a.seconds = std::atof(v);
    } else if (k == "--streams") {
      a.streams = std::max(1, std::atoi(v));
    } else if (k == "--buckets") {
      a.buckets = std::clamp(std::atoi(v), 1, 1000);
    } else if (k == "--shared") {
      a.shared = std::atoi(v) != 0;
    } else if (k == "--redis") {
      a.redis = v;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Counts Store::Acquire calls (each one store round trip: one EVALSHA on Redis).
class CountingStore final : public tollgate::Store {
 public:
  explicit CountingStore(tollgate::Store* inner) : inner_(inner) {}
  tollgate::Result<tollgate::BatchDecision> Acquire(
      std::span<const tollgate::AcquireItem> items) override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    return inner_->Acquire(items);
  }
  void AcquireAsync(std::span<const tollgate::AcquireItem> items, Callback done) override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    inner_->AcquireAsync(items, std::move(done));
  }
  std::string Name() const override { return inner_->Name(); }
  bool AsyncNative() const override { return inner_->AsyncNative(); }
  bool Healthy() const override { return inner_->Healthy(); }
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }

 private:
  tollgate::Store* inner_;
  std::atomic<uint64_t> calls_{0};
};

struct Totals {
  std::atomic<uint64_t> responses{0};
  std::atomic<uint64_t> actions{0};
  std::atomic<uint64_t> errors{0};
};

rlqspb::RateLimitQuotaUsageReports MakeReport(const Args& a, int stream, bool first) {
  rlqspb::RateLimitQuotaUsageReports r;
  if (first) r.set_domain("bench");
  for (int b = 0; b < a.buckets; ++b) {
    auto& u = (*r.mutable_bucket_quota_usages())[static_cast<uint64_t>(b + 1)];
    auto& id = *u.mutable_bucket_id()->mutable_bucket();
    id["name"] = "api";
    id["user"] = "u" + std::to_string(a.shared ? b : stream * a.buckets + b);
    u.set_num_requests_allowed(100);
    u.mutable_time_elapsed()->set_nanos(1'000'000);
  }
  return r;
}

void Stream(const Args& a, const std::string& address, int id, Clock::time_point stop,
            Totals* totals, std::vector<int64_t>* latencies) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.channel_id", id);  // its own connection
  auto stub = rlqspb::RateLimitQuotaService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  auto stream = stub->StreamRateLimitQuotas(&ctx);
  const rlqspb::RateLimitQuotaUsageReports first = MakeReport(a, id, true);
  const rlqspb::RateLimitQuotaUsageReports next = MakeReport(a, id, false);
  rlqspb::RateLimitQuotaResponse resp;
  bool is_first = true;
  while (Clock::now() < stop) {
    const auto t0 = Clock::now();
    if (!stream->Write(is_first ? first : next) || !stream->Read(&resp)) {
      totals->errors.fetch_add(1);
      break;
    }
    is_first = false;
    latencies->push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    totals->responses.fetch_add(1, std::memory_order_relaxed);
    totals->actions.fetch_add(static_cast<uint64_t>(resp.bucket_action_size()),
                              std::memory_order_relaxed);
  }
  stream->WritesDone();
  stream->Finish();
}

uint64_t Rounds(const tollgate::rls::RlqsQuota& quota) {
  uint64_t n = 0;
  for (const auto& c : quota.Counters()) n += c.rounds;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  std::unique_ptr<tollgate::Store> backing;
  std::string store_name = "local";
  if (!a.redis.empty()) {
#ifdef TOLLGATE_RLS_BENCH_REDIS
    auto opts = tollgate::ParseRedisUrl("redis://" + a.redis);
    auto r = opts.ok() ? tollgate::RedisStore::Create(*opts)
                       : tollgate::Result<std::unique_ptr<tollgate::RedisStore>>(opts.status());
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    backing = std::move(*r);
    store_name = "redis " + a.redis;
#else
    std::fprintf(stderr, "built without the Redis store\n");
    return 1;
#endif
  } else {
    auto l = tollgate::LocalStore::Create({});
    if (!l.ok()) return 1;
    backing = std::move(*l);
  }
  CountingStore store(backing.get());
  // A limit high enough that every round is granted in full (one store call per round).
  auto parsed = tollgate::rls::LoadRlsConfigYaml(
      "domain: bench\ndescriptors:\n  - key: name\n    value: api\n    descriptors:\n"
      "      - key: user\n        rate_limit: {unit: second, requests_per_unit: 1000000}\n");
  if (!parsed.config) {
    for (const auto& e : parsed.errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
    return 1;
  }
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": []})");
  if (!policies.ok()) return 1;
  auto enforcer = tollgate::Enforcer::Create(std::move(policies).value(), &store,
                                             &tollgate::SystemClock::Instance());
  if (!enforcer.ok()) {
    std::fprintf(stderr, "%s\n", enforcer.status().ToString().c_str());
    return 1;
  }
  tollgate::rls::RlqsOptions qo;
  qo.min_round = std::chrono::microseconds(1);
  qo.max_streams = static_cast<size_t>(a.streams) + 1;
  const std::shared_ptr<const tollgate::rls::RlsConfig> config = parsed.config;
  auto quota = tollgate::rls::RlqsQuota::Create(
      enforcer->get(), [config] { return config; }, &tollgate::SystemClock::Instance(), qo);
  if (!quota.ok()) {
    std::fprintf(stderr, "%s\n", quota.status().ToString().c_str());
    return 1;
  }
  tollgate::rls::RlsServerOptions o;
  o.address = "127.0.0.1:0";
  o.enforcer = enforcer->get();
  o.config = config;
  o.rlqs = quota->get();
  auto server = tollgate::rls::StartRlsServer(o);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string address = (*server)->address();
  {  // warm-up: connections, the buckets' first acquisitions
    Totals warm;
    std::vector<int64_t> l;
    Stream(a, address, 999, Clock::now() + std::chrono::milliseconds(300), &warm, &l);
  }
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  Totals totals;
  std::vector<std::vector<int64_t>> lat(static_cast<size_t>(a.streams));
  const uint64_t rounds_begin = Rounds(**quota);
  const uint64_t calls_begin = store.calls();
  const double cpu_begin = cpu_seconds();
  const auto begin = Clock::now();
  const auto stop =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  std::vector<std::thread> threads;
  for (int s = 0; s < a.streams; ++s) {
    threads.emplace_back(Stream, std::cref(a), address, s, stop, &totals,
                         &lat[static_cast<size_t>(s)]);
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  const double cpu = cpu_seconds() - cpu_begin;
  const double rounds = static_cast<double>(Rounds(**quota) - rounds_begin);
  const double calls = static_cast<double>(store.calls() - calls_begin);
  std::vector<int64_t> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    return static_cast<double>(all[static_cast<size_t>(p * static_cast<double>(all.size() - 1))]) /
           1e3;
  };
  const double responses = static_cast<double>(totals.responses.load());
  std::printf(
      "store=%s streams=%d buckets=%d shared=%d seconds=%.2f\n"
      "rounds/s=%.0f per_stream=%.0f assignments/s=%.0f store_calls/round=%.3f errors=%llu "
      "latency_us p50=%.0f p99=%.0f cpu_us_per_report=%.1f (client+server, this process)\n",
      store_name.c_str(), a.streams, a.buckets, a.shared ? 1 : 0, elapsed, rounds / elapsed,
      rounds / elapsed / a.streams, static_cast<double>(totals.actions.load()) / elapsed,
      rounds > 0 ? calls / rounds : 0.0, static_cast<unsigned long long>(totals.errors.load()),
      pct(0.5), pct(0.99), responses > 0 ? cpu * 1e6 / responses : 0.0);
  (*server)->Shutdown();
  return 0;
}
