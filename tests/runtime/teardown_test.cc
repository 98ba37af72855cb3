// tollgate::Runtime torn down while a store call is still in flight: the call's
// callback writes the Enforcer's rule state (an asynchronous lease release
// counts itself in RuleState), so the Runtime must destroy its store (which
// finishes or fails every pending call, running its callback) before its
// Enforcer. On a real redis-server stopped with SIGSTOP, so the release stays
// in flight until the store gives up on it during the teardown. Without that
// order the callback writes a freed RuleState: AddressSanitizer reports a
// heap-use-after-free in the sanitizer tree (the release build cannot see it).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "testing/redis_server.h"
#include "tollgate/request.h"
#include "tollgate/runtime.h"

namespace tollgate {
namespace {

constexpr char kPolicy[] = R"({"rules": [
  {"name": "inflight", "limit_keys": ["ip:address"], "algorithm": "concurrency",
   "algorithm_config": {"max_in_flight": 4, "lease": "30s"}}]})";

TEST(RuntimeTeardown, AReleaseInFlightWhenTheRuntimeGoesIsFinishedBeforeTheEngine) {
#if TOLLGATE_TEST_REDIS
  auto redis = testing::RedisServer::Start();
  if (redis.missing) GTEST_SKIP() << redis.error;
  ASSERT_TRUE(redis) << redis.error;
  RuntimeOptions options;
  options.policy.text = kPolicy;
  options.store.url = redis->url();
  options.enforcer.releases_leases = true;
  auto made = Runtime::Create(std::move(options));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Runtime> runtime = std::move(made).value();
  RequestView request{"GET", "/api/items", "", "192.0.2.7", {}};
  CheckOutcome held = runtime->enforcer().Check(request);
  ASSERT_TRUE(held.allowed()) << held.status.ToString();
  ASSERT_EQ(held.leases.size(), 1u);
  // Redis stops answering: the release below is sent and waits for its reply.
  redis->Pause();
  bool called = false;
  int64_t live = -1;
  runtime->enforcer().ReleaseAsync(held.leases, [&](int64_t n) {
    called = true;
    live = n;
  });
  runtime.reset();  // the store fails the pending release, then the Enforcer goes
  redis->Resume();
  EXPECT_TRUE(called) << "the store finished the pending call during the teardown";
  EXPECT_EQ(live, 0) << "a release the store could not make counts no live lease";
#else
  GTEST_SKIP() << "the Redis store is not part of this build";
#endif
}

}  // namespace
}  // namespace tollgate
