// RlqsQuota (src/rls/rlqs_quota.h) without a socket: simulated data planes
// that enforce what they are assigned as Envoy does (a new or changed
// token_bucket starts full; an unchanged one keeps its tokens and refills
// tokens_per_fill every fill_interval), on a LocalStore and a ManualClock, so
// every count is exact. Shares converge toward demand (max-min), the admitted
// total per window stays within the limit plus one assignment, and hostile
// reports are bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlqs_fixture.h"
#include "rls/rlqs_quota.h"
#include "testing/otlp_collector.h"
#include "testing/timing.h"
#include "tollgate/trace.h"

namespace tollgate::rls {
namespace {

using testing::AddUsage;
using testing::kSecond;
using testing::Only;
using testing::Report;
using testing::Reports;
using testing::Response;
using testing::Strategy;
using testing::Tokens;

// 50 requests a second per value of `user` under name=api (20 ms a token: exact).
constexpr const char* kYaml = R"(domain: edge
descriptors:
  - key: name
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 50}
  - key: name
    value: open
    rate_limit: {unlimited: true}
  - key: name
    value: closed
    rate_limit: {unit: second, requests_per_unit: 0}
)";

class RlqsQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(RlqsOptions options) {
    harness_.Start(&clock_, kYaml, options);
    quota_ = &harness_.quota();
  }
  void SetConfig(const std::string& yaml) { harness_.SetConfig(yaml); }

  uint64_t Open() {
    auto id = quota_->OpenStream();
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  Response Send(uint64_t stream, const Reports& reports) {
    Response resp;
    const Status st = quota_->OnReports(stream, reports, &resp);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return resp;
  }

  uint64_t Assigned(const std::string& rule) const { return harness_.Assigned(rule); }

  ManualClock clock_;
  testing::RlqsHarness harness_;
  RlqsQuota* quota_ = nullptr;
};

// One Envoy data plane's enforcement of its assignment (rate_limit_quota's
// token bucket semantics), fed `demand` requests a second.
struct DataPlane {
  uint64_t stream = 0;
  int64_t demand = 0;
  std::string user;
  bool has = false;
  Strategy active;
  int64_t tokens = 0;
  int64_t next_fill_ns = 0;
  uint64_t allowed = 0, denied = 0;  // since the last report
  int64_t admitted_in_window = 0;

  void Apply(const Response& resp, int64_t now) {
    for (const auto& a : resp.bucket_action()) {
      const Strategy& s = a.quota_assignment_action().rate_limit_strategy();
      if (has && s.SerializeAsString() == active.SerializeAsString()) continue;  // extended
      has = true;
      active = s;
      tokens = s.has_token_bucket() ? s.token_bucket().max_tokens() : 0;
      if (s.has_token_bucket()) {
        next_fill_ns = now + s.token_bucket().fill_interval().seconds() * kSecond +
                       s.token_bucket().fill_interval().nanos();
      }
    }
  }

  // One second of traffic in `steps` equal slices, refilling on the way.
  void Run(int64_t& now, ManualClock& clock, int steps) {
    const int64_t step = kSecond / steps;
    for (int i = 0; i < steps; ++i) {
      if (has && active.has_token_bucket()) {
        const auto& tb = active.token_bucket();
        const int64_t interval =
            tb.fill_interval().seconds() * kSecond + tb.fill_interval().nanos();
        while (interval > 0 && now >= next_fill_ns) {
          tokens = std::min<int64_t>(tb.max_tokens(), tokens + tb.tokens_per_fill().value());
          next_fill_ns += interval;
        }
      }
      const int64_t want = demand * (i + 1) / steps - demand * i / steps;
      const int64_t ok = has && active.has_token_bucket() ? std::min(want, tokens) : 0;
      tokens -= ok;
      allowed += static_cast<uint64_t>(ok);
      denied += static_cast<uint64_t>(want - ok);
      admitted_in_window += ok;
      (void)clock;
      now += step;
    }
  }
};

