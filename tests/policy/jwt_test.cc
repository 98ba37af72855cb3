// JWT verification: HS256 and RS256 good, expired, not yet valid, bad
// signature, alg none, algorithm confusion, malformed input; and the rule that
// unverified claims are never used.
#include <gtest/gtest.h>

#include "policy/jwt.h"
#include "policy_test_util.h"

namespace tollgate {
namespace {

using nlohmann::json;
using testing::MintHs256;
using testing::RsaKey;

constexpr int64_t kNow = 1'700'000'000;

std::unique_ptr<JwtVerifier> Verifier(JwtOptions o) {
  auto v = JwtVerifier::Create(o);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return std::move(*v);
}

JwtOptions Hs(std::string secret = "s3cret") {
  JwtOptions o;
  o.hs256_secret = std::move(secret);
  return o;
}

TEST(Jwt, Base64UrlRoundTrip) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\xfe\x00\x01"}) {
    std::string out;
    ASSERT_TRUE(Base64UrlDecode(Base64UrlEncode(s), &out));
    EXPECT_EQ(out, s);
  }
  std::string out;
  EXPECT_FALSE(Base64UrlDecode("a", &out));
  EXPECT_FALSE(Base64UrlDecode("ab+c", &out));
  // Non-canonical: leftover bits must be zero ("Zh" and "Zg" would both decode to "f").
  EXPECT_TRUE(Base64UrlDecode("Zg", &out));
  EXPECT_FALSE(Base64UrlDecode("Zh", &out));
  EXPECT_TRUE(Base64UrlDecode("Zm9v", &out));
  EXPECT_EQ(out, "foo");
}

TEST(Jwt, Hs256Good) {
  auto v = Verifier(Hs());
  const std::string t =
      MintHs256({{"sub", "u1"}, {"plan", "enterprise"}, {"exp", kNow + 60}}, "s3cret");
  JwtClaims c = v->Verify(t, kNow);
  ASSERT_EQ(c.state, JwtClaims::State::kVerified) << c.error;
  EXPECT_EQ(c.Claim("plan"), "enterprise");
  EXPECT_EQ(c.Claim("sub"), "u1");
  EXPECT_EQ(c.Claim("exp"), std::to_string(kNow + 60));
  EXPECT_FALSE(c.Claim("nope"));
}

TEST(Jwt, ClaimPaths) {
  auto v = Verifier(Hs());
  JwtClaims c = v->Verify(
      MintHs256({{"org", {{"id", 42}, {"tags", {"a"}}}}, {"a.b", "dotted"}, {"admin", true}},
                "s3cret"),
      kNow);
  ASSERT_TRUE(c.usable());
  EXPECT_EQ(c.Claim("org.id"), "42");
  EXPECT_EQ(c.Claim("a.b"), "dotted");
  EXPECT_EQ(c.Claim("admin"), "true");
  EXPECT_FALSE(c.Claim("org.tags"));  // arrays are not key values
  EXPECT_FALSE(c.Claim("org"));
  EXPECT_FALSE(c.Claim("org.id.x"));
}

TEST(Jwt, Expired) {
  auto v = Verifier(Hs());
  JwtClaims c = v->Verify(MintHs256({{"plan", "x"}, {"exp", kNow - 31}}, "s3cret"), kNow);
  EXPECT_EQ(c.state, JwtClaims::State::kInvalid);
  EXPECT_EQ(c.error, "expired");
  // Within the default 30 s leeway.
  EXPECT_TRUE(v->Verify(MintHs256({{"exp", kNow - 29}}, "s3cret"), kNow).usable());
  // exp must be a number.
  EXPECT_FALSE(v->Verify(MintHs256({{"exp", "soon"}}, "s3cret"), kNow).usable());
}

TEST(Jwt, NotYetValid) {
  auto v = Verifier(Hs());
  EXPECT_EQ(v->Verify(MintHs256({{"nbf", kNow + 100}}, "s3cret"), kNow).state,
            JwtClaims::State::kInvalid);
  EXPECT_TRUE(v->Verify(MintHs256({{"nbf", kNow + 10}}, "s3cret"), kNow).usable());
}

