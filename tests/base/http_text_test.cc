#include "tollgate/http_text.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {
namespace {

TEST(Ascii, LowerFoldsOnlyAsciiLetters) {
  EXPECT_EQ(AsciiLower('A'), 'a');
  EXPECT_EQ(AsciiLower('Z'), 'z');
  EXPECT_EQ(AsciiLower('a'), 'a');
  EXPECT_EQ(AsciiLower('@'), '@');        // 'A' - 1
  EXPECT_EQ(AsciiLower('['), '[');        // 'Z' + 1
  EXPECT_EQ(AsciiLower('\xc4'), '\xc4');  // Latin-1 'Ä': never folded, whatever the locale
  EXPECT_EQ(AsciiLowered("Content-TYPE: X"), "content-type: x");
  EXPECT_EQ(AsciiLowered(std::string("A\0B", 3)), std::string("a\0b", 3));
}

TEST(Ascii, EqualsIgnoreCase) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-length"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("content-length", "content-lengt"));
  EXPECT_FALSE(EqualsIgnoreCase("a", "b"));
  // '@' and '`' differ from 'A' and 'a' by 0x20 like case does; they must not match.
  EXPECT_FALSE(EqualsIgnoreCase("@", "`"));
  EXPECT_FALSE(EqualsIgnoreCase("[", "{"));
  EXPECT_FALSE(EqualsIgnoreCase("\xc4", "\xe4"));  // Ä / ä in Latin-1
  EXPECT_TRUE(EqualsIgnoreCase(std::string("a\0B", 3), std::string("A\0b", 3)));
  EXPECT_FALSE(EqualsIgnoreCase(std::string("a\0", 2), "a"));
}

TEST(Ascii, StartsWithAndContainsIgnoreCase) {
  EXPECT_TRUE(StartsWithIgnoreCase("HTTP://host/", "http://"));
  EXPECT_FALSE(StartsWithIgnoreCase("http:/", "http://"));
  EXPECT_TRUE(StartsWithIgnoreCase("x", ""));
  EXPECT_TRUE(ContainsIgnoreCase("/a%2Fb", "%2f"));
  EXPECT_TRUE(ContainsIgnoreCase("%5C", "%5c"));
  EXPECT_FALSE(ContainsIgnoreCase("/a%2", "%2f"));
  EXPECT_TRUE(ContainsIgnoreCase("", ""));
  EXPECT_FALSE(ContainsIgnoreCase("", "a"));
}

TEST(HttpText, TrimOwsCutsSpacesAndTabsOnly) {
  EXPECT_EQ(TrimOws(" \t a b \t"), "a b");
  EXPECT_EQ(TrimOws("\r\n"), "\r\n");  // CR and LF are not OWS
  EXPECT_EQ(TrimOws("  "), "");
  EXPECT_EQ(TrimOws(""), "");
}

TEST(HttpText, SplitTargetCutsAtTheFirstQuestionMark) {
  RequestTarget t = SplitTarget("/a/b?x=1?y");
  EXPECT_EQ(t.path, "/a/b");
  EXPECT_EQ(t.query, "x=1?y");
  t = SplitTarget("/plain");
  EXPECT_EQ(t.path, "/plain");
  EXPECT_TRUE(t.query.empty());
  t = SplitTarget("?");
  EXPECT_EQ(t.path, "");
  EXPECT_EQ(t.query, "");
}

TEST(HttpText, QueryTokenizerSkipsEmptyPartsAndSplitsAtTheFirstEquals) {
  QueryTokenizer tokens("&a=1&&b&c=x=y&=v&");
  std::vector<std::pair<std::string, std::string>> seen;
  std::string_view name;
  std::string_view value;
  while (tokens.Next(&name, &value)) seen.emplace_back(name, value);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"a", "1"}, {"b", ""}, {"c", "x=y"}, {"", "v"}};
  EXPECT_EQ(seen, want);
  EXPECT_FALSE(tokens.Next(&name, &value));
}

TEST(HttpText, ForEachQueryParamDecodesNamesAndValues) {
  std::vector<std::pair<std::string, std::string>> seen;
  ForEachQueryParam("r%75le=a+b&x=%zz&y",
                    [&](std::string_view n, std::string_view v) { seen.emplace_back(n, v); });
  const std::vector<std::pair<std::string, std::string>> want = {
      {"rule", "a b"}, {"x", "%zz"}, {"y", ""}};
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace tollgate
