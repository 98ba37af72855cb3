#include "policy/client_ip.h"

#include "tollgate/http_text.h"

namespace tollgate {
namespace {

constexpr size_t kMaxHops = 64;  // forwarded hops walked at most, from the right

// Splits on ',' and returns the items right to left (at most kMaxHops).
std::vector<std::string_view> HopsRightToLeft(const std::vector<std::string_view>& values) {
  std::vector<std::string_view> hops;
  for (auto v = values.rbegin(); v != values.rend() && hops.size() < kMaxHops; ++v) {
    std::string_view s = *v;
    while (hops.size() < kMaxHops) {
      const size_t comma = s.rfind(',');
      hops.push_back(TrimOws(comma == std::string_view::npos ? s : s.substr(comma + 1)));
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
    std::string_view pair = TrimOws(element.substr(0, semi));
    element = semi == std::string_view::npos ? std::string_view() : element.substr(semi + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = TrimOws(pair.substr(0, eq));
    if (!EqualsIgnoreCase(name, "for")) continue;
    std::string_view value = TrimOws(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return {};
}

}  // namespace

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
