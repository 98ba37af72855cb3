#include "testing/redis_server.h"

#include <gtest/gtest.h>

namespace tollgate::testing {
namespace {

TEST(RedisServerFixture, StartsAnswersAndRestartsOnTheSamePort) {
  TOLLGATE_START_REDIS(server);
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(server.url(), "redis://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(server.Command({"SET", "k", "v"}), "OK");
  EXPECT_EQ(server.Command({"GET", "k"}), "v");
  EXPECT_EQ(server.Command({"CONFIG", "GET", "appendonly"}), "appendonly\nno");

  int port = server.port();
  server.Kill();
  bool ok = true;
  server.Command({"PING"}, &ok);
  EXPECT_FALSE(ok);
  ASSERT_EQ(server.Restart(), "");
  EXPECT_EQ(server.port(), port);
  EXPECT_EQ(server.Command({"GET", "k"}), "(nil)");  // fresh, persistence off
}

TEST(RedisServerFixture, PauseAndResume) {
  TOLLGATE_START_REDIS(server);
  server.Pause();
  server.Resume();
  EXPECT_EQ(server.Command({"PING"}), "PONG");
  server.Stop();
  EXPECT_FALSE(server.running());
}

TEST(RedisServerFixture, TwoServersGetDifferentPorts) {
  TOLLGATE_START_REDIS(a);
  TOLLGATE_START_REDIS(b);
  EXPECT_NE(a.port(), b.port());
}

}  // namespace
}  // namespace tollgate::testing
