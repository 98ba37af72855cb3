// Where a test finds the source tree and the build's programs: from the environment that ctest
// gives every test (tollgate_add_test sets TOLLGATE_SOURCE_DIR and TOLLGATE_BINARY_DIR;
// tollgate_test_program adds one variable per program a test runs, e.g. TOLLGATE_CLI_PATH).
//
// Why not compile-time definitions: a path compiled into a test TU makes it differ per clone and
// build tree, so ccache can never reuse it on a new clone (CI's case, docs/testing.md "CI time").
//
// SourcePath("examples/policy.json") is TOLLGATE_SOURCE_DIR + "/" + the path, or the path
// relative to the working directory when the variable is unset (a test binary run by hand from
// the source tree). ProgramPath("TOLLGATE_CLI_PATH") is the program's path, or "" when the build
// has no such program (the test then skips).
#ifndef TOLLGATE_TESTS_TESTING_TEST_PATHS_H_
#define TOLLGATE_TESTS_TESTING_TEST_PATHS_H_

#include <cstdlib>
#include <string>
#include <string_view>

namespace tollgate::testing {

inline std::string SourcePathOf(std::string_view relative) {
  const char* dir = std::getenv("TOLLGATE_SOURCE_DIR");
  std::string path = dir != nullptr && *dir != '\0' ? dir : ".";
  path += '/';
  path += relative;
  return path;
}

inline std::string ProgramPath(const char* variable) {
  const char* path = std::getenv(variable);
  return path != nullptr ? path : "";
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_TEST_PATHS_H_
