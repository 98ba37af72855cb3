// IpAddress and Cidr: parsing and prefix matching of IPv4 and IPv6 addresses,
// for trusted-proxy lists, per-IP rules and the gateway's peer checks.
//
// Parse never throws: text that is not an address (or a CIDR) is nullopt. An
// IPv4-mapped IPv6 address (::ffff:1.2.3.4) is the IPv4 address, and a mapped
// CIDR (::ffff:10.0.0.0/104) the IPv4 prefix, so one list covers both forms.
//
// Thread safety: plain values; share freely once built. Implemented in
// tollgate_base (src/base/ip_address.cc).
#ifndef TOLLGATE_IP_ADDRESS_H_
#define TOLLGATE_IP_ADDRESS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // v4 uses the first 4

  // Parses "1.2.3.4", "::1", "[::1]", "1.2.3.4:80", "[::1]:80"; IPv4-mapped IPv6
  // becomes IPv4. Zone ids are refused.
  static std::optional<IpAddress> Parse(std::string_view text);
  std::string ToString() const;  // canonical (inet_ntop)
};

struct Cidr {
  IpAddress base;
  int prefix = 0;
  // "10.0.0.0/8", "::1/128", or a bare address (full prefix).
  static std::optional<Cidr> Parse(std::string_view text);
  bool Contains(const IpAddress& ip) const;
};

}  // namespace tollgate

#endif  // TOLLGATE_IP_ADDRESS_H_
