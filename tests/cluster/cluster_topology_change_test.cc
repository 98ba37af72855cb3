// A node the cluster topology stops naming has its client closed: its
// connections go away (seen from the node itself, a fake Redis here) and the
// store counts it in Stats().retired_nodes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "testing/hostile_redis.h"
#include "testing/timing.h"
#include "tollgate/redis_cluster_store.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

TEST(ClusterTopologyChange, ANodeLeavingTheTopologyHasItsConnectionsClosed) {
  HostileRedis::Options o;
  o.reply = HostileRedis::Reply::kValidTopology;
  o.answer_script_load = true;
  std::string error;
  auto a = HostileRedis::Start(o, &error);
  ASSERT_TRUE(a) << error;
  auto b = HostileRedis::Start(o, &error);
  ASSERT_TRUE(b) << error;
  // First every slot is b's (both say so); a is only the seed.
  a->SetTopologyPort(b->port());

  RedisClusterOptions options;
  options.seeds = {"127.0.0.1:" + std::to_string(a->port())};
  options.refresh_interval = 10ms;
  options.periodic_refresh = 50ms;
  auto store = RedisClusterStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return b->open_connections() > 0; })) << "never connected to b";
  EXPECT_EQ((*store)->Stats().retired_nodes, 0u);

  // Now every slot is a's: b has left the cluster.
  b->SetTopologyPort(a->port());
  a->SetTopologyPort(0);
  EXPECT_TRUE(WaitFor([&] { return b->open_connections() == 0; }))
      << b->open_connections() << " connections to the removed node still open";
  // Counted once the node's connections are closed, not before: wait for the
  // count too (CI's ASan tree read it between the two: 0).
  EXPECT_TRUE(WaitFor([&] { return (*store)->Stats().retired_nodes >= 1u; }))
      << (*store)->Stats().retired_nodes;
  EXPECT_GT(a->open_connections(), 0u);  // the remaining node keeps its clients
}

}  // namespace
}  // namespace tollgate::testing
