// RedisOptions::io_clock times the store's I/O: a call's deadline passes when
// that clock says so, not on real time, so deadline logic can be tested with a
// ManualClock. Against a fake Redis that completes the handshake and then
// answers nothing (tests/testing/hostile_redis.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "testing/hostile_redis.h"
#include "testing/timing.h"
#include "tollgate/clock.h"
#include "tollgate/limit.h"
#include "tollgate/redis_store.h"

namespace tollgate {
namespace {

using std::chrono::milliseconds;
using testing::HostileRedis;

TEST(RedisIoClock, ACallDeadlinePassesOnTheIoClockNotOnRealTime) {
  HostileRedis::Options ho;
  ho.reply = HostileRedis::Reply::kSilence;
  ho.answer_script_load = true;
  std::string error;
  auto server = HostileRedis::Start(ho, &error);
  ASSERT_TRUE(server) << error;

  ManualClock io;
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = server->port();
  o.connections = 1;
  o.call_timeout = milliseconds(20);
  o.io_clock = &io;
  auto store = RedisStore::Create(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();

  LimitSpec spec;
  spec.rate = 1;
  spec.burst = 5;
  const Limit limit = *Limit::Create(spec);
  std::mutex mu;
  std::atomic<bool> answered{false};
  Status status;  // guarded by mu
  const AcquireItem item{"k", &limit, 1};
  (*store)->AcquireAsync({&item, 1}, [&](Result<BatchDecision> r) {
    std::lock_guard<std::mutex> lock(mu);
    status = r.ok() ? Status() : r.status();
    answered = true;
  });
  // The call reached the server (which will never answer it).
  ASSERT_TRUE(testing::WaitFor([&] { return server->Received("EVALSHA"); }))
      << "the call was never sent";
  // Not synchronisation: real time passes the 20 ms deadline many times over
  // (the I/O thread checks deadlines every 5 ms) while the I/O clock stands still.
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(answered.load()) << "the call timed out on real time";

  io.Advance(milliseconds(21));
  ASSERT_TRUE(testing::WaitFor([&] { return answered.load(); }))
      << "the deadline did not pass when the I/O clock did";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.ToString();
}

}  // namespace
}  // namespace tollgate
