// The main of a test binary that holds the tests of several ctest entries (tollgate_add_test with
// BINARY, cmake/TollgateHelpers.cmake): one binary per folder compiles and links the shared
// headers once, and each ctest entry keeps its name, labels and timeout by running only its own
// source files' tests.
//
//   BINARY --tollgate_sources=tests/policy/parse_test.cc,tests/policy/period_policy_test.cc
//
// runs the tests defined in those files (GoogleTest's TestInfo::file(), matched as a path suffix,
// so a ccache hit compiled in another clone still matches). A list that matches no test is an
// error, not a pass. Without the flag the binary runs all its tests. An explicit --gtest_filter
// is kept as given and replaces the selection (to run one test while debugging).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::string_view kSourcesFlag = "--tollgate_sources=";

std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> items;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (!item.empty()) items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return items;
}

bool FromSources(std::string_view file, const std::vector<std::string>& sources) {
  for (const std::string& source : sources) {
    if (file == source) return true;
    if (file.size() > source.size() && file.ends_with(source) &&
        file[file.size() - source.size() - 1] == '/') {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::vector<std::string> sources;
  bool selected = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!arg.starts_with(kSourcesFlag)) {
      std::fprintf(stderr, "unknown argument %s (GoogleTest's flags and %.*s only)\n", argv[i],
                   static_cast<int>(kSourcesFlag.size()), kSourcesFlag.data());
      return 2;
    }
    for (std::string& source : SplitList(arg.substr(kSourcesFlag.size()))) {
      sources.push_back(std::move(source));
    }
    selected = true;
  }
  if (selected && std::string(GTEST_FLAG_GET(filter)) == "*") {
    std::string filter;
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    for (int s = 0; s < unit.total_test_suite_count(); ++s) {
      const testing::TestSuite& suite = *unit.GetTestSuite(s);
      for (int t = 0; t < suite.total_test_count(); ++t) {
        const testing::TestInfo& test = *suite.GetTestInfo(t);
        if (!FromSources(test.file(), sources)) continue;
        if (!filter.empty()) filter += ':';
        filter += std::string(suite.name()) + "." + test.name();
      }
    }
    if (filter.empty()) {
      std::fprintf(stderr, "no test is defined in the sources given (%s...)\n",
                   sources.empty() ? "none" : sources.front().c_str());
      return 2;
    }
    GTEST_FLAG_SET(filter, filter);
  }
  return RUN_ALL_TESTS();
}
