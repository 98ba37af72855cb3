#include "policy/client_ip.h"

#include <arpa/inet.h>

#include <cstring>

namespace tollgate {
namespace {

constexpr size_t kMaxHops = 64;  // forwarded hops walked at most, from the right

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on ',' and returns the items right to left (at most kMaxHops).
std::vector<std::string_view> HopsRightToLeft(const std::vector<std::string_view>& values) {
  std::vector<std::string_view> hops;
  for (auto v = values.rbegin(); v != values.rend() && hops.size() < kMaxHops; ++v) {
    std::string_view s = *v;
    while (hops.size() < kMaxHops) {
      const size_t comma = s.rfind(',');
      hops.push_back(Trim(comma == std::string_view::npos ? s : s.substr(comma + 1)));
      if (comma == std::string_view::npos) break;
      s = s.substr(0, comma);
    }
  }
  return hops;
}

// The `for=` value of one Forwarded element ("for=192.0.2.60;proto=http"), unquoted.
std::string_view ForwardedFor(std::string_view element) {
  while (!element.empty()) {
    const size_t semi = element.find(';');
    std::string_view pair = Trim(element.substr(0, semi));
    element = semi == std::string_view::npos ? std::string_view() : element.substr(semi + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = Trim(pair.substr(0, eq));
    if (name.size() != 3 || (name[0] | 0x20) != 'f' || (name[1] | 0x20) != 'o' ||
        (name[2] | 0x20) != 'r')
      continue;
    std::string_view value = Trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return {};
}

}  // namespace

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  text = Trim(text);
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
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf))) return "";
  return buf;
}

std::optional<Cidr> Cidr::Parse(std::string_view text) {
  text = Trim(text);
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

Result<ClientIpResolver> ClientIpResolver::Create(const std::vector<std::string>& trusted_cidrs,
                                                  ForwardedHeader header) {
  ClientIpResolver r;
  r.header_ = header;
  for (const std::string& text : trusted_cidrs) {
    auto c = Cidr::Parse(text);
    if (!c) return InvalidArgument("trusted proxy '" + text + "' is not an address or CIDR");
    r.trusted_.push_back(*c);
  }
  return r;
}

bool ClientIpResolver::Trusted(const IpAddress& ip) const {
  for (const Cidr& c : trusted_) {
    if (c.Contains(ip)) return true;
  }
  return false;
}

std::string ClientIpResolver::Resolve(const RequestView& request) const {
  auto peer = IpAddress::Parse(request.peer_address);
  if (!peer) return "";
  if (trusted_.empty() || !Trusted(*peer)) return peer->ToString();
  const bool xff = header_ == ForwardedHeader::kXForwardedFor;
  const auto hops = HopsRightToLeft(request.Headers(xff ? "x-forwarded-for" : "forwarded"));
  // Walk from the right: the first hop not run by us is the client. A hop we
  // cannot parse ends the walk at the last address we could vouch for.
  IpAddress current = *peer;
  for (std::string_view hop : hops) {
    auto ip = IpAddress::Parse(xff ? hop : ForwardedFor(hop));
    if (!ip) break;
    current = *ip;
    if (!Trusted(current)) break;
  }
  return current.ToString();
}

}  // namespace tollgate
