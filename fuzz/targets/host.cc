// Fuzz target: the host source's authority parsing (NormalizeHost,
// src/policy/request_fields.cc).
//
// Input: a Host / :authority value as a client sends it.
// Properties:
//   - a result is non-empty, lower case, without a port, and normalising it
//     again gives it back (one spelling per host);
//   - a reg-name result holds only [a-z0-9._-] with no empty label; an IPv6
//     result is bracketed and parses as an address;
//   - appending a valid port never changes the result.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "policy/request_fields.h"
#include "tollgate/ip_address.h"

using tollgate::fuzz::Quote;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view authority(reinterpret_cast<const char*>(data), size);
  const auto host = tollgate::NormalizeHost(authority);
  if (!host) return 0;
  FUZZ_CHECK(!host->empty() && host->size() <= tollgate::kMaxHostBytes, "size: " + Quote(*host));
  const auto again = tollgate::NormalizeHost(*host);
  FUZZ_CHECK(again && *again == *host, "not stable: " + Quote(authority) + " -> " + Quote(*host));
  if (host->front() == '[') {
    FUZZ_CHECK(host->back() == ']', "unclosed literal: " + Quote(*host));
    FUZZ_CHECK(tollgate::IpAddress::Parse(host->substr(1, host->size() - 2)).has_value(),
               "a literal that is no address: " + Quote(*host));
  } else {
    for (char c : *host) {
      FUZZ_CHECK(
          (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_',
          "a character outside a host name: " + Quote(*host));
    }
    FUZZ_CHECK(host->find("..") == std::string::npos && host->front() != '.' && host->back() != '.',
               "an empty label: " + Quote(*host));
  }
  if (authority.size() + 4 > tollgate::kMaxHostBytes) return 0;
  if (authority.find(':') == std::string_view::npos || authority.front() == '[') {
    if (authority.back() != ']' && authority.front() == '[') return 0;  // has a port already
    const auto with_port = tollgate::NormalizeHost(std::string(authority) + ":443");
    FUZZ_CHECK(with_port && *with_port == *host, "a port changed the host: " + Quote(authority));
  }
  return 0;
}
