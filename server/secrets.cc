#include "server/secrets.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cerrno>
#include <cstring>

namespace tollgate::server {

std::string CheckSecret(std::string_view secret) {
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(secret[i]);
    if (c <= 0x20 || c >= 0x7f) {
      return "contains whitespace, a control byte or a non-ASCII byte (at byte " +
             std::to_string(i) + "); use visible ASCII only";
    }
  }
  if (secret.size() < kMinSecretBytes) {
    return "is " + std::to_string(secret.size()) + " bytes; at least " +
           std::to_string(kMinSecretBytes) + " are required";
  }
  if (secret.size() > kMaxSecretBytes) {
    return "is longer than " + std::to_string(kMaxSecretBytes) + " bytes";
  }
  return "";
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  const std::string text(host);
  unsigned char v4[4];
  if (::inet_pton(AF_INET, text.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (::inet_pton(AF_INET6, text.c_str(), v6) != 1) return false;
  static constexpr unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static constexpr unsigned char kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(v6, kLoopback, 16) == 0) return true;
  return std::memcmp(v6, kMappedPrefix, 12) == 0 && v6[12] == 127;
}

bool SecretEquals(std::string_view presented, std::string_view expected) {
  unsigned char a[SHA256_DIGEST_LENGTH];
  unsigned char b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(presented.data()), presented.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(expected.data()), expected.size(), b);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

std::string_view AdminScopeName(AdminScope scope) {
  return scope == AdminScope::kWrite ? "write" : "read";
}

bool ParseAdminScope(std::string_view name, AdminScope* scope) {
  if (name == "read") {
    *scope = AdminScope::kRead;
  } else if (name == "write") {
    *scope = AdminScope::kWrite;
  } else {
    return false;
  }
  return true;
}

bool IsAdminTokenName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

AdminTokens::AdminTokens(std::vector<AdminToken> tokens) : tokens_(std::move(tokens)) {
  bearers_.reserve(tokens_.size());
  for (const AdminToken& t : tokens_) bearers_.push_back("Bearer " + t.secret);
}

const AdminToken* AdminTokens::Match(std::optional<std::string_view> authorization) const {
  if (!authorization) return nullptr;
  const AdminToken* found = nullptr;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    // No early exit: the time is that of comparing with every token.
    const bool equal = SecretEquals(*authorization, bearers_[i]);
    if (equal && found == nullptr) found = &tokens_[i];
  }
  return found;
}

std::string CheckAdminTokenSet(const std::vector<AdminToken>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (tokens[i].name == tokens[j].name)
        return "two tokens are named \"" + tokens[i].name + "\"";
      if (tokens[i].secret == tokens[j].secret) {
        return "tokens \"" + tokens[j].name + "\" and \"" + tokens[i].name +
               "\" have the same secret";
      }
    }
  }
  return "";
}

bool RereadAdminTokens(std::vector<AdminToken>* tokens, std::string* why) {
  std::vector<AdminToken> next = *tokens;
  for (AdminToken& t : next) {
    if (t.file.empty()) continue;
    std::string secret;
    if (!ReadSecretFile(t.file, &secret, why)) {
      *why = t.file + ": " + *why;
      return false;
    }
    if (std::string bad = CheckSecret(secret); !bad.empty()) {
      *why = t.file + ": the token " + bad;
      return false;
    }
    t.secret = std::move(secret);
  }
  if (std::string bad = CheckAdminTokenSet(next); !bad.empty()) {
    *why = bad;
    return false;
  }
  *tokens = std::move(next);
  return true;
}

}  // namespace tollgate::server