TEST(Jwt, BadSignature) {
  auto v = Verifier(Hs());
  const std::string other = MintHs256({{"plan", "enterprise"}}, "wrong-secret");
  JwtClaims c = v->Verify(other, kNow);
  EXPECT_EQ(c.state, JwtClaims::State::kInvalid);
  EXPECT_EQ(c.error, "bad signature");
  // Tampered payload with the original signature.
  const std::string good = MintHs256({{"plan", "free"}}, "s3cret");
  const size_t d1 = good.find('.');
  const size_t d2 = good.rfind('.');
  const std::string forged = good.substr(0, d1 + 1) +
                             Base64UrlEncode(json({{"plan", "enterprise"}}).dump()) +
                             good.substr(d2);
  EXPECT_EQ(v->Verify(forged, kNow).state, JwtClaims::State::kInvalid);
}

TEST(Jwt, AlgNoneIsRefusedEvenWhenVerifiedUpstream) {
  const std::string none = Base64UrlEncode(R"({"alg":"none","typ":"JWT"})") + "." +
                           Base64UrlEncode(R"({"plan":"enterprise"})") + ".";
  EXPECT_EQ(Verifier(Hs())->Verify(none, kNow).state, JwtClaims::State::kInvalid);
  JwtOptions upstream;
  upstream.verified_upstream = true;
  JwtClaims c = Verifier(upstream)->Verify(none, kNow);
  EXPECT_EQ(c.state, JwtClaims::State::kInvalid);
  const std::string none_caps = Base64UrlEncode(R"({"alg":"NONE"})") + "." +
                                Base64UrlEncode(R"({"plan":"enterprise"})") + ".";
  EXPECT_EQ(Verifier(upstream)->Verify(none_caps, kNow).state, JwtClaims::State::kInvalid);
}

// RFC 7515 4.1.11: a token naming critical extensions this verifier does not
// understand is invalid, even with a good signature and when verified upstream.
TEST(Jwt, UnknownCritHeaderParameterIsRefused) {
  const json payload = {{"plan", "enterprise"}, {"exp", kNow + 60}};
  for (const json& crit : {json::array({"exp"}), json::array({"b64"}), json::array(), json(1)}) {
    json header = {{"alg", "HS256"}, {"typ", "JWT"}, {"crit", crit}, {"exp", kNow}, {"b64", true}};
    const std::string t = MintHs256(payload, "s3cret", header);
    JwtClaims c = Verifier(Hs())->Verify(t, kNow);
    EXPECT_EQ(c.state, JwtClaims::State::kInvalid) << crit;
    EXPECT_NE(c.error.find("crit"), std::string::npos) << c.error;
    JwtOptions upstream;
    upstream.verified_upstream = true;
    EXPECT_EQ(Verifier(upstream)->Verify(t, kNow).state, JwtClaims::State::kInvalid) << crit;
  }
  // Without crit the same token verifies.
  const std::string plain = MintHs256(payload, "s3cret", {{"alg", "HS256"}, {"b64", true}});
  EXPECT_EQ(Verifier(Hs())->Verify(plain, kNow).state, JwtClaims::State::kVerified);
}

TEST(Jwt, Rs256GoodAndBad) {
  RsaKey key;
  ASSERT_TRUE(key.ok());
  JwtOptions o;
  o.rs256_public_key_pem = key.PublicPem();
  auto v = Verifier(o);
  JwtClaims c = v->Verify(key.Mint({{"plan", "enterprise"}, {"exp", kNow + 60}}), kNow);
  ASSERT_EQ(c.state, JwtClaims::State::kVerified) << c.error;
  EXPECT_EQ(c.Claim("plan"), "enterprise");
  EXPECT_EQ(v->Verify(key.Mint({{"exp", kNow - 100}}), kNow).error, "expired");
  RsaKey other;
  EXPECT_EQ(v->Verify(other.Mint({{"plan", "enterprise"}}), kNow).error, "bad signature");
  // Algorithm confusion: an HS256 token "signed" with the public key text.
  const std::string confused = MintHs256({{"plan", "enterprise"}}, o.rs256_public_key_pem);
  EXPECT_EQ(v->Verify(confused, kNow).state, JwtClaims::State::kInvalid);
}

