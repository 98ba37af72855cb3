#include "base/percent.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate::base {
namespace {

using namespace std::string_literals;

TEST(Percent, HexDigitValue) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  for (char c : "gG/:@`-+ \0"s) EXPECT_EQ(HexDigitValue(c), -1) << int(c);
}

TEST(Percent, LenientDecodesValidEscapes) {
  EXPECT_EQ(PercentDecode("a%20b"), "a b");
  EXPECT_EQ(PercentDecode("%41%62"), "Ab");
  EXPECT_EQ(PercentDecode("%e2%82%AC"), "\xe2\x82\xac");
  EXPECT_EQ(PercentDecode("a+b"), "a b");
  EXPECT_EQ(PercentDecode("a+b", /*plus_is_space=*/false), "a+b");
  EXPECT_EQ(PercentDecode("%2B"), "+");  // an escaped '+' is never a space
  EXPECT_EQ(PercentDecode(""), "");
}

TEST(Percent, LenientKeepsWhatIsNotAnEscape) {
  EXPECT_EQ(PercentDecode("%"), "%");
  EXPECT_EQ(PercentDecode("a%"), "a%");
  EXPECT_EQ(PercentDecode("%4"), "%4");    // truncated
  EXPECT_EQ(PercentDecode("a%4"), "a%4");  // truncated at the end
  EXPECT_EQ(PercentDecode("%zz"), "%zz");  // not hex
  EXPECT_EQ(PercentDecode("%4g1"), "%4g1");
  EXPECT_EQ(PercentDecode("%-1"), "%-1");  // a sign is not a digit
  EXPECT_EQ(PercentDecode("%+1"), "% 1");  // nor is '+', which stays a space
  EXPECT_EQ(PercentDecode("%%41"), "%A");
}

TEST(Percent, DecodesOncePass) {
  EXPECT_EQ(PercentDecode("%2541"), "%41");
  EXPECT_EQ(PercentDecodeStrict("%2541"), "%41");
}

TEST(Percent, NulIsDecodedAndKept) {
  EXPECT_EQ(PercentDecode("a%00b"), "a\0b"s);
  EXPECT_EQ(PercentDecodeStrict("a%00b"), "a\0b"s);
  EXPECT_EQ(PercentDecode("%ff"), "\xff");
}

TEST(Percent, StrictRejectsEveryBadEscape) {
  EXPECT_EQ(PercentDecodeStrict("p%40ss%3A"), "p@ss:");
  EXPECT_EQ(PercentDecodeStrict("a+b"), "a+b");
  EXPECT_EQ(PercentDecodeStrict(""), "");
  for (const char* bad :
       {"%", "a%", "%4", "a%4", "%zz", "%4g", "%g4", "%-1", "%+1", "% 1", "%%41", "ok%"}) {
    EXPECT_FALSE(PercentDecodeStrict(bad).has_value()) << bad;
  }
  EXPECT_FALSE(PercentDecodeStrict("%\0"s + "1").has_value());
}

}  // namespace
}  // namespace tollgate::base
