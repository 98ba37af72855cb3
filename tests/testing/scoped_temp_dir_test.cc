#include "testing/scoped_temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace tollgate::testing {
namespace {

namespace fs = std::filesystem;

TEST(ScopedTempDir, IsNamedAfterTheTestAndRemovedWithItsContents) {
  std::string path;
  {
    const ScopedTempDir dir;
    path = dir.path();
    ASSERT_TRUE(fs::is_directory(path));
    EXPECT_NE(fs::path(path).filename().string().find(
                  "tollgate-ScopedTempDir.IsNamedAfterTheTestAndRemovedWithItsContents-"),
              std::string::npos)
        << path;
    EXPECT_EQ(dir.File("a.json"), path + "/a.json");
    fs::create_directories(dir.File("sub/deeper"));
    std::ofstream(dir.File("sub/deeper/file")) << "x";
    std::ofstream(dir.File("a.json")) << "{}";
  }
  EXPECT_FALSE(fs::exists(path)) << path;
}

TEST(ScopedTempDir, GoesUnderTmpdir) {
  const ScopedTempDir outer;
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TMPDIR", outer.path().c_str(), 1);
  std::string inner_path;
  {
    const ScopedTempDir inner;
    inner_path = inner.path();
  }
  if (old != nullptr) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  EXPECT_EQ(fs::path(inner_path).parent_path(), fs::path(outer.path()));
  EXPECT_TRUE(fs::is_empty(outer.path()));
}

TEST(ScopedTempDir, MovingHandsOverTheDirectory) {
  ScopedTempDir first;
  const std::string path = first.path();
  ScopedTempDir second(std::move(first));
  EXPECT_TRUE(first.path().empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(second.path(), path);
  ScopedTempDir third("other");
  const std::string third_path = third.path();
  third = std::move(second);  // removes third's own directory, takes second's
  EXPECT_FALSE(fs::exists(third_path));
  EXPECT_EQ(third.path(), path);
  EXPECT_TRUE(fs::is_directory(path));
}

// A parameterised test's name has slashes ("Params/Named.Sanitized/0"): one directory, no '/'.
class Named : public ::testing::TestWithParam<int> {};
TEST_P(Named, Sanitized) {
  const ScopedTempDir dir;
  EXPECT_NE(dir.path().find("/tollgate-Params_Named.Sanitized_0-"), std::string::npos)
      << dir.path();
}
INSTANTIATE_TEST_SUITE_P(Params, Named, ::testing::Values(0));

}  // namespace
}  // namespace tollgate::testing
