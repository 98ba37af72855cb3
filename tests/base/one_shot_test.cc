#include "base/one_shot.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace tollgate::base {
namespace {

TEST(OneShot, WaitReturnsTheValueSetOnAnotherThread) {
  OneShot<std::string> shot;
  std::thread setter([&] { shot.Set("answer"); });
  EXPECT_EQ(shot.Wait(), "answer");
  setter.join();
}

TEST(OneShot, ValueSetBeforeWaitIsKept) {
  OneShot<int> shot;
  shot.Set(7);
  EXPECT_EQ(shot.Wait(), 7);
}

TEST(OneShot, WaitForGivesUpWhenNothingIsSet) {
  OneShot<int> shot;
  EXPECT_FALSE(shot.WaitFor(std::chrono::milliseconds(1)).has_value());
}

TEST(OneShot, WaitForReturnsAValueSetInTime) {
  auto shot = std::make_shared<OneShot<int>>();
  std::thread setter([shot] { shot->Set(42); });
  // Generous: the value is what ends the wait, the bound only keeps a bug from hanging.
  const std::optional<int> v = shot->WaitFor(std::chrono::minutes(5));
  setter.join();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 42);
}

TEST(OneShot, LateSetAfterTheWaiterGaveUpIsSafe) {
  auto shot = std::make_shared<OneShot<int>>();
  EXPECT_FALSE(shot->WaitFor(std::chrono::milliseconds(0)).has_value());
  std::weak_ptr<OneShot<int>> alive = shot;
  std::thread late([s = std::move(shot)] { s->Set(1); });  // the callback owns the last ref
  late.join();
  EXPECT_TRUE(alive.expired());
}

}  // namespace
}  // namespace tollgate::base
