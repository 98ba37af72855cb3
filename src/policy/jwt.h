// JWT (RFC 7519) claims from "Authorization: Bearer <token>", verified with
// HS256 (shared secret) or RS256 (PEM public key) through OpenSSL.
//
// Claims are usable only when the signature verified, or when the operator
// declared that tokens were verified upstream; exp / nbf (with leeway), iss and
// aud are checked either way. alg "none" and unknown algorithms are refused.
//
// Thread safety: Verify() may run on many threads; the only mutable state is a
// bounded cache of RS256 tokens already verified (mutex-sharded).
// Errors: Create() fails on an unusable key; Verify() never throws.
#ifndef TOLLGATE_SRC_POLICY_JWT_H_
#define TOLLGATE_SRC_POLICY_JWT_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "tollgate/policy.h"
#include "tollgate/status.h"

namespace tollgate {

inline constexpr size_t kMaxJwtBytes = 8192;

struct JwtClaims {
  enum class State {
    kNoToken,     // no bearer token
    kVerified,    // signature checked (or verified upstream), times valid: claims usable
    kUnverified,  // well formed but nothing configured to verify it: claims not usable
    kInvalid,     // malformed, bad signature, alg none, expired, wrong iss/aud
  };
  State state = State::kNoToken;
  std::string error;       // why kInvalid / kUnverified
  nlohmann::json payload;  // the claims (object) when well formed

  bool usable() const { return state == State::kVerified; }
  // A claim by dotted path ("plan", "org.id") rendered as text: strings as is,
  // numbers and booleans as JSON writes them; arrays/objects/absent -> nullopt.
  std::optional<std::string> Claim(std::string_view path) const;
};

class JwtVerifier {
 public:
  static Result<std::unique_ptr<JwtVerifier>> Create(const JwtOptions& options);
  ~JwtVerifier();

  JwtClaims Verify(std::string_view token, int64_t wall_now_s) const;
  // The token of an "Authorization: Bearer <token>" value, or empty.
  static std::string_view BearerToken(std::string_view authorization);

  bool can_verify() const;

 private:
  JwtVerifier() = default;
  struct Keys;
  JwtOptions options_;
  std::unique_ptr<Keys> keys_;
};

// base64url without padding (also accepts padding); false on bad input.
bool Base64UrlDecode(std::string_view in, std::string* out);
std::string Base64UrlEncode(std::string_view in);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_JWT_H_
