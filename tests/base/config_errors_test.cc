#include "base/config_errors.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tollgate::base {
namespace {

TEST(ConfigErrors, PathsHaveOneShape) {
  EXPECT_EQ(FieldPath("", "rules"), "rules");
  EXPECT_EQ(FieldPath(IndexPath("rules", 2), "algorithm_config"), "rules[2].algorithm_config");
  EXPECT_EQ(FieldPath(FieldPath(IndexPath("rules", 2), "algorithm_config"), "burst"),
            "rules[2].algorithm_config.burst");
  EXPECT_EQ(IndexPath("", 0), "[0]");
}

TEST(ConfigErrors, CollectsEveryErrorInOrder) {
  std::vector<ConfigError> out;
  ConfigErrors e(&out);
  e.Add("rules[0].name", "is required");
  e.Add("", "must be a JSON object");
  ASSERT_EQ(e.count(), 2u);
  EXPECT_EQ(out[0].ToString(), "rules[0].name: is required");
  EXPECT_EQ(out[1].ToString(), "must be a JSON object");
}

TEST(ConfigErrors, SourceNamesTheFile) {
  std::vector<ConfigError> out;
  ConfigErrors e(&out, "conf/a.yaml");
  e.Add("descriptors[1].key", "is required");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path, "conf/a.yaml: descriptors[1].key");
}

TEST(ConfigErrors, ControlBytesStayOnOneLine) {
  std::vector<ConfigError> out;
  ConfigErrors e(&out);
  e.Add(std::string("rules.a\nb\0", 10), "bad value \"\x1b[31m\x7f\"");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path, "rules.a\\x0ab\\x00");
  EXPECT_EQ(out[0].message, "bad value \"\\x1b[31m\\x7f\"");
  EXPECT_EQ(PrintableText("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 is kept
}

}  // namespace
}  // namespace tollgate::base
