#include "tollgate/log_text.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate {
namespace {

// Client bytes in log lines: no control, C1 or bidi character survives, in
// UTF-8 or as a raw byte, and the escape loses nothing.
TEST(LogText, EscapesControlC1AndBidiReversibly) {
  EXPECT_EQ(EscapeLogText("plain /api/items?x=1 caf\xc3\xa9"), "plain /api/items?x=1 caf\xc3\xa9");
  EXPECT_EQ(EscapeLogText(std::string("a\0b\tc\x1b[31m\x7f", 11)), "a\\x00b\\x09c\\x1b[31m\\x7f");
  EXPECT_EQ(EscapeLogText("\xc2\x85\xc2\x9b"), "\\u0085\\u009b");  // C1 in UTF-8
  EXPECT_EQ(EscapeLogText("\x85\x9b"), "\\x85\\x9b");              // C1 as raw bytes
  EXPECT_EQ(EscapeLogText("\xe2\x80\xae"
                          "evil\xe2\x80\xac"),
            "\\u202eevil\\u202c");  // RLO, PDF
  EXPECT_EQ(EscapeLogText("\xe2\x81\xa6\xe2\x81\xa9\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c"),
            "\\u2066\\u2069\\u200e\\u200f\\u061c");
  EXPECT_EQ(EscapeLogText("\xe2\x80\xa8\xe2\x80\xa9"), "\\u2028\\u2029");  // line separators
  EXPECT_EQ(EscapeLogText("\\x41"), "\\\\x41");  // a literal escape stays distinguishable
  EXPECT_EQ(EscapeLogText("\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80"),  // overlong, surrogate, >10FFFF
            "\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(EscapeLogText("\xe2\x80"), "\\xe2\\x80");  // cut sequence
  for (std::string s : {std::string("\\\\x4"), std::string("\\u202"), std::string("x\\"),
                        std::string("\xe2\x80\xae\\u202e\x9b\\x9b", 14)}) {
    EXPECT_EQ(UnescapeLogText(EscapeLogText(s)), s);
  }
  // ClientLogText cuts first, then escapes.
  EXPECT_EQ(ClientLogText(std::string(300, '\x9b')), EscapeLogText(std::string(256, '\x9b')));
}

}  // namespace
}  // namespace tollgate
