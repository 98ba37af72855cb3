#include "tollgate/ip_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "tollgate/http_text.h"

namespace tollgate {

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  text = TrimOws(text);
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string host;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
    host = std::string(text.substr(1, close - 1));
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    host = std::string(text.substr(0, text.find(':')));  // "1.2.3.4:port"
  } else {
    host = std::string(text);
  }
  IpAddress ip;
  in_addr a4;
  in6_addr a6;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    std::memcpy(ip.bytes.data(), &a4, 4);
    return ip;
  }
  if (host.find('%') != std::string::npos) return std::nullopt;
  if (inet_pton(AF_INET6, host.c_str(), &a6) != 1) return std::nullopt;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(&a6, kMapped, 12) == 0) {
    std::memcpy(ip.bytes.data(), reinterpret_cast<const uint8_t*>(&a6) + 12, 4);
    return ip;
  }
  ip.v6 = true;
  std::memcpy(ip.bytes.data(), &a6, 16);
  return ip;
}

std::string IpAddress::ToString() const {
  if (!v6) {
    // Dotted decimal by hand, as inet_ntop writes it (no leading zeros):
    // glibc's goes through sprintf, 1.7k instructions on every decision keyed
    // by the client's address.
    char out[16];
    char* p = out;
    for (int i = 0; i < 4; ++i) {
      if (i > 0) *p++ = '.';
      const unsigned v = bytes[i];
      if (v >= 100) *p++ = static_cast<char>('0' + v / 100);
      if (v >= 10) *p++ = static_cast<char>('0' + v / 10 % 10);
      *p++ = static_cast<char>('0' + v % 10);
    }
    return std::string(out, p);
  }
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf))) return "";
  return buf;
}

std::optional<Cidr> Cidr::Parse(std::string_view text) {
  text = TrimOws(text);
  const size_t slash = text.find('/');
  const std::string_view addr = text.substr(0, slash);
  if (addr.find(':') == std::string_view::npos && addr.find('.') == std::string_view::npos) {
    return std::nullopt;
  }
  auto ip = IpAddress::Parse(addr);
  if (!ip || addr.front() == '[') return std::nullopt;
  Cidr c;
  c.base = *ip;
  const int max = ip->v6 ? 128 : 32;
  c.prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view p = text.substr(slash + 1);
    if (p.empty() || p.size() > 3) return std::nullopt;
    int v = 0;
    for (char ch : p) {
      if (ch < '0' || ch > '9') return std::nullopt;
      v = v * 10 + (ch - '0');
    }
    // An IPv4-mapped IPv6 CIDR (::ffff:10.0.0.0/104) maps onto the IPv4 prefix.
    if (!ip->v6 && addr.find(':') != std::string_view::npos) v -= 96;
    if (v < 0 || v > max) return std::nullopt;
    c.prefix = v;
  }
  return c;
}

bool Cidr::Contains(const IpAddress& ip) const {
  if (ip.v6 != base.v6) return false;
  int bits = prefix;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((ip.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
  }
  return true;
}

}  // namespace tollgate
