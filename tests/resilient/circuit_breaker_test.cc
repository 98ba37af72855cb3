#include "tollgate/circuit_breaker.h"

#include <gtest/gtest.h>

#include <vector>

namespace tollgate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class CircuitBreakerTest : public ::testing::Test {
 protected:
  CircuitBreakerOptions Options() {
    CircuitBreakerOptions o;
    o.consecutive_failures = 3;
    o.failure_ratio = 0.5;
    o.min_calls = 10;
    o.window = seconds(10);
    o.open_duration = milliseconds(100);
    o.half_open_probes = 2;
    o.clock = &clock_;
    o.listener = [this](const BreakerTransition& t) { transitions_.push_back(t); };
    return o;
  }
  void Call(CircuitBreaker& b, bool ok) {
    auto p = b.Allow();
    ASSERT_TRUE(p.admitted());
    b.Record(p, ok);
  }
  ManualClock clock_;
  std::vector<BreakerTransition> transitions_;
};

TEST_F(CircuitBreakerTest, ValidateRejectsBadOptions) {
  auto o = Options();
  EXPECT_TRUE(CircuitBreaker::Validate(o).ok());
  o.consecutive_failures = 0;
  EXPECT_EQ(CircuitBreaker::Validate(o).code(), StatusCode::kInvalidArgument);
  o = Options();
  o.half_open_probes = 0;
  EXPECT_FALSE(CircuitBreaker::Validate(o).ok());
  o = Options();
  o.window = Nanos(0);
  EXPECT_FALSE(CircuitBreaker::Validate(o).ok());
  o = Options();
  o.failure_ratio = 0;
  EXPECT_FALSE(CircuitBreaker::Validate(o).ok());
}

TEST_F(CircuitBreakerTest, OpensAfterConsecutiveFailuresAndLogsOnce) {
  CircuitBreaker b(Options());
  Call(b, false);
  Call(b, false);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  Call(b, false);
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].from, BreakerState::kClosed);
  EXPECT_EQ(transitions_[0].to, BreakerState::kOpen);
  EXPECT_EQ(transitions_[0].reason, BreakerReason::kConsecutiveFailures);
  // While open nothing is admitted and nothing more is logged.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(b.Allow().admitted());
  EXPECT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(b.counters().rejected, 100u);
  EXPECT_EQ(b.counters().opened_by_consecutive, 1u);
}

TEST_F(CircuitBreakerTest, SuccessResetsTheStreak) {
  CircuitBreaker b(Options());
  for (int i = 0; i < 4; ++i) {  // 8 calls, half failing: below min_calls for the ratio
    Call(b, false);
    Call(b, true);
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, OpensOnFailureRatio) {
  auto o = Options();
  o.consecutive_failures = 100;
  CircuitBreaker b(o);
  for (int i = 0; i < 5; ++i) {
    Call(b, true);
    clock_.Advance(milliseconds(10));
  }
  for (int i = 0; i < 4; ++i) {
    Call(b, false);
    Call(b, true);
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);  // 13 calls, 4 failed
  Call(b, false);
  Call(b, false);
  Call(b, false);  // 16 calls, 7 failed
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  Call(b, false);  // 17 calls, 8 failed: < 0.5
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  Call(b, false);  // 18 calls, 9 failed: 0.5
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].reason, BreakerReason::kFailureRatio);
}

TEST_F(CircuitBreakerTest, OldFailuresLeaveTheWindow) {
  auto o = Options();
  o.consecutive_failures = 100;
  CircuitBreaker b(o);
  for (int i = 0; i < 9; ++i) Call(b, false);  // below min_calls
  clock_.Advance(seconds(11));                 // all of them leave the window
  for (int i = 0; i < 9; ++i) Call(b, true);
  Call(b, false);  // 10 calls in the window, 1 failed
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, HalfOpenAdmitsBoundedProbesThenCloses) {
  CircuitBreaker b(Options());
  for (int i = 0; i < 3; ++i) Call(b, false);
  ASSERT_EQ(b.state(), BreakerState::kOpen);
  clock_.Advance(milliseconds(99));
  EXPECT_FALSE(b.Allow().admitted());
  clock_.Advance(milliseconds(1));
  auto p1 = b.Allow();
  auto p2 = b.Allow();
  auto p3 = b.Allow();
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  EXPECT_TRUE(p1.probe());
  EXPECT_TRUE(p2.probe());
  EXPECT_FALSE(p3.admitted());  // only 2 probes at once
  b.Record(p1, true);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  b.Record(p2, false);  // a probe of a finished period moves nothing
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  ASSERT_EQ(transitions_.size(), 3u);
  EXPECT_EQ(transitions_[1].to, BreakerState::kHalfOpen);
  EXPECT_EQ(transitions_[1].reason, BreakerReason::kCooldownElapsed);
  EXPECT_EQ(transitions_[2].to, BreakerState::kClosed);
  EXPECT_EQ(transitions_[2].reason, BreakerReason::kProbeSucceeded);
  // Closing forgot the old failures: two more do not open it.
  Call(b, false);
  Call(b, false);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

// caller_probes = false: Allow() never admits while not closed; TryProbe()
// hands out the probes (bounded) once the cool-down has passed.
TEST_F(CircuitBreakerTest, WithoutCallerProbesOnlyTryProbeProbes) {
  auto o = Options();
  o.caller_probes = false;
  CircuitBreaker b(o);
  EXPECT_FALSE(b.TryProbe().admitted());  // closed: nothing to probe
  EXPECT_EQ(b.ProbeDueNs(), 0);
  for (int i = 0; i < 3; ++i) Call(b, false);
  ASSERT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.ProbeDueNs(), clock_.Now() + Nanos(milliseconds(100)).count());
  EXPECT_FALSE(b.TryProbe().admitted());  // not due yet
  clock_.Advance(milliseconds(100));
  EXPECT_FALSE(b.Allow().admitted());  // callers never probe
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  auto p1 = b.TryProbe();
  auto p2 = b.TryProbe();
  ASSERT_TRUE(p1.probe());
  ASSERT_TRUE(p2.probe());
  EXPECT_FALSE(b.TryProbe().admitted());  // budget: 2
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  EXPECT_EQ(b.ProbeDueNs(), 0);
  EXPECT_FALSE(b.Allow().admitted());  // half-open: callers still get the mode
  b.Record(p1, false);
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  b.Record(p2, true);  // a probe of the earlier period cannot close it
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  clock_.Advance(milliseconds(100));
  auto p3 = b.TryProbe();
  ASSERT_TRUE(p3.probe());
  b.Record(p3, true);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_TRUE(b.Allow().admitted());
  EXPECT_EQ(b.counters().probes, 3u);
  EXPECT_EQ(b.counters().rejected, 2u);
}

