#include "base/ascii.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate::base {
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

}  // namespace
}  // namespace tollgate::base
