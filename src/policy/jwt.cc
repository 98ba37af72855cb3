#include "policy/jwt.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include <array>
#include <cmath>
#include <mutex>
#include <unordered_set>

#include "tollgate/http_text.h"

namespace tollgate {
namespace {

int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// Parses a JSON object without exceptions and with bounded nesting.
std::optional<nlohmann::json> ParseObject(const std::string& text) {
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') {
      if (++depth > 16) return std::nullopt;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

JwtClaims Invalid(std::string why) {
  JwtClaims c;
  c.state = JwtClaims::State::kInvalid;
  c.error = std::move(why);
  return c;
}

}  // namespace

// Keys, and a bounded set of RS256 tokens whose signature already verified
// (by SHA-256 of the whole token), so a client repeating its token costs one
// hash instead of one RSA verification per request. Only successes are cached;
// exp / nbf / iss / aud are checked on every request.
struct JwtVerifier::Keys {
  static constexpr size_t kShards = 16;
  static constexpr size_t kPerShard = 1024;

  EVP_PKEY* rsa = nullptr;
  struct Shard {
    std::mutex mu;
    std::unordered_set<std::string> digests;  // guarded by mu
  };
  std::array<Shard, kShards> verified;

  ~Keys() { EVP_PKEY_free(rsa); }

  static std::string Digest(std::string_view token) {
    std::string d(SHA256_DIGEST_LENGTH, '\0');
    SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(),
           reinterpret_cast<unsigned char*>(d.data()));
    return d;
  }
  Shard& ShardFor(const std::string& digest) {
    return verified[static_cast<unsigned char>(digest[0]) % kShards];
  }
  bool Known(const std::string& digest) {
    Shard& s = ShardFor(digest);
    std::lock_guard<std::mutex> lock(s.mu);
    return s.digests.count(digest) != 0;
  }
  void Remember(const std::string& digest) {
    Shard& s = ShardFor(digest);
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.digests.size() >= kPerShard) s.digests.clear();  // bounded; refills with hot tokens
    s.digests.insert(digest);
  }
};

bool Base64UrlDecode(std::string_view in, std::string* out) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out->clear();
  out->reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = B64Value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Canonical encodings only: leftover bits must be zero, so one token has one spelling.
  return (acc & ((1u << bits) - 1)) == 0;
}

std::string Base64UrlEncode(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  return out;
}

std::optional<std::string> JwtClaims::Claim(std::string_view path) const {
  if (!payload.is_object()) return std::nullopt;
  const nlohmann::json* node = &payload;
  while (true) {
    const size_t dot = path.find('.');
    const std::string part(path.substr(0, dot));
    // A claim name that itself contains dots is tried whole first.
    auto whole = node->find(std::string(path));
    if (whole != node->end()) {
      node = &*whole;
      break;
    }
    auto it = node->find(part);
    if (it == node->end()) return std::nullopt;
    node = &*it;
    if (dot == std::string_view::npos) break;
    if (!node->is_object()) return std::nullopt;
    path = path.substr(dot + 1);
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_number() || node->is_boolean()) return node->dump();
  return std::nullopt;
}

Status ValidateJwtOptions(const JwtOptions& options) {
  auto verifier = JwtVerifier::Create(options);
  return verifier.ok() ? Status::Ok() : verifier.status();
}

Result<std::unique_ptr<JwtVerifier>> JwtVerifier::Create(const JwtOptions& options) {
  std::unique_ptr<JwtVerifier> v(new JwtVerifier());
  v->options_ = options;
  v->keys_ = std::make_unique<Keys>();
  if (!options.rs256_public_key_pem.empty()) {
    BIO* bio = BIO_new_mem_buf(options.rs256_public_key_pem.data(),
                               static_cast<int>(options.rs256_public_key_pem.size()));
    if (!bio) return InternalError("jwt: cannot allocate a BIO");
    v->keys_->rsa = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (!v->keys_->rsa) {
      return InvalidArgument("jwt: rs256_public_key_pem is not a PEM public key");
    }
    if (EVP_PKEY_get_base_id(v->keys_->rsa) != EVP_PKEY_RSA) {
      return InvalidArgument("jwt: rs256_public_key_pem is not an RSA key");
    }
    if (EVP_PKEY_get_bits(v->keys_->rsa) < 2048) {
      return InvalidArgument("jwt: RSA keys shorter than 2048 bits are refused");
    }
  }
  if (options.leeway.count() < 0 || options.leeway.count() > 3600) {
    return InvalidArgument("jwt: leeway must be between 0 and 3600 seconds");
  }
  return v;
}

JwtVerifier::~JwtVerifier() = default;

bool JwtVerifier::can_verify() const {
  return !options_.hs256_secret.empty() || keys_->rsa != nullptr;
}

