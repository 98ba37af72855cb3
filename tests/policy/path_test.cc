// Path normalisation for match and keys: hostile spellings of a path must meet
// the same prefix and share the same bucket as the plain spelling.
#include <gtest/gtest.h>

#include <string>

#include "policy/request_context.h"
#include "policy_test_util.h"

namespace tollgate {
namespace {

using testing::Harness;
using testing::TestRequest;

TEST(NormalizePath, PlainPathsAreUnchanged) {
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("/api/items"), "/api/items");
  EXPECT_EQ(NormalizePath("/api/items/"), "/api/items/");
  EXPECT_EQ(NormalizePath("/API/Items"), "/API/Items");  // case is kept
  EXPECT_EQ(NormalizePath("/a.b/c..d/.e/f."), "/a.b/c..d/.e/f.");
}

TEST(NormalizePath, QueryAndFragmentAreCut) {
  EXPECT_EQ(NormalizePath("/api/x?a=1"), "/api/x");
  EXPECT_EQ(NormalizePath("/api/x?a=/../b"), "/api/x");
  EXPECT_EQ(NormalizePath("/api/x#frag"), "/api/x");
  EXPECT_EQ(NormalizePath("?a=1"), "");
}

TEST(NormalizePath, RepeatedSlashesCollapse) {
  EXPECT_EQ(NormalizePath("//api/"), "/api/");
  EXPECT_EQ(NormalizePath("///api///x//"), "/api/x/");
  EXPECT_EQ(NormalizePath("//"), "/");
}

TEST(NormalizePath, DotSegmentsResolveNeverAboveRoot) {
  EXPECT_EQ(NormalizePath("/./api/"), "/api/");
  EXPECT_EQ(NormalizePath("/a/../api/"), "/api/");
  EXPECT_EQ(NormalizePath("/a/b/../../api/x"), "/api/x");
  EXPECT_EQ(NormalizePath("/../api/x"), "/api/x");
  EXPECT_EQ(NormalizePath("/../../../../api/x"), "/api/x");
  EXPECT_EQ(NormalizePath("/api/x/.."), "/api/");
  EXPECT_EQ(NormalizePath("/api/x/."), "/api/x/");
  EXPECT_EQ(NormalizePath("/api/.."), "/");
  EXPECT_EQ(NormalizePath("/.."), "/");
  EXPECT_EQ(NormalizePath("/."), "/");
  EXPECT_EQ(NormalizePath("/api/./x/./../y"), "/api/y");
}

TEST(NormalizePath, OnlyUnreservedEscapesAreDecoded) {
  EXPECT_EQ(NormalizePath("/%61pi/"), "/api/");
  EXPECT_EQ(NormalizePath("/%41%5a%30%2D%2e%5F%7e"), "/AZ0-._~");
  // Decoded dots are dot segments.
  EXPECT_EQ(NormalizePath("/%2e/api/"), "/api/");
  EXPECT_EQ(NormalizePath("/x/%2E%2e/api/"), "/api/");
  // Reserved and other characters stay encoded, with upper-case hex.
  EXPECT_EQ(NormalizePath("/api%2fx"), "/api%2Fx");
  EXPECT_EQ(NormalizePath("/a%20b%3F%00"), "/a%20b%3F%00");
  EXPECT_EQ(NormalizePath("/%e2%82%ac"), "/%E2%82%AC");
  // One pass only: an encoded '%' is not decoded again.
  EXPECT_EQ(NormalizePath("/%252e%252e/x"), "/%252e%252e/x");
  // A '%' that starts no escape is itself encoded.
  EXPECT_EQ(NormalizePath("/a%"), "/a%25");
  EXPECT_EQ(NormalizePath("/a%6"), "/a%256");
  EXPECT_EQ(NormalizePath("/a%zz"), "/a%25zz");
  EXPECT_EQ(NormalizePath("/a%6g"), "/a%256g");
}

// Found by fuzz/targets/path.cc: a bare '%' followed by an escape of a hex
// digit normalised to a new escape ("%%32e" -> "%2e"), which a second decode
// (an upstream's) reads as a dot segment: "/x/%%32e%%32e/admin" was
// "/x/%2e%2e/admin" to the rules and "/admin" after one more decode.
TEST(NormalizePath, IsIdempotentSoNoSecondDecodeFindsAnotherPath) {
  EXPECT_EQ(NormalizePath("/x/%%32e%%32e/admin"), "/x/%252e%252e/admin");
  EXPECT_EQ(NormalizePath("/%6%31pi"), "/%2561pi");
  for (const char* p : {"/x/%%32e%%32e/admin", "/%6%31pi", "/a%%%41", "/%%2e%2e/", "%%32e"}) {
    const std::string once = NormalizePath(p);
    EXPECT_EQ(NormalizePath(once), once) << p;
  }
}

TEST(NormalizePath, NonRootedPathsAreOnlyDecoded) {
  EXPECT_EQ(NormalizePath("*"), "*");
  EXPECT_EQ(NormalizePath(""), "");
  EXPECT_EQ(NormalizePath("a/../%62"), "a/../b");
}

constexpr char kPolicy[] = R"({"rules": [
  {"name": "api", "limit_keys": ["path"], "match": {"path": {"prefix": "/api/"}},
   "algorithm_config": {"rps": 1, "burst": 3}}]})";

TEST(PathRules, HostileSpellingsMeetThePrefixAndShareTheBucket) {
  Harness h(kPolicy);
  const char* const spellings[] = {"/api/items",      "//api/items",  "/./api/items",
                                   "/a/../api/items", "/%61pi/items", "/api//items?x=1",
                                   "/../api/./items"};
  // The bucket holds 3; every spelling is the same key, so exactly 3 pass.
  int allowed = 0;
  for (const char* p : spellings) {
    TestRequest r;
    r.Path(p);
    CheckOutcome o = h.Check(r);
    ASSERT_EQ(o.rules.size(), 1u) << p;
    EXPECT_EQ(o.rules[0].rule, "api") << p;
    EXPECT_EQ(o.rules[0].key, "/api/items") << p;
    if (o.allowed()) ++allowed;
  }
  EXPECT_EQ(allowed, 3);
}

TEST(PathRules, PathsOutsideThePrefixStayOutside) {
  Harness h(kPolicy);
  for (const char* p : {"/api/../other", "/apix/", "/API/items", "/api%2Fitems", "/x/%2e%2e"}) {
    TestRequest r;
    r.Path(p);
    EXPECT_TRUE(h.Check(r).rules.empty()) << p;
  }
}

}  // namespace
}  // namespace tollgate
