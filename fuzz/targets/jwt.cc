// Fuzz target: JWT verification (src/policy/jwt.cc): the bearer token of an
// Authorization header, base64url, the JOSE header and the claims.
//
// Input: a mode byte, then text. Mode bit 0: "sign" - the text is
// "<header JSON>\n<payload JSON>", which the target encodes and signs with the
// HS256 key itself, so the fuzzer reaches everything past the signature check;
// otherwise the text is an Authorization value taken as is. Bits 1-3 pick the
// verifier: HS256 key, RS256 key, verified upstream, issuer and audience set.
// Properties:
//   - base64url: a decoded string re-encodes to the same text (one spelling);
//     Encode then Decode is the identity;
//   - a token this target signed with HS256 never fails its signature check;
//   - only kVerified claims are usable, and a kInvalid result says why;
//   - Claim() of any path is a string without error for a usable token.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "policy/jwt.h"

namespace {

using tollgate::JwtClaims;
using tollgate::JwtOptions;
using tollgate::JwtVerifier;
using tollgate::fuzz::Quote;

constexpr std::string_view kSecret = "fuzz-secret";
constexpr int64_t kNow = 1'700'000'000;

// A fixed RSA-2048 public key (its private half was thrown away): generating
// one here took longer than libFuzzer's per-input time limit on a busy machine.
constexpr char kRsaPublicKeyPem[] = R"(-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAuwxsOlxJ6l2T50h2KDJW
AePIQD0XvTvCu6XTzg+h5e1udMw//Gn04dAqg+oCc5EVBeFSERZN+SmY1+JQJwtO
VqCN8gMVdx/QMK8jrQQxdq/sgKfnoPTei2Jxh6Kh183B5H+ljHCWEKb704iCii+Y
lz6pJAcQyVnTbcAOO8Kv2C95W0VA12yvOoBHmxCGVHe3PpbWLdrKt+FvE11bawWP
nvfJQcp4DWquMraw6V1d5fGKn1tSQLU7ss0btKT9Ti4xl3LixNOCtZJixxIR5g05
yrkZYZV3cCh4wRF0pSGaK2KIAYMf89fprngnHieY0l/ow72wH2yHmKNXyQdORBPA
2wIDAQAB
-----END PUBLIC KEY-----
)";

const JwtVerifier& Verifier(int which) {
  static std::unique_ptr<JwtVerifier> verifiers[8];
  auto& v = verifiers[which & 7];
  if (!v) {
    JwtOptions o;
    if (which & 1) o.hs256_secret = std::string(kSecret);
    if (which & 2) o.rs256_public_key_pem = kRsaPublicKeyPem;
    if ((which & 3) == 0) o.verified_upstream = true;
    if (which & 4) {
      o.issuer = "https://issuer.example";
      o.audience = "tollgate";
    }
    auto made = JwtVerifier::Create(o);
    FUZZ_CHECK(made.ok(), "verifier options refused: " + made.status().ToString());
    v = std::move(*made);
  }
  return *v;
}

void CheckBase64(std::string_view text) {
  std::string decoded;
  if (tollgate::Base64UrlDecode(text, &decoded)) {
    std::string_view unpadded = text;
    while (!unpadded.empty() && unpadded.back() == '=') unpadded.remove_suffix(1);
    FUZZ_CHECK(tollgate::Base64UrlEncode(decoded) == unpadded,
               "two spellings of one value: " + Quote(text));
  }
  std::string back;
  FUZZ_CHECK(tollgate::Base64UrlDecode(tollgate::Base64UrlEncode(text), &back) && back == text,
             "Encode then Decode is not the identity: " + Quote(text));
}

std::string SignHs256(std::string_view header, std::string_view payload) {
  std::string input = tollgate::Base64UrlEncode(header) + "." + tollgate::Base64UrlEncode(payload);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kSecret.data(), static_cast<int>(kSecret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return input + "." +
         tollgate::Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(mac), len));
}

void CheckClaims(const JwtClaims& claims, std::string_view claim_path) {
  if (claims.state == JwtClaims::State::kInvalid) {
    FUZZ_CHECK(!claims.error.empty(), "an invalid token without a reason");
  }
  FUZZ_CHECK(claims.usable() == (claims.state == JwtClaims::State::kVerified),
             "usable() disagrees with the state");
  if (claims.usable()) {
    FUZZ_CHECK(claims.payload.is_object(), "usable claims that are not an object");
    (void)claims.Claim(claim_path);
    (void)claims.Claim("sub");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const JwtVerifier& verifier = Verifier(mode >> 1);
  const std::string_view claim_path = in.Until('\n');
  if (mode & 1) {
    const std::string_view header = in.Until('\n');
    const std::string_view payload = in.Rest();
    CheckBase64(header);
    const std::string token = SignHs256(header, payload);
    const JwtClaims claims = verifier.Verify(token, kNow);
    CheckClaims(claims, claim_path);
    const auto jose = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
    const bool hs256 = jose.is_object() && jose.contains("alg") && jose["alg"] == "HS256";
    if (token.size() <= tollgate::kMaxJwtBytes && hs256 && (mode & 2)) {
      FUZZ_CHECK(claims.error != "bad signature",
                 "a token signed with the configured HS256 key failed its signature check");
    }
    return 0;
  }
  const std::string_view authorization = in.Rest();
  CheckBase64(authorization.substr(0, 512));
  const std::string_view token = JwtVerifier::BearerToken(authorization);
  FUZZ_CHECK(token.size() <= authorization.size(), "a token longer than its header");
  CheckClaims(verifier.Verify(token.empty() ? authorization : token, kNow), claim_path);
  return 0;
}
