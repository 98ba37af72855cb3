#include "redis/redis_keys.h"

#include <openssl/evp.h>

namespace tollgate::redis {
namespace {

bool Safe(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '.':
    case '_':
    case ':':
    case '/':
    case '=':
    case '@':
    case '+':
    case ',':
    case '!':
    case '-':
      return true;
    default:
      return false;
  }
}

constexpr char kHex[] = "0123456789abcdef";

std::string HexSha256(std::string_view key, unsigned int bytes, std::string out) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), md, &len, EVP_sha256(), nullptr);
  for (unsigned int i = 0; i < bytes && i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string HashedKey(std::string_view key) { return HexSha256(key, 16, "#"); }

}  // namespace

std::string EscapeKey(std::string_view key) {
  if (key.size() > kMaxEscapedKey) return HashedKey(key);
  std::string out;
  out.reserve(key.size() + 8);
  for (unsigned char c : key) {
    if (Safe(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    if (out.size() > kMaxEscapedKey) return HashedKey(key);
  }
  return out;
}

std::string RedisKey(std::string_view prefix, std::string_view key) {
  std::string out(prefix);
  out += EscapeKey(key);
  return out;
}

std::string_view IdentityOf(std::string_view key) {
  const size_t sep = key.rfind('\x1f');
  return sep == std::string_view::npos ? key : key.substr(sep + 1);
}

std::string ClusterRedisKey(std::string_view prefix, std::string_view key) {
  std::string out(prefix);
  out += '{';
  out = HexSha256(IdentityOf(key), 4, std::move(out));
  out += '}';
  out += EscapeKey(key);
  return out;
}

}  // namespace tollgate::redis
