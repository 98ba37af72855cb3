#include "base/json_fields.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace tollgate::base {
namespace {

std::vector<std::string> Strings(const std::vector<ConfigError>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.ToString());
  return out;
}

TEST(JsonFields, NestedReadersNameTheWholePath) {
  const Json doc = Json::parse(R"({"rules": [{}, {}, {"algorithm_config": {"burst": "ten"}}]})");
  std::vector<ConfigError> out;
  ConfigErrors e(&out);
  JsonFields rule(doc["rules"][2], IndexPath("rules", 2), e);
  JsonFields config = rule.Nested(doc["rules"][2]["algorithm_config"], "algorithm_config");
  EXPECT_FALSE(config.Whole("burst", 100).has_value());
  EXPECT_EQ(Strings(out),
            std::vector<std::string>{"rules[2].algorithm_config.burst: must be a number (got a "
                                     "string)"});
}

TEST(JsonFields, DetailedAndShortMessages) {
  const Json doc = Json::parse(R"({"a": true, "b": [1, "x"], "typo": 1})");
  std::vector<ConfigError> out;
  ConfigErrors e(&out);
  JsonFields detailed(doc, "d", e);
  EXPECT_FALSE(detailed.String("a").has_value());
  std::vector<std::string> list;
  detailed.StringList("b", &list);
  detailed.RejectUnknown({"a", "b"});
  JsonFields terse(doc, "s", e, JsonFields::Messages::kShort);
  std::string s = "kept";
  terse.String("a", &s);
  terse.StringList("b", &list);
  terse.RejectUnknown();
  EXPECT_EQ(s, "kept");
  EXPECT_EQ(Strings(out), (std::vector<std::string>{
                              "d.a: must be a string (got a boolean)",
                              "d.b[0]: must be a string (got a number)",
                              "d.typo: unknown field (expected one of: a, b)",
                              "s.a: must be a string",
                              "s.b[0]: must be a string",
                              "s.typo: unknown field",
                          }));
}

TEST(JsonFields, RangesAndDefaults) {
  const Json doc =
      Json::parse(R"({"n": 70000, "d": 2.5, "ms": 5, "big": 18446744073709551615, "w": 1.5})");
  std::vector<ConfigError> out;
  ConfigErrors e(&out);
  JsonFields r(doc, "", e, JsonFields::Messages::kShort);
  int n = 1;
  r.Integer("n", &n, 1, 65535);
  double d = 0.5;
  r.Double("d", &d, 0.0, 1.0);
  std::chrono::milliseconds ms{100};
  r.Duration("ms", &ms, 1, 60000);
  int64_t big = 0;
  r.Integer("big", &big, 0, int64_t{1} << 40);
  int64_t absent = 7;
  r.Integer("absent", &absent, 0, 10);
  EXPECT_FALSE(r.Whole("w", 10).has_value());
  r.RejectUnknown();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(d, 0.5);
  EXPECT_EQ(ms, std::chrono::milliseconds(5));
  EXPECT_EQ(big, 0);
  EXPECT_EQ(absent, 7);
  EXPECT_EQ(Strings(out), (std::vector<std::string>{
                              "n: must be in [1, 65535]",
                              "d: must be in [0, 1]",
                              "big: must be in [0, 1099511627776]",
                              "w: must be a whole number (got 1.5)",
                          }));
}

}  // namespace
}  // namespace tollgate::base
