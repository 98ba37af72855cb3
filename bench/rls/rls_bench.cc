// rls_bench: decisions per second through the Envoy rate limit service over
// real gRPC on loopback. Starts an in-process RlsServer (local store, or Redis
// with --redis) unless --target points at a running one (e.g. tollgated
// --grpc), then drives it with asynchronous clients: --threads client threads,
// each with its own connection and --inflight calls outstanding.
//
//   rls_bench [--seconds 5] [--threads 2] [--inflight 32] [--keys 10000]
//             [--descriptors 1] [--server-threads-hint] [--redis HOST:PORT]
//             [--target HOST:PORT] [--direct 1] [--stream-end TOKENS]
//
// --stream-end N: the stream-end path (docs/envoy.md, "Costs known at stream
// end"): the rules are `charge_only` and every descriptor carries
// hits_addend N, so each call is a charge through the Enforcer's settlement
// (a peek, then Store::Settle) that is never refused.
//
// Prints calls/s, descriptor decisions/s, OK/OVER_LIMIT/error counts and
// latency percentiles. Not a test: no assertions on speed.
//
// --direct 1: no gRPC; --threads threads call RlsDecider::DecideSync in this
// process, in alternating rounds with the rules' Enforcer handles resolved
// when the configuration is attached and with a by-name lookup per descriptor
// (RlsDecideOptions::resolve_rule_handles), and print both rates and their
// ratio: one run, the same machine load for both.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/rls_decider.h"
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#include "tollgate/local_store.h"
#ifdef TOLLGATE_RLS_BENCH_REDIS
#include "tollgate/redis_store.h"
#endif

namespace pb = envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  double seconds = 5;
  int threads = 2;
  int inflight = 32;
  int keys = 10000;
  int descriptors = 1;
  std::string redis;
  std::string target;
  std::string algorithm = "token_bucket";
  bool direct = false;
  uint64_t stream_end = 0;  // > 0: charge_only rules, every descriptor costs this
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--seconds")
      a.seconds = std::atof(v.c_str());
    else if (k == "--threads")
      a.threads = std::atoi(v.c_str());
    else if (k == "--inflight")
      a.inflight = std::atoi(v.c_str());
    else if (k == "--keys")
      a.keys = std::atoi(v.c_str());
    else if (k == "--descriptors")
      a.descriptors = std::atoi(v.c_str());
    else if (k == "--redis")
      a.redis = v;
    else if (k == "--target")
      a.target = v;
    else if (k == "--algorithm")
      a.algorithm = v;
    else if (k == "--direct")
      a.direct = v != "0";
    else if (k == "--stream-end")
      a.stream_end = std::strtoull(v.c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Call {
  grpc::ClientContext ctx;
  pb::RateLimitRequest req;
  pb::RateLimitResponse resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::RateLimitResponse>> rpc;
  Clock::time_point start;
};

struct Totals {
  std::atomic<uint64_t> calls{0}, ok{0}, over{0}, errors{0};
};

// Descriptor `d` of call `seq`: user / tenant, a value spread over a.keys.
void AddDescriptor(const Args& a, pb::RateLimitRequest* req, int d, uint64_t seq) {
  auto* desc = req->add_descriptors();
  auto* e = desc->add_entries();
  e->set_key(d == 0 ? "user" : "tenant");
  e->set_value("u" + std::to_string((seq * 2654435761u + static_cast<uint64_t>(d)) %
                                    static_cast<uint64_t>(a.keys)));
  if (a.stream_end > 0) desc->mutable_hits_addend()->set_value(a.stream_end);
}

void Client(const Args& a, const std::string& address, int id, Clock::time_point stop,
            Totals* totals, std::vector<int64_t>* latencies_ns) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // own connection per thread
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::RateLimitService::NewStub(channel);
  grpc::CompletionQueue cq;
  uint64_t seq = static_cast<uint64_t>(id) * 7919;
  auto start_call = [&] {
    auto* c = new Call;
    c->req.set_domain("bench");
    for (int d = 0; d < a.descriptors; ++d) AddDescriptor(a, &c->req, d, seq);
    ++seq;
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    c->start = Clock::now();
    c->rpc = stub->PrepareAsyncShouldRateLimit(&c->ctx, c->req, &cq);
    c->rpc->StartCall();
    c->rpc->Finish(&c->resp, &c->status, c);
  };
  int outstanding = 0;
  for (int i = 0; i < a.inflight; ++i, ++outstanding) start_call();
  void* tag;
  bool ok;
  while (outstanding > 0 && cq.Next(&tag, &ok)) {
    auto* c = static_cast<Call*>(tag);
    --outstanding;
    const auto now = Clock::now();
    if (c->status.ok()) {
      totals->calls.fetch_add(1, std::memory_order_relaxed);
      (c->resp.overall_code() == pb::RateLimitResponse::OK ? totals->ok : totals->over)
          .fetch_add(1, std::memory_order_relaxed);
      if (latencies_ns->size() < 2'000'000) {
        latencies_ns->push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - c->start).count());
      }
    } else {
      totals->errors.fetch_add(1, std::memory_order_relaxed);
    }
    delete c;
    if (now < stop) {
      start_call();
      ++outstanding;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

pb::RateLimitRequest MakeRequest(const Args& a, uint64_t seq) {
  pb::RateLimitRequest req;
  req.set_domain("bench");
  for (int d = 0; d < a.descriptors; ++d) AddDescriptor(a, &req, d, seq);
  return req;
}

// Decisions per second of `decider` on a.threads threads for `seconds`.
double DirectRound(const Args& a, tollgate::rls::RlsDecider& decider, double seconds) {
  std::atomic<uint64_t> calls{0};
  const auto stop = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds));
  const auto begin = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < a.threads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<pb::RateLimitRequest> requests;
      for (uint64_t i = 0; i < 1024; ++i) {
        requests.push_back(MakeRequest(a, static_cast<uint64_t>(t) * 7919 + i));
      }
      pb::RateLimitResponse response;
      uint64_t n = 0;
      while (Clock::now() < stop) {
        for (int k = 0; k < 64; ++k) (void)decider.DecideSync(requests[n++ % 1024], &response);
      }
      calls.fetch_add(n, std::memory_order_relaxed);
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  return static_cast<double>(calls.load()) * a.descriptors / elapsed;
}