TEST(MaxMinSharesTest, SmallDemandsAreMetAndTheRestSplitEqually) {
  const auto s = MaxMinShares({5, 80, 20}, 60);
  EXPECT_DOUBLE_EQ(s[0], 5);
  EXPECT_DOUBLE_EQ(s[1], 35);  // 5 and 20 are met; 80 gets the rest
  EXPECT_DOUBLE_EQ(s[2], 20);
  const auto even = MaxMinShares({40, 80, 100}, 60);
  EXPECT_DOUBLE_EQ(even[0], 20);
  EXPECT_DOUBLE_EQ(even[1], 20);
  EXPECT_DOUBLE_EQ(even[2], 20);
  const auto all = MaxMinShares({1, 2}, 60);  // everyone met
  EXPECT_DOUBLE_EQ(all[0], 1);
  EXPECT_DOUBLE_EQ(all[1], 2);
  EXPECT_DOUBLE_EQ(MaxMinShares({1e300, 3}, 10)[1], 3);  // absurd demand takes only the rest
}

TEST_F(RlqsQuotaTest, NewBucketIsAnsweredByItsFirstReport) {
  const uint64_t s = Open();
  const Response resp = Send(s, Report("edge", 1, 0));
  const auto& a = Only(resp);
  EXPECT_EQ(a.bucket_id().bucket().at("user"), "alice");
  const auto& q = a.quota_assignment_action();
  ASSERT_TRUE(q.rate_limit_strategy().has_token_bucket());
  // Alone: the whole rate for one round (1 s), and a TTL of two rounds.
  EXPECT_EQ(q.rate_limit_strategy().token_bucket().max_tokens(), 50u);
  EXPECT_EQ(q.rate_limit_strategy().token_bucket().fill_interval().seconds(), 1);
  EXPECT_EQ(q.assignment_time_to_live().seconds(), 2);
  EXPECT_EQ(Assigned("edge.name_api.user"), 50u);
}

TEST_F(RlqsQuotaTest, RulesWithoutALimitAndUnknownBucketsGetBlanketRules) {
  const uint64_t s = Open();
  Reports r;
  r.set_domain("edge");
  AddUsage(&r, 1, {{"name", "open"}}, 1, 0, kSecond);
  AddUsage(&r, 2, {{"name", "closed"}}, 1, 0, kSecond);
  AddUsage(&r, 3, {{"name", "nothing-matches"}}, 1, 0, kSecond);
  const Response resp = Send(s, r);
  ASSERT_EQ(resp.bucket_action_size(), 3);  // in id order
  EXPECT_EQ(Tokens(resp.bucket_action(0)), -1);
  EXPECT_EQ(Tokens(resp.bucket_action(1)), 0);
  EXPECT_EQ(Tokens(resp.bucket_action(2)), -1);  // the documented no_rule_action
  // An unknown domain: every bucket allowed, nothing acquired.
  const uint64_t other = Open();
  EXPECT_EQ(Tokens(Only(Send(other, Report("nowhere", 1, 0)))), -1);
}

TEST_F(RlqsQuotaTest, SharesConvergeTowardDemandAndTheTotalStaysWithinTheLimit) {
  // Three data planes wanting 5, 20 and 80 requests a second of a 50/s rule:
  // max-min fair shares 5, 20, 25.
  std::vector<DataPlane> planes(3);
  const int64_t demands[] = {5, 20, 80};
  int64_t now = clock_.Now();
  for (size_t i = 0; i < planes.size(); ++i) {
    planes[i].stream = Open();
    planes[i].demand = demands[i];
    planes[i].Apply(Send(planes[i].stream, Report("edge", 0, 0)), now);
  }
  int64_t max_assignment = 0;
  std::vector<int64_t> last_tokens(3, 0);
  for (int second = 0; second < 30; ++second) {
    int64_t admitted = 0;
    for (auto& p : planes) {
      int64_t t = now;
      p.admitted_in_window = 0;
      p.Run(t, clock_, 10);
      admitted += p.admitted_in_window;
    }
    now += kSecond;
    clock_.Set(now);
    for (size_t i = 0; i < planes.size(); ++i) {
      auto& p = planes[i];
      const Response resp = Send(p.stream, Report("edge", p.allowed, p.denied));
      p.allowed = p.denied = 0;
      last_tokens[i] = Tokens(Only(resp));
      max_assignment = std::max(max_assignment, last_tokens[i]);
      p.Apply(resp, now);
    }
    // After the store bucket's initial burst is spent (second >= 2), every
    // one-second window admits at most the limit plus one assignment.
    if (second >= 2) {
      EXPECT_LE(admitted, 50 + max_assignment) << "second " << second;
    }
  }
  // Converged: the small one gets its demand, the others split the rest.
  EXPECT_EQ(last_tokens[0], 5);
  EXPECT_EQ(last_tokens[1], 20);
  EXPECT_EQ(last_tokens[2], 25);
  // Acquired in total: never more than the bucket's burst plus 50/s.
  EXPECT_LE(Assigned("edge.name_api.user"), 50u + 50u * 31u);
}

