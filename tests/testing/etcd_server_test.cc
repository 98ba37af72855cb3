// The EtcdServer fixture: starts, answers the v3 gateway, keeps its data over
// a restart on the same ports, and goes away when killed.
#include "testing/etcd_server.h"

#include <gtest/gtest.h>

#include "runtime/etcd_reply.h"

namespace tollgate::testing {
namespace {

TEST(EtcdServerFixture, PutRangeKillRestart) {
  auto etcd = EtcdServer::Start();
  if (etcd.missing) GTEST_SKIP() << etcd.error;
  ASSERT_TRUE(etcd) << etcd.error;
  const int64_t rev = etcd->Put("/tollgate/policy", R"({"rules":[]})");
  ASSERT_GT(rev, 0);
  bool ok = false;
  auto range = etcd::ParseRangeReply(
      etcd->Post("/v3/kv/range", etcd::RangeRequest("/tollgate/policy"), &ok));
  ASSERT_TRUE(ok);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_TRUE(range->kv);
  EXPECT_EQ(range->kv->value, R"({"rules":[]})");
  EXPECT_EQ(range->kv->mod_revision, rev);

  etcd->Kill();
  etcd->Post("/v3/kv/range", etcd::RangeRequest("/tollgate/policy"), &ok);
  EXPECT_FALSE(ok);
  ASSERT_EQ(etcd->Restart(), "");
  EXPECT_GT(etcd->Put("/tollgate/policy", "{}"), rev);  // the same data: revisions continue
  EXPECT_TRUE(etcd->Compact(rev));
}

}  // namespace
}  // namespace tollgate::testing
