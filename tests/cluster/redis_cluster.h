// RedisCluster: a real Redis Cluster for integration tests.
//
// Starts masters (+ replicas) as redis-server processes on free loopback
// ports (cluster bus ports free too) with persistence off, joins them with
// `redis-cli --cluster create ... --cluster-yes`, and waits (bounded, polling)
// until every node reports cluster_state:ok with all 16384 slots assigned.
//
// Thread safety: drive it from the test thread. Ownership: owns the servers
// (see RedisServer); the destructor kills them and removes their directories.
#ifndef TOLLGATE_TESTS_CLUSTER_REDIS_CLUSTER_H_
#define TOLLGATE_TESTS_CLUSTER_REDIS_CLUSTER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "testing/redis_server.h"

namespace tollgate::testing {

class RedisCluster {
 public:
  struct Options {
    int masters = 3;
    int replicas_per_master = 0;
    int node_timeout_ms = 1000;  // failure detection, so failover tests stay short
  };
  struct StartResult {
    std::unique_ptr<RedisCluster> cluster;
    std::string error;
    bool missing = false;  // redis-server or redis-cli not installed
  };
  static StartResult Start(Options options);

  // "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,..." (every node as a seed).
  std::string url() const;
  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_[i]; }
  // Index of the node that currently serves `slot` as master (asks node 0, or
  // the first node that answers), -1 if unknown.
  int MasterOfSlot(int slot);
  std::string NodeId(size_t i);
  // Waits (bounded) until every running node reports cluster_state:ok.
  bool WaitHealthy(std::chrono::milliseconds deadline);

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

// Skips when redis-server/redis-cli are missing; fails when the cluster cannot start.
#define TOLLGATE_START_REDIS_CLUSTER(var, opts)                      \
  auto var##_start = ::tollgate::testing::RedisCluster::Start(opts); \
  if (var##_start.missing) GTEST_SKIP() << var##_start.error;        \
  ASSERT_TRUE(var##_start.cluster != nullptr) << var##_start.error;  \
  ::tollgate::testing::RedisCluster& var = *var##_start.cluster

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_CLUSTER_REDIS_CLUSTER_H_
