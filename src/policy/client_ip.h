// Client address resolution: the TCP peer, or, when the peer is a trusted
// proxy, the rightmost untrusted hop of X-Forwarded-For / Forwarded.
//
// Thread safety: immutable after Create(); share freely.
#ifndef TOLLGATE_SRC_POLICY_CLIENT_IP_H_
#define TOLLGATE_SRC_POLICY_CLIENT_IP_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/policy.h"
#include "tollgate/request.h"
#include "tollgate/status.h"

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

class ClientIpResolver {
 public:
  static Result<ClientIpResolver> Create(const std::vector<std::string>& trusted_cidrs,
                                         ForwardedHeader header);
  // The normalised client address, or "" when the peer address is unusable.
  std::string Resolve(const RequestView& request) const;
  bool Trusted(const IpAddress& ip) const;

 private:
  std::vector<Cidr> trusted_;
  ForwardedHeader header_ = ForwardedHeader::kXForwardedFor;
};

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_CLIENT_IP_H_
