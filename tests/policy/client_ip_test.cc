// Trusted-proxy client address resolution and spoofing attempts.
#include <gtest/gtest.h>

#include "policy/client_ip.h"
#include "policy_test_util.h"

namespace tollgate {
namespace {

using testing::TestRequest;

ClientIpResolver Resolver(std::vector<std::string> trusted,
                          ForwardedHeader h = ForwardedHeader::kXForwardedFor) {
  auto r = ClientIpResolver::Create(trusted, h);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

TEST(ClientIp, CreateRefusesAnEntryThatIsNoCidr) {
  EXPECT_FALSE(
      ClientIpResolver::Create({"10.0.0.0/8", "nope"}, ForwardedHeader::kXForwardedFor).ok());
}

TEST(ClientIp, NoTrustedProxiesUsesThePeer) {
  auto r = Resolver({});
  TestRequest req;
  req.Peer("198.51.100.7").Header("X-Forwarded-For", "1.1.1.1");
  EXPECT_EQ(r.Resolve(req.View()), "198.51.100.7");
}

TEST(ClientIp, SpoofedHeaderFromUntrustedPeerIsIgnored) {
  auto r = Resolver({"10.0.0.0/8"});
  TestRequest req;
  req.Peer("198.51.100.7").Header("X-Forwarded-For", "10.0.0.5, 1.1.1.1");
  EXPECT_EQ(r.Resolve(req.View()), "198.51.100.7");
  TestRequest fwd;
  fwd.Peer("198.51.100.7").Header("Forwarded", "for=1.1.1.1");
  EXPECT_EQ(Resolver({"10.0.0.0/8"}, ForwardedHeader::kForwarded).Resolve(fwd.View()),
            "198.51.100.7");
}

TEST(ClientIp, RightmostUntrustedHopWins) {
  auto r = Resolver({"10.0.0.0/8", "192.168.0.0/16"});
  // The client claims 6.6.6.6; our proxies appended the real peer 203.0.113.50.
  TestRequest req;
  req.Peer("10.0.0.2").Header("X-Forwarded-For", "6.6.6.6, 203.0.113.50, 192.168.1.1");
  EXPECT_EQ(r.Resolve(req.View()), "203.0.113.50");
}

TEST(ClientIp, SpoofedTrustedLookingEntriesLeftOfTheClientDoNotHelp) {
  auto r = Resolver({"10.0.0.0/8"});
  // The client forges a trusted-looking hop; the walk stops at the first untrusted hop.
  TestRequest req;
  req.Peer("10.0.0.2").Header("X-Forwarded-For", "10.9.9.9, 203.0.113.50");
  EXPECT_EQ(r.Resolve(req.View()), "203.0.113.50");
}

TEST(ClientIp, RepeatedHeaderLinesAreOneList) {
  auto r = Resolver({"10.0.0.0/8"});
  TestRequest req;
  req.Peer("10.0.0.2")
      .Header("X-Forwarded-For", "6.6.6.6")
      .Header("x-forwarded-for", "203.0.113.50, 10.0.0.9");
  EXPECT_EQ(r.Resolve(req.View()), "203.0.113.50");
}

TEST(ClientIp, AllTrustedUsesTheLeftmost) {
  auto r = Resolver({"10.0.0.0/8"});
  TestRequest req;
  req.Peer("10.0.0.2").Header("X-Forwarded-For", "10.1.1.1, 10.2.2.2");
  EXPECT_EQ(r.Resolve(req.View()), "10.1.1.1");
  TestRequest none;
  none.Peer("10.0.0.2");
  EXPECT_EQ(r.Resolve(none.View()), "10.0.0.2");
}

TEST(ClientIp, GarbageHopStopsAtTheLastAddressWeCouldVouchFor) {
  auto r = Resolver({"10.0.0.0/8"});
  TestRequest req;
  req.Peer("10.0.0.2").Header("X-Forwarded-For", "1.1.1.1, not-an-ip, 10.0.0.7");
  EXPECT_EQ(r.Resolve(req.View()), "10.0.0.7");
  TestRequest empty;
  empty.Peer("10.0.0.2").Header("X-Forwarded-For", "");
  EXPECT_EQ(r.Resolve(empty.View()), "10.0.0.2");
}

TEST(ClientIp, ForwardedHeader) {
  auto r = Resolver({"10.0.0.0/8"}, ForwardedHeader::kForwarded);
  TestRequest req;
  req.Peer("10.0.0.2")
      .Header("Forwarded",
              "for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\";proto=https, For=10.0.0.3");
  EXPECT_EQ(r.Resolve(req.View()), "2001:db8:cafe::17");
  // X-Forwarded-For is ignored when Forwarded is configured.
  TestRequest xff;
  xff.Peer("10.0.0.2").Header("X-Forwarded-For", "6.6.6.6");
  EXPECT_EQ(r.Resolve(xff.View()), "10.0.0.2");
  TestRequest hidden;
  hidden.Peer("10.0.0.2").Header("Forwarded", "for=_hidden, for=10.0.0.4");
  EXPECT_EQ(r.Resolve(hidden.View()), "10.0.0.4");
}

TEST(ClientIp, MappedPeerIsTrustedAsIpv4) {
  auto r = Resolver({"127.0.0.1"});
  TestRequest req;
  req.Peer("::ffff:127.0.0.1").Header("X-Forwarded-For", "203.0.113.1");
  EXPECT_EQ(r.Resolve(req.View()), "203.0.113.1");
}

TEST(ClientIp, ManyHopsAreBounded) {
  auto r = Resolver({"10.0.0.0/8"});
  std::string chain;
  for (int i = 0; i < 10000; ++i) chain += "10.0.0.1, ";
  chain += "10.0.0.1";
  TestRequest req;
  req.Peer("10.0.0.2").Header("X-Forwarded-For", chain);
  EXPECT_EQ(r.Resolve(req.View()), "10.0.0.1");
}

TEST(ClientIp, EnforcerPerIpRuleIgnoresSpoofing) {
  EnforcerOptions o;
  o.trusted_proxies = {"10.0.0.0/8"};
  testing::Harness h(testing::kSeedGlobalRps, o);
  // A client that rotates X-Forwarded-For directly (untrusted peer) still hits its own bucket.
  for (int i = 0; i < 10; ++i) {
    TestRequest req;
    req.Peer("198.51.100.7").Header("X-Forwarded-For", "1.1.1." + std::to_string(i));
    EXPECT_TRUE(h.Check(req).allowed());
  }
  TestRequest req;
  req.Peer("198.51.100.7").Header("X-Forwarded-For", "9.9.9.9");
  CheckOutcome o11 = h.Check(req);
  EXPECT_EQ(o11.http_status, 429);
  ASSERT_EQ(o11.rules.size(), 1u);
  EXPECT_EQ(o11.rules[0].key, "198.51.100.7");
  // Through a trusted proxy, distinct clients get distinct buckets.
  TestRequest via;
  via.Peer("10.0.0.2").Header("X-Forwarded-For", "203.0.113.77");
  CheckOutcome ok = h.Check(via);
  EXPECT_TRUE(ok.allowed());
  EXPECT_EQ(ok.rules[0].key, "203.0.113.77");
  EXPECT_EQ(h.enforcer->ClientIp(via.View()), "203.0.113.77");
}

}  // namespace
}  // namespace tollgate
