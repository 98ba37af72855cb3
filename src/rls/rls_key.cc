#include "rls/rls_key.h"

#include <openssl/evp.h>

namespace tollgate::rls {
namespace {

bool Plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '~' || c == '-';
}

constexpr char kHex[] = "0123456789abcdef";

std::string Sha256Hex(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace

void AppendEscaped(std::string_view s, std::string* out) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (Plain(c)) {
      *out += ch;
    } else {
      *out += '%';
      *out += kHex[c >> 4];
      *out += kHex[c & 15];
    }
  }
}

std::string BucketKey(std::string_view shape, std::string_view domain,
                      const std::vector<RlsEntry>& entries) {
  std::string key;
  size_t estimate = 8 + shape.size() + domain.size();
  for (const auto& e : entries) estimate += e.key.size() + e.value.size() + 2;
  key.reserve(estimate);
  key += "rls|";
  key += shape;
  key += '|';
  AppendEscaped(domain, &key);
  for (const auto& e : entries) {
    key += '|';
    AppendEscaped(e.key, &key);
    key += '=';
    AppendEscaped(e.value, &key);
  }
  if (key.size() > kMaxRlsKeyBytes) {
    const std::string digest = Sha256Hex(key);
    key.resize(kMaxRlsKeyBytes - digest.size() - 1);
    // Never cut a %XX escape in half.
    for (size_t i = key.size() >= 2 ? key.size() - 2 : 0; i < key.size(); ++i) {
      if (key[i] == '%') {
        key.resize(i);
        break;
      }
    }
    key += '#';
    key += digest;
  }
  return key;
}

}  // namespace tollgate::rls
