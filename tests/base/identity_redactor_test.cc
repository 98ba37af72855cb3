#include "tollgate/identity_redactor.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate {
namespace {

TEST(IdentityRedactor, KeyedHashStableUnderAConfiguredKeyRandomOtherwise) {
  const IdentityRedactor a("fleet-wide-hash-key-0123", false);
  const IdentityRedactor b("fleet-wide-hash-key-0123", false);
  const IdentityRedactor other("another-hash-key-456789", false);
  const std::string h = a.Hash("api-key-1");
  ASSERT_EQ(h.size(), 5u + 16u);
  EXPECT_EQ(h.substr(0, 5), "hmac:");
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef", 5), std::string::npos) << h;
  EXPECT_EQ(h, b.Hash("api-key-1"));  // a fleet sharing the key agrees
  EXPECT_NE(h, other.Hash("api-key-1"));
  EXPECT_NE(h, a.Hash("api-key-2"));
  EXPECT_NE(IdentityRedactor().Hash("x"), IdentityRedactor().Hash("x"));  // random per process
  EXPECT_EQ(a.Show("10.0.0.1"), a.Hash("10.0.0.1"));
  EXPECT_EQ(a.Show("10.0.0.1", /*raw_requested=*/true), "10.0.0.1");
  EXPECT_EQ(a.ShowInLog("k\xe2\x80\xae"), a.Hash("k\xe2\x80\xae"));
  const IdentityRedactor raw("", true);
  EXPECT_EQ(raw.Show("10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(raw.ShowInLog("k\xe2\x80\xae"), "k\\u202e");  // raw in logs is still escaped
}

}  // namespace
}  // namespace tollgate
