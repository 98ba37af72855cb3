// Fuzz target: client address resolution (src/policy/client_ip.cc, over
// IpAddress and Cidr of src/base/ip_address.cc): the peer
// address, trusted-proxy CIDRs, X-Forwarded-For and Forwarded.
//
// Input: lines. Line 1: the peer address; line 2: trusted CIDRs, separated by
// spaces; line 3: "f" to read Forwarded instead of X-Forwarded-For; every
// further line: one value of that header (a header may repeat).
// Properties:
//   - IpAddress::Parse of ToString() gives the same address back (canonical);
//   - Cidr::Contains holds for the CIDR's own base address;
//   - Resolve() returns "" only when the peer is not an address, and otherwise
//     a canonical address: the peer itself when the peer is not trusted.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "policy/client_ip.h"

namespace {

using tollgate::Cidr;
using tollgate::IpAddress;
using tollgate::fuzz::Quote;

void CheckAddress(std::string_view text) {
  const auto ip = IpAddress::Parse(text);
  if (!ip) return;
  const std::string canonical = ip->ToString();
  FUZZ_CHECK(!canonical.empty(), "no text for " + Quote(text));
  const auto again = IpAddress::Parse(canonical);
  FUZZ_CHECK(again && again->v6 == ip->v6 && again->bytes == ip->bytes,
             "not canonical: " + Quote(text) + " -> " + Quote(canonical));
  FUZZ_CHECK(again->ToString() == canonical, "ToString unstable: " + Quote(canonical));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const std::string peer(in.Until('\n'));
  const std::string_view cidr_line = in.Until('\n');
  const bool forwarded = in.Until('\n') == "f";
  std::vector<std::string> header_values;
  while (!in.empty() && header_values.size() < 64) header_values.emplace_back(in.Until('\n'));

  CheckAddress(peer);
  std::vector<std::string> cidrs;
  for (size_t start = 0; start < cidr_line.size();) {
    const size_t end = std::min(cidr_line.find(' ', start), cidr_line.size());
    if (end > start) cidrs.emplace_back(cidr_line.substr(start, end - start));
    start = end + 1;
  }
  std::vector<std::string> usable;
  for (const std::string& c : cidrs) {
    CheckAddress(c);
    const auto cidr = Cidr::Parse(c);
    if (!cidr) continue;
    FUZZ_CHECK(cidr->prefix >= 0 && cidr->prefix <= (cidr->base.v6 ? 128 : 32),
               "prefix out of range: " + Quote(c));
    FUZZ_CHECK(cidr->Contains(cidr->base), "a CIDR without its own base: " + Quote(c));
    usable.push_back(c);
  }
  for (const std::string& v : header_values) CheckAddress(v);

  auto resolver = tollgate::ClientIpResolver::Create(
      usable, forwarded ? tollgate::ForwardedHeader::kForwarded
                        : tollgate::ForwardedHeader::kXForwardedFor);
  FUZZ_CHECK(resolver.ok(), "CIDRs that parse were refused: " + resolver.status().ToString());
  std::vector<tollgate::HeaderPair> headers;
  for (const std::string& v : header_values) {
    headers.emplace_back(forwarded ? "Forwarded" : "X-Forwarded-For", v);
  }
  tollgate::RequestView view;
  view.peer_address = peer;
  view.headers = headers;
  const std::string client = resolver->Resolve(view);
  const auto peer_ip = IpAddress::Parse(peer);
  if (!peer_ip) {
    FUZZ_CHECK(client.empty(), "an address for an unusable peer: " + Quote(client));
    return 0;
  }
  const auto client_ip = IpAddress::Parse(client);
  FUZZ_CHECK(client_ip && client_ip->ToString() == client,
             "resolved to a non-canonical address: " + Quote(client));
  if (!resolver->Trusted(*peer_ip)) {
    FUZZ_CHECK(client == peer_ip->ToString(), "an untrusted peer's headers were believed");
  }
  return 0;
}
