// IpAddress and Cidr (tollgate/ip_address.h): parsing, normalising, prefix matching.
#include "tollgate/ip_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

namespace tollgate {
namespace {

TEST(IpAddress, ParsesAndNormalises) {
  EXPECT_EQ(IpAddress::Parse("10.0.0.1")->ToString(), "10.0.0.1");
  EXPECT_EQ(IpAddress::Parse(" 10.0.0.1:8080 ")->ToString(), "10.0.0.1");
  EXPECT_EQ(IpAddress::Parse("2001:DB8:0:0::1")->ToString(), "2001:db8::1");
  EXPECT_EQ(IpAddress::Parse("[2001:db8::1]:443")->ToString(), "2001:db8::1");
  EXPECT_EQ(IpAddress::Parse("::ffff:192.0.2.1")->ToString(), "192.0.2.1");
  EXPECT_FALSE(IpAddress::Parse(""));
  EXPECT_FALSE(IpAddress::Parse("unknown"));
  EXPECT_FALSE(IpAddress::Parse("_hidden"));
  EXPECT_FALSE(IpAddress::Parse("1.2.3"));
  EXPECT_FALSE(IpAddress::Parse("fe80::1%eth0"));
  EXPECT_FALSE(IpAddress::Parse("[::1"));
  EXPECT_FALSE(IpAddress::Parse(std::string(100, '1')));
}

// IPv4 is written by hand (not inet_ntop, whose sprintf cost 1.7k instructions
// per decision): the same text as inet_ntop for every octet value in every
// position, and a round trip through Parse.
TEST(IpAddress, Ipv4TextIsInetNtops) {
  for (unsigned v = 0; v < 256; ++v) {
    for (int at = 0; at < 4; ++at) {
      IpAddress ip;
      ip.bytes = {};
      for (int i = 0; i < 4; ++i)
        ip.bytes[i] = static_cast<uint8_t>(i == at ? v : (v * 7 + i) % 256);
      char want[INET_ADDRSTRLEN];
      ASSERT_NE(inet_ntop(AF_INET, ip.bytes.data(), want, sizeof want), nullptr);
      ASSERT_EQ(ip.ToString(), want);
      auto back = IpAddress::Parse(ip.ToString());
      ASSERT_TRUE(back.has_value()) << want;
      EXPECT_EQ(back->bytes, ip.bytes) << want;
    }
  }
}

TEST(Cidr, ContainsAndRejectsGarbage) {
  auto c = Cidr::Parse("10.0.0.0/8");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->Contains(*IpAddress::Parse("10.200.1.1")));
  EXPECT_FALSE(c->Contains(*IpAddress::Parse("11.0.0.1")));
  EXPECT_FALSE(c->Contains(*IpAddress::Parse("::a00:1")));
  auto c6 = Cidr::Parse("2001:db8::/33");
  ASSERT_TRUE(c6);
  EXPECT_TRUE(c6->Contains(*IpAddress::Parse("2001:db8:7fff::1")));
  EXPECT_FALSE(c6->Contains(*IpAddress::Parse("2001:db8:8000::1")));
  auto one = Cidr::Parse("127.0.0.1");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->prefix, 32);
  auto zero = Cidr::Parse("0.0.0.0/0");
  ASSERT_TRUE(zero);
  EXPECT_TRUE(zero->Contains(*IpAddress::Parse("8.8.8.8")));
  auto mapped = Cidr::Parse("::ffff:10.0.0.0/104");
  ASSERT_TRUE(mapped);
  EXPECT_TRUE(mapped->Contains(*IpAddress::Parse("10.1.2.3")));
  for (const char* bad : {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/a", "x/8", "",
                          "[::1]/128", "10.0.0.0/8/8", "10.0.0.0/0008"}) {
    EXPECT_FALSE(Cidr::Parse(bad)) << bad;
  }
}

}  // namespace
}  // namespace tollgate
