// Client address resolution: the TCP peer, or, when the peer is a trusted
// proxy, the rightmost untrusted hop of X-Forwarded-For / Forwarded. The
// address types (IpAddress, Cidr) are public: tollgate/ip_address.h.
//
// Thread safety: immutable after Create(); share freely.
#ifndef TOLLGATE_SRC_POLICY_CLIENT_IP_H_
#define TOLLGATE_SRC_POLICY_CLIENT_IP_H_

#include <string>
#include <vector>

#include "tollgate/ip_address.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"
#include "tollgate/status.h"

namespace tollgate {

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
