// ScopedTempDir: a directory of its own for a test's files, removed with everything in it when the
// object is destroyed.
//
// Every file a test writes goes inside one: hold a ScopedTempDir in the test body or the fixture
// (or in the fixture object that owns the files, such as a server started for the test), and
// nothing is left behind in $TMPDIR when the test ends, passes or fails. The directory is created
// under $TMPDIR (else /tmp) and named after the running test, tollgate-<Suite>.<Test>-XXXXXX, so a
// leftover (a crashed test) says which test left it.
//
// Thread safety: path() and File() are const and safe to share; create and destroy on one thread.
#ifndef TOLLGATE_TESTS_TESTING_SCOPED_TEMP_DIR_H_
#define TOLLGATE_TESTS_TESTING_SCOPED_TEMP_DIR_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate::testing {

class ScopedTempDir {
 public:
  // Creates the directory, named after the running test (outside a test, as in a suite-wide
  // fixture, after `what`). When it cannot, the current test fails and path() is empty.
  explicit ScopedTempDir(std::string_view what = "test") {
    std::string name(what);
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
      name = std::string(info->test_suite_name()) + "." + info->name();
    }
    const char* env = std::getenv("TMPDIR");
    const std::string base = env != nullptr && *env != '\0' ? env : "/tmp";
    const std::string pattern = base + "/tollgate-" + Sanitize(std::move(name)) + "-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
      return;
    }
    path_ = buffer.data();
  }
  ~ScopedTempDir() { Remove(); }

  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ScopedTempDir(ScopedTempDir&& other) noexcept
      : path_(std::exchange(other.path_, std::string())) {}
  ScopedTempDir& operator=(ScopedTempDir&& other) noexcept {
    if (this != &other) {
      Remove();
      path_ = std::exchange(other.path_, std::string());
    }
    return *this;
  }

  const std::string& path() const { return path_; }
  // path()/name: a file (or directory) in it, not created.
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  // Parameterised tests are named like "Stores/ContractTest.Grants/0": keep a file-name-safe,
  // bounded version.
  static std::string Sanitize(std::string s) {
    for (char& c : s) {
      const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
      if (!safe) c = '_';
    }
    if (s.size() > 120) s.resize(120);
    return s;
  }
  void Remove() {
    if (path_.empty()) return;
    std::error_code ec;  // best effort: a destructor must not throw
    std::filesystem::remove_all(path_, ec);
    path_.clear();
  }

  std::string path_;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_SCOPED_TEMP_DIR_H_