// The Enforcer a standalone decider decides on (it makes none): over an
// empty policy, as every Envoy item names its own rule. Exits on failure.
std::unique_ptr<tollgate::Enforcer> StandaloneEnforcer(tollgate::Store* store) {
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": []})");
  auto made = policies.ok()
                  ? tollgate::Enforcer::Create(std::move(policies).value(), store,
                                               &tollgate::SystemClock::Instance())
                  : tollgate::Result<std::unique_ptr<tollgate::Enforcer>>(policies.status());
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(made).value();
}

// A standalone decider on `enforcer`; exits on failure.
std::unique_ptr<tollgate::rls::RlsDecider> Decider(
    tollgate::Enforcer& enforcer, std::shared_ptr<const tollgate::rls::RlsConfig> config,
    tollgate::rls::RlsDecideOptions options) {
  auto made = tollgate::rls::RlsDecider::Standalone(&enforcer, std::move(config),
                                                    &tollgate::SystemClock::Instance(), options);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(made).value();
}

// --direct: handles vs by-name lookups, alternating rounds in one run.
int RunDirect(const Args& a, tollgate::Store* store,
              std::shared_ptr<const tollgate::rls::RlsConfig> config,
              const std::string& store_name) {
  tollgate::rls::RlsDecideOptions with_handles, by_name;
  by_name.resolve_rule_handles = false;
  // One Enforcer each: a standalone decider's configuration is its Enforcer's attachment.
  const std::unique_ptr<tollgate::Enforcer> handles_enforcer = StandaloneEnforcer(store);
  const std::unique_ptr<tollgate::Enforcer> names_enforcer = StandaloneEnforcer(store);
  auto handles_decider = Decider(*handles_enforcer, config, with_handles);
  auto names_decider = Decider(*names_enforcer, config, by_name);
  tollgate::rls::RlsDecider& handles = *handles_decider;
  tollgate::rls::RlsDecider& names = *names_decider;
  DirectRound(a, handles, 0.2);  // warm-up: key inserts
  constexpr int kRounds = 6;
  double sum_handles = 0, sum_names = 0;
  for (int r = 0; r < kRounds; ++r) {
    const double slice = a.seconds / (2 * kRounds);
    if (r % 2 == 0) {
      sum_names += DirectRound(a, names, slice);
      sum_handles += DirectRound(a, handles, slice);
    } else {
      sum_handles += DirectRound(a, handles, slice);
      sum_names += DirectRound(a, names, slice);
    }
  }
  const double h = sum_handles / kRounds, n = sum_names / kRounds;
  std::printf(
      "direct store=%s algorithm=%s threads=%d keys=%d descriptors=%d seconds=%.2f\n"
      "decisions/s handles=%.0f by_name=%.0f ratio=%.3f\n",
      store_name.c_str(), a.algorithm.c_str(), a.threads, a.keys, a.descriptors, a.seconds, h, n,
      n > 0 ? h / n : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  std::unique_ptr<tollgate::Store> store;
  std::unique_ptr<tollgate::Enforcer> enforcer;  // the server's; outlives it
  std::unique_ptr<tollgate::rls::RlsServer> server;
  std::string address = a.target;
  std::string store_name = "external";
  if (address.empty()) {
    if (!a.redis.empty()) {
#ifdef TOLLGATE_RLS_BENCH_REDIS
      auto opts = tollgate::ParseRedisUrl("redis://" + a.redis);
      if (!opts.ok()) {
        std::fprintf(stderr, "%s\n", opts.status().ToString().c_str());
        return 1;
      }
      auto r = tollgate::RedisStore::Create(*opts);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      store = std::move(*r);
      store_name = "redis " + a.redis;
#else
      std::fprintf(stderr, "built without the Redis store\n");
      return 1;
#endif
    } else {
      tollgate::LocalStoreOptions lo;
      lo.max_keys = static_cast<size_t>(std::max(a.keys * 4, 1 << 16));
      auto l = tollgate::LocalStore::Create(lo);
      if (!l.ok()) return 1;
      store = std::move(*l);
      store_name = "local";
    }
    // Limits high enough that every call is decided in full (no early-outs).
    const std::string charge = a.stream_end > 0 ? "    charge_only: true\n" : "";
    const std::string yaml =
        "domain: bench\ndescriptors:\n"
        "  - key: user\n" +
        charge +
        "    rate_limit: {unit: second, requests_per_unit: 1000000, algorithm: " + a.algorithm +
        "}\n"
        "  - key: tenant\n" +
        charge +
        "    rate_limit: {unit: second, requests_per_unit: 1000000, algorithm: " + a.algorithm +
        "}\n";
    auto parsed = tollgate::rls::LoadRlsConfigYaml(yaml);
    if (!parsed.config) {
      for (const auto& e : parsed.errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
      return 1;
    }
    if (a.direct) return RunDirect(a, store.get(), parsed.config, store_name);
    tollgate::rls::RlsServerOptions o;
    o.address = "127.0.0.1:0";
    enforcer = StandaloneEnforcer(store.get());
    o.enforcer = enforcer.get();
    o.config = parsed.config;
    auto s = tollgate::rls::StartRlsServer(o);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    server = std::move(*s);
    address = server->address();
  }
  Totals totals;
  std::vector<std::vector<int64_t>> lat(static_cast<size_t>(a.threads));
  // Warm-up: connections and key inserts.
  {
    Totals warm;
    std::vector<int64_t> l;
    Client(a, address, 99, Clock::now() + std::chrono::milliseconds(300), &warm, &l);
  }
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const double cpu_begin = cpu_seconds();
  const auto begin = Clock::now();
  const auto stop =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < a.threads; ++t) {
    threads.emplace_back(Client, std::cref(a), address, t, stop, &totals,
                         &lat[static_cast<size_t>(t)]);
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  const double cpu = cpu_seconds() - cpu_begin;
  std::vector<int64_t> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    return static_cast<double>(all[static_cast<size_t>(p * static_cast<double>(all.size() - 1))]) /
           1e3;
  };
  const double calls = static_cast<double>(totals.calls.load());
  std::printf(
      "store=%s algorithm=%s threads=%d inflight=%d keys=%d descriptors=%d stream_end=%llu "
      "seconds=%.2f\n"
      "calls/s=%.0f decisions/s=%.0f ok=%llu over=%llu errors=%llu "
      "latency_us p50=%.0f p99=%.0f p999=%.0f cpu_us_per_call=%.1f (client+server, this process)\n",
      store_name.c_str(), a.algorithm.c_str(), a.threads, a.inflight, a.keys, a.descriptors,
      static_cast<unsigned long long>(a.stream_end), elapsed, calls / elapsed,
      calls * a.descriptors / elapsed, static_cast<unsigned long long>(totals.ok.load()),
      static_cast<unsigned long long>(totals.over.load()),
      static_cast<unsigned long long>(totals.errors.load()), pct(0.5), pct(0.99), pct(0.999),
      calls > 0 ? cpu * 1e6 / calls : 0.0);
  if (server) server->Shutdown();
  return 0;
}
