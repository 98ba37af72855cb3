// Test helpers shared by the RLQS tests (rlqs_quota_test without a socket, rlqs_grpc_test over
// real gRPC): an RlqsQuota on a LocalStore and a standalone Enforcer whose rule files a test can
// swap (a reload), usage reports, and the tokens an assignment gives.
//
// Ownership: RlqsHarness owns the store, the Enforcer and the quota (destroyed quota first);
// the clock is borrowed and must outlive it. Thread safety: the configuration source it hands
// the quota may be read from any thread (a mutex guards the swap); the rest is the test's thread.
#ifndef TOLLGATE_TESTS_RLS_RLQS_FIXTURE_H_
#define TOLLGATE_TESTS_RLS_RLQS_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "rls/rlqs_quota.h"
#include "rls/rls_test_util.h"
#include "standalone_enforcer.h"
#include "tollgate/local_store.h"

namespace tollgate::rls::testing {

using Reports = rlqspb::RateLimitQuotaUsageReports;
using Response = rlqspb::RateLimitQuotaResponse;
using Strategy = ::envoy::type::v3::RateLimitStrategy;
inline constexpr int64_t kSecond = 1'000'000'000;

// Adds bucket `id` = `bucket` to `r` with its counts and time_elapsed.
inline void AddUsage(Reports* r, uint64_t id, const std::map<std::string, std::string>& bucket,
                     uint64_t allowed, uint64_t denied, int64_t elapsed_ns) {
  auto& u = (*r->mutable_bucket_quota_usages())[id];
  for (const auto& [k, v] : bucket) (*u.mutable_bucket_id()->mutable_bucket())[k] = v;
  u.set_num_requests_allowed(allowed);
  u.set_num_requests_denied(denied);
  u.mutable_time_elapsed()->set_seconds(elapsed_ns / kSecond);
  u.mutable_time_elapsed()->set_nanos(static_cast<int32_t>(elapsed_ns % kSecond));
}

// One report of bucket 7 = {name: api, user: `user`} in `domain`.
inline Reports Report(const std::string& domain, uint64_t allowed, uint64_t denied = 0,
                      int64_t elapsed_ns = kSecond, const std::string& user = "alice") {
  Reports r;
  r.set_domain(domain);
  AddUsage(&r, 7, {{"name", "api"}, {"user", user}}, allowed, denied, elapsed_ns);
  return r;
}

// The one action of `resp` (expects exactly one; an empty action when there is none).
inline const Response::BucketAction& Only(const Response& resp) {
  EXPECT_EQ(resp.bucket_action_size(), 1);
  return resp.bucket_action_size() > 0 ? resp.bucket_action(0)
                                       : Response::BucketAction::default_instance();
}

// Tokens per fill of a token_bucket assignment; 0 for DENY_ALL; -1 for ALLOW_ALL.
inline int64_t Tokens(const Response::BucketAction& a) {
  const Strategy& s = a.quota_assignment_action().rate_limit_strategy();
  if (s.has_token_bucket()) return s.token_bucket().tokens_per_fill().value();
  return s.blanket_rule() == Strategy::DENY_ALL ? 0 : -1;
}

class RlqsHarness {
 public:
  // A fresh store, Enforcer and quota on `clock`, over the rules of `yaml`.
  void Start(const Clock* clock, const std::string& yaml, RlqsOptions options = {}) {
    quota_.reset();
    enforcer_.reset();
    LocalStoreOptions so;
    so.clock = clock;
    auto store = LocalStore::Create(so);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    auto enforcer = StandaloneEnforcer(store_.get(), clock);
    ASSERT_TRUE(enforcer.ok()) << enforcer.status().ToString();
    enforcer_ = std::move(*enforcer);
    SetConfig(yaml);
    auto quota = RlqsQuota::Create(enforcer_.get(), Source(), clock, options);
    ASSERT_TRUE(quota.ok()) << quota.status().ToString();
    quota_ = std::move(*quota);
  }

  // The rules the next round reads (a reload).
  void SetConfig(const std::string& yaml) {
    auto config = testing::CompileOrDie(yaml);
    std::lock_guard<std::mutex> lock(mu_);
    config_ = std::move(config);
  }

  // What an RlqsQuota reads its rules from (another one on the same Enforcer: a second process).
  RlqsQuota::ConfigSource Source() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return config_;
    };
  }

  RlqsQuota& quota() { return *quota_; }
  Enforcer& enforcer() { return *enforcer_; }

  // Tokens assigned so far under `rule` (its stats key).
  uint64_t Assigned(const std::string& rule) const {
    for (const auto& c : quota_->Counters()) {
      if (c.rule == rule) return c.assigned;
    }
    return 0;
  }

 private:
  std::mutex mu_;  // guards config_
  std::shared_ptr<const RlsConfig> config_;
  std::unique_ptr<LocalStore> store_;
  std::unique_ptr<Enforcer> enforcer_;
  std::unique_ptr<RlqsQuota> quota_;  // declared last: destroyed first
};

}  // namespace tollgate::rls::testing

#endif  // TOLLGATE_TESTS_RLS_RLQS_FIXTURE_H_
