#include "tollgate/identity_redactor.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <random>

#include "tollgate/log_text.h"

namespace tollgate {

IdentityRedactor::IdentityRedactor(std::string_view key, bool raw) : key_(key), raw_(raw) {
  if (!key_.empty()) return;
  key_.resize(32);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key_.data()), int(key_.size())) != 1) {
    std::random_device rd;  // the kernel's CSPRNG on Linux
    for (char& c : key_) c = static_cast<char>(rd());
  }
}

std::string IdentityRedactor::Hash(std::string_view identity) const {
  static constexpr char kHex[] = "0123456789abcdef";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), int(key_.size()),
       reinterpret_cast<const unsigned char*>(identity.data()), identity.size(), mac, &len);
  std::string out = "hmac:";
  for (unsigned int i = 0; i < 8 && i < len; ++i) {
    out.push_back(kHex[mac[i] >> 4]);
    out.push_back(kHex[mac[i] & 15]);
  }
  return out;
}

std::string IdentityRedactor::Show(std::string_view identity, bool raw_requested) const {
  return raw_ || raw_requested ? std::string(identity) : Hash(identity);
}

std::string IdentityRedactor::ShowInLog(std::string_view identity) const {
  return raw_ ? ClientLogText(identity) : Hash(identity);
}

}  // namespace tollgate