TEST_F(RlqsQuotaTest, AVanishedStreamsShareReturnsAfterItsTtl) {
  const uint64_t a = Open(), b = Open();
  // The first to subscribe takes the whole bucket (50), the second finds it
  // empty for its first round.
  EXPECT_EQ(Tokens(Only(Send(a, Report("edge", 100, 0)))), 50);
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 0);
  // `a` never reports again; within its TTL (two rounds) `b` gets half...
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 25);
  // ...after it, the whole rule.
  clock_.Advance(std::chrono::seconds(2));
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 50);
}

TEST_F(RlqsQuotaTest, AClosedStreamLeavesTheSplitAtOnce) {
  const uint64_t a = Open(), b = Open();
  Send(a, Report("edge", 100, 0));
  Send(b, Report("edge", 100, 0));
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 25);
  quota_->CloseStream(a);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 50);
  EXPECT_EQ(quota_->open_streams(), 1u);
}

TEST_F(RlqsQuotaTest, AbsurdCountsCannotTakeAnHonestStreamsShare) {
  const uint64_t honest = Open(), hostile = Open();
  const uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  for (int round = 0; round < 5; ++round) {
    Send(hostile, Report("edge", kHuge, kHuge, 1));  // 1 ns elapsed, absurd counts
    const int64_t got = Tokens(Only(Send(honest, Report("edge", 20, 0))));
    // From the second round (the first reports only subscribe), the honest
    // stream gets the 20 it asks for, whatever the other claims.
    if (round > 0) {
      EXPECT_EQ(got, 20) << "round " << round;
    }
    clock_.Advance(std::chrono::seconds(1));
  }
}

TEST_F(RlqsQuotaTest, ReportingFasterThanARoundAcquiresNothingMore) {
  const uint64_t s = Open();
  EXPECT_EQ(Tokens(Only(Send(s, Report("edge", 1000, 0)))), 50);
  // A thousand reports within one min_round (100 ms) re-send the assignment.
  for (int i = 0; i < 1000; ++i) {
    clock_.Advance(std::chrono::microseconds(50));
    EXPECT_EQ(Tokens(Only(Send(s, Report("edge", 1000, 0, kSecond)))), 50);
  }
  EXPECT_EQ(Assigned("edge.name_api.user"), 50u);
}

TEST_F(RlqsQuotaTest, ElapsedZeroOrNegativeLeavesTheDemandUnchanged) {
  const uint64_t a = Open(), b = Open();
  Send(a, Report("edge", 10, 0));  // first reports: demand unknown yet
  Send(b, Report("edge", 100, 0));
  clock_.Advance(std::chrono::seconds(1));
  Send(a, Report("edge", 10, 0));  // a wants 10/s
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 40);
  clock_.Advance(std::chrono::seconds(1));
  // `a` claims 10^6 requests in 0 s and in -1 s: ignored, its demand stays 10/s.
  Send(a, Report("edge", 1'000'000, 0, 0));
  Send(a, Report("edge", 1'000'000, 0, -kSecond));
  EXPECT_EQ(Tokens(Only(Send(b, Report("edge", 100, 0)))), 40);
}

TEST_F(RlqsQuotaTest, HostileMessagesAreBounded) {
  RlqsOptions o;
  o.max_streams = 2;
  o.max_buckets = 3;
  o.max_bucket_entries = 2;
  Start(o);
  const uint64_t s = Open();
  Open();
  EXPECT_EQ(quota_->OpenStream().status().code(), StatusCode::kOverflow);
  // A huge map: the first three buckets are tracked, the rest refused.
  Reports big;
  big.set_domain("edge");
  for (uint64_t id = 0; id < 500; ++id) {
    AddUsage(&big, id, {{"name", "api"}, {"user", "u" + std::to_string(id)}}, 1, 0, kSecond);
  }
  AddUsage(&big, 1000, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, 1, 0, kSecond);  // too many entries
  const Response resp = Send(s, big);
  ASSERT_EQ(resp.bucket_action_size(), 501);
  int tracked = 0, refused = 0;
  for (const auto& a : resp.bucket_action()) (Tokens(a) > 0 ? tracked : refused)++;
  EXPECT_EQ(tracked, 3);
  EXPECT_EQ(refused, 498);
  // Protocol violations end the stream's processing with kInvalidArgument.
  const uint64_t fresh = quota_->OpenStream().ok() ? 0 : 1;
  EXPECT_EQ(fresh, 1u);  // still full
  Response none;
  EXPECT_EQ(quota_->OnReports(s, Report("other-domain", 1, 0), &none).code(),
            StatusCode::kInvalidArgument);
  quota_->CloseStream(s);
  const uint64_t t = Open();
  EXPECT_EQ(quota_->OnReports(t, Report("", 1, 0), &none).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.bucket_action_size(), 0);
}