TEST_F(CircuitBreakerTest, NoAnswerOpensAtOnceOnlyForTheCurrentPeriod) {
  CircuitBreaker b(Options());
  auto old = b.Allow();
  auto p = b.Allow();
  b.RecordNoAnswer(p);
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].reason, BreakerReason::kNoAnswer);
  EXPECT_EQ(BreakerReasonName(BreakerReason::kNoAnswer), "no_answer");
  clock_.Advance(milliseconds(100));
  auto probe = b.Allow();
  ASSERT_TRUE(probe.probe());
  b.RecordNoAnswer(old);  // a permit of an earlier period moves nothing
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  b.RecordNoAnswer(probe);  // a probe that got no answer re-opens, as a failed probe
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  const auto c = b.counters();
  EXPECT_EQ(c.opened_by_no_answer, 1u);
  EXPECT_EQ(c.opened_by_probe, 1u);
  EXPECT_EQ(c.failures, 3u);
}

TEST_F(CircuitBreakerTest, ProbeSlotIsReturnedOnlyOnce) {
  auto o = Options();
  o.half_open_probes = 1;
  CircuitBreaker b(o);
  for (int i = 0; i < 3; ++i) Call(b, false);
  clock_.Advance(milliseconds(100));
  auto p = b.Allow();
  ASSERT_TRUE(p.probe());
  EXPECT_FALSE(b.Allow().admitted());
  b.Record(p, false);  // failed probe: open again for a full cool-down
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.counters().opened_by_probe, 1u);
  clock_.Advance(milliseconds(50));
  EXPECT_FALSE(b.Allow().admitted());
  clock_.Advance(milliseconds(50));
  auto q = b.Allow();
  EXPECT_TRUE(q.probe());
  b.Record(p, true);  // stale permit from the previous half-open period
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  EXPECT_FALSE(b.Allow().admitted());  // q still holds the only slot
  b.Record(q, true);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

TEST_F(CircuitBreakerTest, StaleNormalPermitCannotReopen) {
  CircuitBreaker b(Options());
  auto slow = b.Allow();  // issued while closed, finishes much later
  for (int i = 0; i < 3; ++i) Call(b, false);
  clock_.Advance(milliseconds(100));
  auto probe = b.Allow();
  b.Record(probe, true);
  ASSERT_EQ(b.state(), BreakerState::kClosed);
  for (int i = 0; i < 10; ++i) b.Record(slow, false);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(transitions_.size(), 3u);
}

TEST_F(CircuitBreakerTest, ResetAndForceOpen) {
  CircuitBreaker b(Options());
  b.ForceOpen();
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_FALSE(b.Allow().admitted());
  b.Reset();
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_TRUE(b.Allow().admitted());
  ASSERT_EQ(transitions_.size(), 2u);
  EXPECT_EQ(transitions_[0].reason, BreakerReason::kForced);
  EXPECT_EQ(transitions_[1].reason, BreakerReason::kForced);
  auto c = b.counters();
  EXPECT_EQ(c.opened, 1u);
  EXPECT_EQ(c.closed, 1u);
}

TEST(BreakerNames, AreStable) {
  EXPECT_EQ(BreakerStateName(BreakerState::kHalfOpen), "half_open");
  EXPECT_EQ(BreakerReasonName(BreakerReason::kFailureRatio), "failure_ratio");
}

}  // namespace
}  // namespace tollgate
