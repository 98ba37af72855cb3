// Fuzz target: the admin listener's guard against web pages and DNS rebinding
// (server/admin_guard.h): the Host, Origin, Content-Type and Sec-Fetch-Site
// fields any client (a browser on a hostile page included) sends.
//
// Input: one byte of flags (bit 0: a state-changing method, POST, else GET;
// bit 1: the route takes a JSON body; bit 2: a token is configured), then up
// to 16 header lines "name: value" separated by '\n'.
// Properties:
//   - the Host check refuses (421) exactly when there is more than one Host
//     field or its one value is not IsAdminHost; an accepted Host is an IP
//     literal, "localhost" or the configured name, by a second, independent
//     reading of the value;
//   - a read (GET) is never refused by the change check; a refusal is 403 or
//     415 and renders as one well-framed problem response whose detail holds
//     no control byte;
//   - an accepted change has no Sec-Fetch-Site cross-site or same-site, at
//     most one Origin, the same origin when there is one, and (JSON body, or
//     no token) exactly one Content-Type, application/json;
//   - SameOrigin and IsAdminHost do not depend on the case of ASCII letters.
#include <arpa/inet.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/admin_guard.h"
#include "tollgate/http_text.h"

namespace {

using tollgate::EqualsIgnoreCase;
using tollgate::fuzz::Quote;
namespace server = tollgate::server;

const std::vector<std::string> kNames = {"ops.example"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool Ip(std::string_view s, int family) {
  if (s.size() > 64) return false;
  unsigned char buf[16];
  return ::inet_pton(family, std::string(s).c_str(), buf) == 1;
}

// The host an accepted Host value names, read another way: the whole value
// as an address, else what precedes a ":digits" suffix, without brackets.
bool Names(std::string_view value) {
  if (Ip(value, AF_INET6)) return true;
  const size_t colon = value.rfind(':');
  std::string_view host = value;
  if (colon != std::string_view::npos && value.find(']', colon) == std::string_view::npos) {
    host = value.substr(0, colon);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return Ip(host.substr(1, host.size() - 2), AF_INET6);
  }
  return Ip(host, AF_INET) || EqualsIgnoreCase(host, "localhost") ||
         EqualsIgnoreCase(host, kNames[0]);
}

std::string Flipped(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    } else if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

void CheckRendered(const server::AdminRefusal& r) {
  for (unsigned char c : r.detail) {
    FUZZ_CHECK(c >= 0x20 && c < 0x7f, "a control or non-ASCII byte in " + Quote(r.detail));
  }
  tollgate::fuzz::CheckSerialized(server::Problem(r.status, "Admin request refused", r.detail),
                                  true, false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t flags = in.Byte();
  std::vector<tollgate::HeaderPair> fields;
  std::vector<std::string_view> hosts, origins, types, sites;
  while (!in.empty() && fields.size() < 16) {
    const std::string_view line = in.Until('\n');
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    fields.emplace_back(name, value);
    if (EqualsIgnoreCase(name, "host")) hosts.push_back(value);
    if (EqualsIgnoreCase(name, "origin")) origins.push_back(value);
    if (EqualsIgnoreCase(name, "content-type")) types.push_back(value);
    if (EqualsIgnoreCase(name, "sec-fetch-site")) sites.push_back(value);
  }
  tollgate::RequestView view;
  view.method = (flags & 1) ? "POST" : "GET";
  view.path = "/v1/keys/reset";
  view.headers = fields;
  server::RouteResult route;
  route.json_body = (flags & 2) != 0;
  const bool token = (flags & 4) != 0;

  const auto host = server::ScreenAdminHost(view, kNames);
  const bool host_ok =
      hosts.empty() || (hosts.size() == 1 && server::IsAdminHost(hosts[0], kNames));
  FUZZ_CHECK(host.has_value() != host_ok, "the Host check disagrees with IsAdminHost");
  if (host) {
    FUZZ_CHECK(host->status == 421, "a Host refusal of " + std::to_string(host->status));
    CheckRendered(*host);
  }
  for (std::string_view h : hosts) {
    const bool admin = server::IsAdminHost(h, kNames);
    FUZZ_CHECK(!admin || Names(h), "accepted a Host naming something else: " + Quote(h));
    FUZZ_CHECK(admin == server::IsAdminHost(Flipped(h), kNames), "case matters in " + Quote(h));
  }
  for (std::string_view o : origins) {
    for (std::string_view h : hosts) {
      FUZZ_CHECK(server::SameOrigin(o, h) == server::SameOrigin(Flipped(o), Flipped(h)),
                 "case matters in " + Quote(o) + " vs " + Quote(h));
    }
  }

  const auto change = server::ScreenAdminChange(view, route, token);
  if (!(flags & 1)) {
    FUZZ_CHECK(!change, "a read refused by the change check");
    return 0;
  }
  if (change) {
    FUZZ_CHECK(change->status == 403 || change->status == 415,
               "a refusal of " + std::to_string(change->status));
    CheckRendered(*change);
    return 0;
  }
  for (std::string_view s : sites) {
    s = Trim(s);
    FUZZ_CHECK(!EqualsIgnoreCase(s, "cross-site") && !EqualsIgnoreCase(s, "same-site"),
               "accepted Sec-Fetch-Site " + Quote(s));
  }
  FUZZ_CHECK(origins.size() <= 1, "accepted two Origin fields");
  if (!origins.empty()) {
    FUZZ_CHECK(hosts.size() == 1 && server::SameOrigin(origins[0], hosts[0]),
               "accepted a foreign Origin " + Quote(origins[0]));
  }
  if (route.json_body || !token) {
    FUZZ_CHECK(types.size() == 1 && server::IsJsonMediaType(types[0]),
               "accepted without Content-Type: application/json");
  }
  return 0;
}
