#include "server/admin_guard.h"

#include <arpa/inet.h>

#include <algorithm>

#include "tollgate/http_text.h"

namespace tollgate::server {
namespace {

constexpr size_t kMaxShown = 80;  // bytes of a refused Host or Origin quoted back

// host[:port] as sent in Host or after an Origin's "scheme://".
struct Authority {
  std::string_view host;  // without brackets
  std::string_view port;  // "" when absent
  bool bracketed = false;
};

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// False when `text` is no host[:port]: an unclosed bracket, a port that is
// not 1 to 5 digits, an empty host.
bool SplitAuthority(std::string_view text, Authority* out) {
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    out->host = text.substr(1, close - 1);
    out->bracketed = true;
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':' || !AllDigits(rest.substr(1))) return false;
      out->port = rest.substr(1);
    }
    return !out->host.empty();
  }
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
    out->host = text;  // a bare IPv6 address (no port): only an IP literal passes
    return true;
  }
  out->host = text.substr(0, colon);
  if (colon != std::string_view::npos) {
    out->port = text.substr(colon + 1);
    if (!AllDigits(out->port)) return false;
  }
  return !out->host.empty();
}

bool IsIpLiteral(std::string_view host, bool bracketed) {
  if (host.size() > 64) return false;
  const std::string text(host);
  unsigned char addr[16];
  if (!bracketed && ::inet_pton(AF_INET, text.c_str(), addr) == 1) return true;
  return ::inet_pton(AF_INET6, text.c_str(), addr) == 1;
}

std::string_view DefaultPort(std::string_view scheme) {
  return EqualsIgnoreCase(scheme, "https") ? "443" : "80";
}

std::string Shown(std::string_view value) {
  std::string out(value.substr(0, kMaxShown));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return value.size() > kMaxShown ? out + "..." : out;
}

bool StateChanging(std::string_view method) { return method != "GET" && method != "HEAD"; }

// Sec-Fetch-Site and Origin: the request came from another site's page.
std::optional<AdminRefusal> CrossSite(const RequestView& request) {
  for (std::string_view site : request.Headers("sec-fetch-site")) {
    site = TrimOws(site);
    if (EqualsIgnoreCase(site, "cross-site") || EqualsIgnoreCase(site, "same-site")) {
      return AdminRefusal{403,
                          "a state-changing admin request from another site's page "
                          "(Sec-Fetch-Site: " +
                              Shown(site) + ") is refused"};
    }
  }
  const std::vector<std::string_view> origins = request.Headers("origin");
  if (origins.empty()) return std::nullopt;
  const std::vector<std::string_view> hosts = request.Headers("host");
  const std::string_view host = hosts.size() == 1 ? hosts.front() : "";
  if (origins.size() > 1 || !SameOrigin(TrimOws(origins.front()), host)) {
    return AdminRefusal{403, "a state-changing admin request from another origin (Origin: " +
                                 Shown(origins.front()) + ", Host: " + Shown(host) +
                                 ") is refused"};
  }
  return std::nullopt;
}

// Content-Type: JSON bodies must say so; without a token, so must a bodyless request.
std::optional<AdminRefusal> NonSimple(const RequestView& request, const RouteResult& route,
                                      bool token_configured) {
  const std::vector<std::string_view> types = request.Headers("content-type");
  const bool json = types.size() == 1 && IsJsonMediaType(types.front());
  if (json) return std::nullopt;
  if (route.json_body) {
    return AdminRefusal{415,
                        "this endpoint takes a JSON body: send Content-Type: application/json"};
  }
  if (token_configured) return std::nullopt;
  return AdminRefusal{403,
                      "without an admin token (admin.token_file), a state-changing admin request "
                      "must send Content-Type: application/json (a web page cannot send it to "
                      "another origin)"};
}

}  // namespace

std::vector<std::string> AdminHostNames(const ServerConfig& config) {
  std::vector<std::string> names;
  for (const std::string& n : config.admin_allowed_hosts) names.push_back(AsciiLowered(n));
  HostPort listen;
  std::string ignored;
  if (!config.admin_listen.empty() && ParseHostPort(config.admin_listen, &listen, &ignored) &&
      !listen.host.empty() && !IsIpLiteral(listen.host, false)) {
    names.push_back(AsciiLowered(listen.host));
  }
  return names;
}

bool IsAdminHost(std::string_view host_field, std::span<const std::string> host_names) {
  Authority a;
  if (!SplitAuthority(host_field, &a)) return false;
  if (IsIpLiteral(a.host, a.bracketed)) return true;
  if (a.bracketed) return false;
  if (EqualsIgnoreCase(a.host, "localhost")) return true;
  return std::any_of(host_names.begin(), host_names.end(),
                     [&](const std::string& n) { return EqualsIgnoreCase(a.host, n); });
}

bool SameOrigin(std::string_view origin, std::string_view host_field) {
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos) return false;  // "null" and anything else
  const std::string_view scheme = origin.substr(0, sep);
  if (!EqualsIgnoreCase(scheme, "http") && !EqualsIgnoreCase(scheme, "https")) {
    return false;
  }
  Authority from, to;
  if (!SplitAuthority(origin.substr(sep + 3), &from) || !SplitAuthority(host_field, &to)) {
    return false;
  }
  const std::string_view default_port = DefaultPort(scheme);
  const std::string_view from_port = from.port.empty() ? default_port : from.port;
  const std::string_view to_port = to.port.empty() ? default_port : to.port;
  return from.bracketed == to.bracketed && EqualsIgnoreCase(from.host, to.host) &&
         from_port == to_port;
}

bool IsJsonMediaType(std::string_view content_type) {
  return EqualsIgnoreCase(TrimOws(content_type.substr(0, content_type.find(';'))),
                          "application/json");
}

std::optional<AdminRefusal> ScreenAdminHost(const RequestView& request,
                                            std::span<const std::string> host_names) {
  const std::vector<std::string_view> hosts = request.Headers("host");
  if (hosts.empty() || (hosts.size() == 1 && IsAdminHost(hosts.front(), host_names))) {
    return std::nullopt;
  }
  return AdminRefusal{421,
                      "the admin listener answers a Host that is an IP address, localhost or a "
                      "name in admin.allowed_hosts, not " +
                          Shown(hosts.front()) + " (DNS rebinding)"};
}

std::optional<AdminRefusal> ScreenAdminChange(const RequestView& request, const RouteResult& route,
                                              bool token_configured) {
  if (!StateChanging(request.method)) return std::nullopt;
  if (auto refused = CrossSite(request)) return refused;
  return NonSimple(request, route, token_configured);
}

}  // namespace tollgate::server
