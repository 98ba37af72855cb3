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

std::string HashedKey(std::string_view key) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), md, &len, EVP_sha256(), nullptr);
  std::string out = "#";
  for (unsigned int i = 0; i < 16 && i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

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

}  // namespace tollgate::redis
