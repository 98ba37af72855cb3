// `tollgate bench <target>`: end-to-end benchmarks against real servers.
//   tollgate bench redis      decisions/s, latency and Redis calls per decision
//   tollgate bench overgrant  the seed's correctness test (burst 10, 10/s, 3 s): allowed vs
//                             burst + rate * the span the grants really took
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

namespace tollgate::cli {
namespace bench {
int RedisMain(const std::vector<std::string>& args);      // cmd_bench_redis.cc
int OvergrantMain(const std::vector<std::string>& args);  // cmd_bench_overgrant.cc
}  // namespace bench

namespace {

int BenchMain(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fprintf(args.empty() ? stderr : stdout,
                 "usage: tollgate bench <target> [options]\n\n"
                 "targets:\n"
                 "  redis      throughput and latency of lua|multicmd|watch on one Redis\n"
                 "  overgrant  burst 10, rate 10/s, 3 s, 64 callers on one key: allowed vs\n"
                 "             burst + rate * span (~40; span measured in the store's clock)\n\n"
                 "`tollgate bench <target> --help` lists a target's options.\n");
    return args.empty() ? 2 : 0;
  }
  const std::string target = args[0];
  args.erase(args.begin());
  if (target == "redis") return bench::RedisMain(args);
  if (target == "overgrant") return bench::OvergrantMain(args);
  std::fprintf(stderr, "tollgate bench: unknown target '%s' (redis, overgrant)\n", target.c_str());
  return 2;
}

const Registration kBench({"bench", "benchmark stores end to end (redis, overgrant)", BenchMain});

}  // namespace
}  // namespace tollgate::cli
