#include "redis/redis_keys.h"

#include <openssl/evp.h>

#include <array>

namespace tollgate::redis {
namespace {

// The bytes an escaped key keeps as they are: [A-Za-z0-9._:/=@+,!-].
constexpr std::array<bool, 256> MakeSafeTable() {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<size_t>(c)] = true;
  for (int c = '0'; c <= '9'; ++c) t[static_cast<size_t>(c)] = true;
  for (unsigned char c : std::string_view("._:/=@+,!-")) t[c] = true;
  return t;
}
constexpr std::array<bool, 256> kSafe = MakeSafeTable();

bool Safe(unsigned char c) { return kSafe[c]; }

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

namespace {

// Appends the escaped (or hashed) form of `key` to `out`.
void AppendEscaped(std::string& out, std::string_view key) {
  if (key.size() > kMaxEscapedKey) {
    out += HashedKey(key);
    return;
  }
  // Most keys need no escaping: copy the safe run in one go.
  size_t safe = 0;
  while (safe < key.size() && Safe(static_cast<unsigned char>(key[safe]))) ++safe;
  if (safe == key.size()) {
    out.append(key);
    return;
  }
  const size_t start = out.size();
  out.append(key.substr(0, safe));
  for (size_t i = safe; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (Safe(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    if (out.size() - start > kMaxEscapedKey) {
      out.resize(start);
      out += HashedKey(key);
      return;
    }
  }
}

}  // namespace

std::string EscapeKey(std::string_view key) {
  std::string out;
  AppendEscaped(out, key);
  return out;
}

std::string RedisKey(std::string_view prefix, std::string_view key) {
  std::string out;
  out.reserve(prefix.size() + key.size() + 24);  // room for a window suffix
  out.append(prefix);
  AppendEscaped(out, key);
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
  AppendEscaped(out, key);
  return out;
}

}  // namespace tollgate::redis
