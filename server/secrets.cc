#include "server/secrets.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tollgate::server {

bool ReadSecretFile(const std::string& path, std::string* secret, std::string* why) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = std::string("cannot open: ") + std::strerror(errno ? errno : ENOENT);
    return false;
  }
  // One byte more than the longest accepted line and its CRLF tells "too long".
  std::string text;
  text.resize(kMaxSecretBytes + 3);
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (in.bad()) {
    *why = "cannot read (not a regular file?)";
    return false;
  }
  if (text.size() > kMaxSecretBytes + 2) {
    *why = "larger than " + std::to_string(kMaxSecretBytes) + " bytes";
    return false;
  }
  if (text.empty()) {
    *why = "is empty";
    return false;
  }
  std::string_view line(text);
  if (line.ends_with("\r\n")) {
    line.remove_suffix(2);
  } else if (line.ends_with('\n')) {
    line.remove_suffix(1);
  }
  const size_t eol = line.find_first_of("\r\n");
  if (line.empty() || eol == 0) {
    *why = "the first line is blank (the token must be on the first line)";
    return false;
  }
  if (eol != std::string_view::npos) {
    *why = "has more than one line (expected exactly one line: the secret)";
    return false;
  }
  *secret = std::string(line);
  return true;
}

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

}  // namespace tollgate::server