TEST(Jwt, Rs256CacheNeverSkipsTimeChecks) {
  RsaKey key;
  JwtOptions o;
  o.rs256_public_key_pem = key.PublicPem();
  auto v = Verifier(o);
  const std::string t = key.Mint({{"plan", "enterprise"}, {"exp", kNow + 60}});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(v->Verify(t, kNow).usable());  // cached after the first
  EXPECT_EQ(v->Verify(t, kNow + 3600).error, "expired");
  // A tampered copy of a cached token is a different token: verified (and refused) afresh.
  std::string tampered = t;
  char& c = tampered[tampered.size() - 10];  // a full 6-bit group of the signature
  c = c == 'A' ? 'B' : 'A';
  EXPECT_FALSE(v->Verify(tampered, kNow).usable());
  // Many distinct tokens stay bounded and correct.
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(v->Verify(key.Mint({{"n", i}}), kNow).usable());
  }
}

TEST(Jwt, BadKeysAreRefusedAtCreate) {
  JwtOptions o;
  o.rs256_public_key_pem = "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n";
  EXPECT_FALSE(JwtVerifier::Create(o).ok());
  JwtOptions leeway;
  leeway.leeway = std::chrono::seconds(-1);
  EXPECT_FALSE(JwtVerifier::Create(leeway).ok());
}

TEST(Jwt, UnverifiedUnlessConfigured) {
  const std::string t = MintHs256({{"plan", "enterprise"}}, "any");
  JwtClaims c = Verifier({})->Verify(t, kNow);
  EXPECT_EQ(c.state, JwtClaims::State::kUnverified);
  EXPECT_FALSE(c.usable());
  JwtOptions upstream;
  upstream.verified_upstream = true;
  EXPECT_TRUE(Verifier(upstream)->Verify(t, kNow).usable());
  // Upstream trust still checks expiry.
  EXPECT_FALSE(Verifier(upstream)->Verify(MintHs256({{"exp", kNow - 100}}, "any"), kNow).usable());
}

TEST(Jwt, IssuerAndAudience) {
  JwtOptions o = Hs();
  o.issuer = "https://issuer";
  o.audience = "api";
  auto v = Verifier(o);
  EXPECT_TRUE(
      v->Verify(MintHs256({{"iss", "https://issuer"}, {"aud", "api"}}, "s3cret"), kNow).usable());
  EXPECT_TRUE(
      v->Verify(MintHs256({{"iss", "https://issuer"}, {"aud", {"x", "api"}}}, "s3cret"), kNow)
          .usable());
  EXPECT_EQ(v->Verify(MintHs256({{"iss", "evil"}, {"aud", "api"}}, "s3cret"), kNow).error,
            "wrong issuer");
  EXPECT_EQ(v->Verify(MintHs256({{"iss", "https://issuer"}}, "s3cret"), kNow).error,
            "wrong audience");
}

TEST(Jwt, MalformedTokens) {
  auto v = Verifier(Hs());
  for (const std::string& t : std::vector<std::string>{
           "", "abc", "a.b", "a.b.c.d", "!!.!!.!!", "e30.e30.", "W10.e30.", "e30.W10.",
           std::string(9000, 'a'),
           Base64UrlEncode(R"({"alg":"HS256"})") + "." + Base64UrlEncode("[1]") + ".x",
           Base64UrlEncode(R"({"alg":5})") + "." + Base64UrlEncode("{}") + ".x",
           Base64UrlEncode(std::string(100, '[')) + ".e30.x"}) {
    JwtClaims c = v->Verify(t, kNow);
    EXPECT_FALSE(c.usable()) << t.substr(0, 40);
  }
  EXPECT_EQ(JwtVerifier::BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(JwtVerifier::BearerToken("bearer   abc "), "abc");
  EXPECT_EQ(JwtVerifier::BearerToken("Basic abc"), "");
  EXPECT_EQ(JwtVerifier::BearerToken("Bear"), "");
}

}  // namespace
}  // namespace tollgate