TEST_F(RlqsQuotaTest, AReloadReassignsWithTheNewRule) {
  const uint64_t s = Open();
  EXPECT_EQ(Tokens(Only(Send(s, Report("edge", 100, 0)))), 50);
  SetConfig(R"(domain: edge
descriptors:
  - key: name
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 10}
)");
  clock_.Advance(std::chrono::seconds(1));
  Response pushed;
  quota_->Reassign(s, &pushed);
  EXPECT_EQ(Tokens(Only(pushed)), 10);
}

TEST_F(RlqsQuotaTest, TwoProcessesOnOneStoreNeverAssignMoreThanTheBucketHolds) {
  // A second RlqsQuota on the same Enforcer and store stands for a second
  // tollgated on a shared store: each splits only its own streams, the store
  // bounds the sum.
  auto second = RlqsQuota::Create(&harness_.enforcer(), harness_.Source(), &clock_);
  ASSERT_TRUE(second.ok());
  const uint64_t a = Open();
  auto b = (*second)->OpenStream();
  ASSERT_TRUE(b.ok());
  int64_t total = 0;
  for (int round = 0; round < 20; ++round) {
    total += Tokens(Only(Send(a, Report("edge", 100, 0))));
    Response rb;
    ASSERT_TRUE((*second)->OnReports(*b, Report("edge", 100, 0), &rb).ok());
    total += Tokens(Only(rb));
    clock_.Advance(std::chrono::seconds(1));
  }
  // The bucket: 50 to start with, 50 more each second (19 seconds passed).
  EXPECT_LE(total, 50 + 50 * 19);
  EXPECT_GE(total, 50 * 19);  // and it is used, not starved
}

TEST_F(RlqsQuotaTest, EachAssignmentRoundIsADecisionSpan) {
  ::tollgate::testing::OtlpCollector collector;
  trace::TracerOptions to;
  to.endpoint = collector.endpoint();
  to.flush_interval = std::chrono::milliseconds(10);
  auto tracer = trace::DecisionTracer::Create(to, &clock_);
  ASSERT_TRUE(tracer.ok()) << tracer.status().ToString();
  RlqsOptions o;
  o.tracer = tracer->get();
  Start(o);
  const uint64_t s = Open();
  EXPECT_EQ(Tokens(Only(Send(s, Report("edge", 1)))), 50);  // round 1: the whole second
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(Tokens(Only(Send(s, Report("edge", 100)))), 25);  // round 2: half a second
  Send(s, Report("edge", 100));  // within min_round: re-sent, no round, no span
  ASSERT_TRUE(::tollgate::testing::WaitFor([&] { return collector.spans().size() >= 2; }))
      << collector.spans().size();
  const auto spans = collector.spans();
  ASSERT_EQ(spans.size(), 2u);
  for (const auto& span : spans) {
    EXPECT_EQ(span.name, "tollgate.decision");
    EXPECT_EQ(span.attributes.at("tollgate.rule"), "edge.name_api.user");
    EXPECT_EQ(span.attributes.at("tollgate.verdict"), "allow");
    EXPECT_TRUE(span.parent_span_id.empty());  // a new trace per round
  }
  // The tokens each round asked for, in order.
  std::vector<std::string> costs{spans[0].attributes.at("tollgate.cost"),
                                 spans[1].attributes.at("tollgate.cost")};
  std::sort(costs.begin(), costs.end());
  EXPECT_EQ(costs, (std::vector<std::string>{"25", "50"}));
  Start({});  // the quota stops using the tracer before it goes
}

}  // namespace
}  // namespace tollgate::rls