std::string_view JwtVerifier::BearerToken(std::string_view authorization) {
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  static constexpr std::string_view kBearer = "bearer ";
  if (!StartsWithIgnoreCase(authorization, kBearer)) return {};
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return token;
}

JwtClaims JwtVerifier::Verify(std::string_view token, int64_t wall_now_s) const {
  if (token.empty()) return {};
  if (token.size() > kMaxJwtBytes) return Invalid("token longer than 8 KiB");
  const size_t dot1 = token.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return Invalid("not a JWS compact token (header.payload.signature)");
  }
  const std::string_view signing_input = token.substr(0, dot2);
  std::string header_text, payload_text, signature;
  if (!Base64UrlDecode(token.substr(0, dot1), &header_text) ||
      !Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1), &payload_text) ||
      !Base64UrlDecode(token.substr(dot2 + 1), &signature)) {
    return Invalid("bad base64url");
  }
  auto header = ParseObject(header_text);
  auto payload = ParseObject(payload_text);
  if (!header || !payload) return Invalid("header or payload is not a JSON object");
  auto alg_it = header->find("alg");
  if (alg_it == header->end() || !alg_it->is_string()) return Invalid("no alg");
  const std::string alg = alg_it->get<std::string>();
  if (alg != "HS256" && alg != "RS256") return Invalid("alg '" + alg.substr(0, 16) + "' refused");
  // RFC 7515 4.1.11: the extensions listed in "crit" must be understood, and
  // this verifier understands none (an empty or malformed list is invalid too).
  if (header->contains("crit")) return Invalid("crit header parameter not understood");

  JwtClaims claims;
  claims.payload = std::move(*payload);
  bool verified = false;
  if (alg == "HS256" && !options_.hs256_secret.empty()) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (!HMAC(EVP_sha256(), options_.hs256_secret.data(),
              static_cast<int>(options_.hs256_secret.size()),
              reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(),
              mac, &mac_len)) {
      return Invalid("hmac failed");
    }
    if (signature.size() != mac_len || CRYPTO_memcmp(signature.data(), mac, mac_len) != 0) {
      return Invalid("bad signature");
    }
    verified = true;
  } else if (alg == "RS256" && keys_->rsa) {
    const std::string digest = Keys::Digest(token);
    if (keys_->Known(digest)) {
      verified = true;
    } else {
      EVP_MD_CTX* ctx = EVP_MD_CTX_new();
      if (!ctx) return Invalid("out of memory");
      const bool ok =
          EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, keys_->rsa) == 1 &&
          EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                           signature.size(),
                           reinterpret_cast<const unsigned char*>(signing_input.data()),
                           signing_input.size()) == 1;
      EVP_MD_CTX_free(ctx);
      if (!ok) return Invalid("bad signature");
      keys_->Remember(digest);
      verified = true;
    }
  } else if (can_verify()) {
    // A key is configured, but not for this algorithm: never fall back to trust.
    return Invalid("no key configured for " + alg);
  }

  const int64_t leeway = options_.leeway.count();
  auto time_claim = [&](const char* name, int64_t* out) -> bool {
    auto it = claims.payload.find(name);
    if (it == claims.payload.end()) return true;
    if (!it->is_number()) return false;
    const double v = it->get<double>();
    if (!std::isfinite(v) || std::fabs(v) > 1e15) return false;
    *out = static_cast<int64_t>(v);
    return true;
  };
  int64_t exp = INT64_MAX;
  int64_t nbf = INT64_MIN;
  if (!time_claim("exp", &exp) || !time_claim("nbf", &nbf)) return Invalid("bad exp or nbf");
  if (exp != INT64_MAX && wall_now_s > exp + leeway) return Invalid("expired");
  if (nbf != INT64_MIN && wall_now_s + leeway < nbf) return Invalid("not yet valid (nbf)");
  if (!options_.issuer.empty()) {
    auto it = claims.payload.find("iss");
    if (it == claims.payload.end() || !it->is_string() || *it != options_.issuer) {
      return Invalid("wrong issuer");
    }
  }
  if (!options_.audience.empty()) {
    auto it = claims.payload.find("aud");
    bool ok = false;
    if (it != claims.payload.end() && it->is_string()) ok = *it == options_.audience;
    if (it != claims.payload.end() && it->is_array()) {
      for (const auto& a : *it) ok = ok || (a.is_string() && a == options_.audience);
    }
    if (!ok) return Invalid("wrong audience");
  }
  if (verified || options_.verified_upstream) {
    claims.state = JwtClaims::State::kVerified;
  } else {
    claims.state = JwtClaims::State::kUnverified;
    claims.error = "no verification key configured and jwt.verified_upstream is false";
  }
  return claims;
}

}  // namespace tollgate
