// ParseRedisUrl: redis[s]://[[user]:password@]host[:port][/db][?options], and
// ParseRedisSentinelUrl: redis-sentinel://[userinfo@]host:port[,...]/<master>[?options].
#include <charconv>
#include <optional>
#include <string>

#include "base/percent.h"
#include "base/redact.h"
#include "tollgate/redis_store.h"

namespace tollgate {
namespace {

bool ParseInt(std::string_view s, int64_t lo, int64_t hi, int64_t* out) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// %XX in user info (passwords may contain '@' or ':') and option values; strict.
bool PercentDecode(std::string_view in, std::string* out) {
  std::optional<std::string> decoded = base::PercentDecodeStrict(in);
  if (decoded) *out = std::move(*decoded);
  return decoded.has_value();
}

}  // namespace

Result<RedisOptions> ParseRedisUrl(std::string_view url) {
  RedisOptions o;
  const std::string shown = base::RedactUrl(url);
  if (url.size() > 4096) return InvalidArgument("redis url: longer than 4096 bytes");
  std::string_view rest;
  if (url.starts_with("rediss://")) {
    o.tls = true;
    rest = url.substr(9);
  } else if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else {
    return InvalidArgument("redis url: must start with redis:// or rediss:// (got '" + shown +
                           "')");
  }
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    std::string_view user = userinfo, pass;
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      user = userinfo.substr(0, colon);
      pass = userinfo.substr(colon + 1);
    } else {
      // redis://password@host is a common shorthand.
      pass = userinfo;
      user = {};
    }
    if (!PercentDecode(user, &o.username) || !PercentDecode(pass, &o.password)) {
      return InvalidArgument("redis url: bad %-escape in user info");
    }
  }
  std::string_view host = rest, port;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:6379
    auto close = rest.find(']');
    if (close == std::string_view::npos) return InvalidArgument("redis url: unclosed '['");
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return InvalidArgument("redis url: bad host '" + shown + "'");
      port = rest.substr(close + 2);
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return InvalidArgument("redis url: missing host in '" + shown + "'");
  o.host = std::string(host);
  int64_t v = 0;
  if (!port.empty()) {
    if (!ParseInt(port, 1, 65535, &v)) {
      return InvalidArgument("redis url: port must be 1..65535 (got '" +
                             base::RedactUrlPiece(url, port) + "')");
    }
    o.port = static_cast<int>(v);
  }
  if (!path.empty()) {
    if (!ParseInt(path, 0, 1 << 20, &v)) {
      return InvalidArgument("redis url: database must be a number (got '" +
                             base::RedactUrlPiece(url, path) + "')");
    }
    o.db = static_cast<int>(v);
  }
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    auto eq = kv.find('=');
    std::string_view k = kv.substr(0, eq);
    std::string_view val = eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1);
    if (k == "prefix") {
      if (!PercentDecode(val, &o.key_prefix)) return InvalidArgument("redis url: bad prefix");
      if (o.key_prefix.size() > 64) return InvalidArgument("redis url: prefix longer than 64");
    } else if (k == "timeout_ms" && ParseInt(val, 1, 600000, &v)) {
      o.call_timeout = std::chrono::milliseconds(v);
    } else if (k == "connect_timeout_ms" && ParseInt(val, 1, 600000, &v)) {
      o.connect_timeout = std::chrono::milliseconds(v);
    } else if (k == "pool" && ParseInt(val, 1, 64, &v)) {
      o.connections = static_cast<size_t>(v);
    } else if (k == "client_clock" && (val == "1" || val == "true")) {
      o.use_client_clock = true;
    } else if (o.tls && (k == "tls_ca_file" || k == "tls_cert_file" || k == "tls_key_file" ||
                         k == "tls_server_name")) {
      std::string* field = k == "tls_ca_file"     ? &o.tls_ca_file
                           : k == "tls_cert_file" ? &o.tls_cert_file
                           : k == "tls_key_file"  ? &o.tls_key_file
                                                  : &o.tls_server_name;
      if (!PercentDecode(val, field) || field->empty()) {
        return InvalidArgument("redis url: bad value for " + std::string(k));
      }
    } else if (o.tls && k == "tls_insecure_skip_verify" && val == "1") {
      o.tls_insecure_skip_verify = true;
    } else {
      return InvalidArgument("redis url: unknown or bad option '" + base::RedactUrlPiece(url, kv) +
                             "' (prefix, timeout_ms, connect_timeout_ms, pool, client_clock" +
                             (o.tls
                                  ? ", tls_ca_file, tls_cert_file, tls_key_file, tls_server_name, "
                                    "tls_insecure_skip_verify=1)"
                                  : "; tls_* options need rediss://)"));
    }
  }
  return o;
}

namespace {

// Whether a "host:port" piece names its port ("[v6]:port" or "host:port").
bool HasPort(std::string_view hp) {
  if (hp.starts_with('[')) {
    const size_t close = hp.find(']');
    return close != std::string_view::npos && close + 1 < hp.size() && hp[close + 1] == ':';
  }
  return hp.find(':') != std::string_view::npos;
}

bool ValidMasterName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<RedisOptions> ParseRedisSentinelUrl(std::string_view url) {
  const std::string shown = base::RedactUrl(url, 100);
  // rediss-sentinel://: TLS to the sentinels and to the master they name, with one set of
  // tls_* options (the same CA, client certificate and server name for both).
  const bool tls = url.starts_with("rediss-sentinel://");
  if (!tls && !url.starts_with("redis-sentinel://")) {
    return InvalidArgument(
        "redis sentinel url: must start with redis-sentinel:// or rediss-sentinel:// (got '" +
        shown + "')");
  }
  if (url.size() > 4096) return InvalidArgument("redis sentinel url: longer than 4096 bytes");
  std::string_view rest = url.substr(tls ? 18 : 17);
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string userinfo;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at + 1));
    rest = rest.substr(at + 1);
  }
  std::string_view master;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    master = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (master.empty()) {
    return InvalidArgument("redis sentinel url: missing /<master-name> after the sentinels in '" +
                           shown + "'");
  }
  if (!ValidMasterName(master)) {
    return InvalidArgument(
        "redis sentinel url: master name must be 1..128 bytes of "
        "[A-Za-z0-9._-] (got '" +
        base::RedactUrlPiece(url, master) + "')");
  }
  // The master's own options come out of the query; the rest is redis://'s.
  std::string master_username, master_password, passed_query;
  int db = 0;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const size_t eq = kv.find('=');
    const std::string_view k = kv.substr(0, eq);
    const std::string_view val =
        eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1);
    int64_t v = 0;
    if (k == "master_password" || k == "master_username") {
      std::string* field = k == "master_password" ? &master_password : &master_username;
      if (!PercentDecode(val, field) || field->empty()) {
        return InvalidArgument("redis sentinel url: bad value for " + std::string(k));
      }
    } else if (k == "db") {
      if (!ParseInt(val, 0, 1 << 20, &v)) {
        return InvalidArgument("redis sentinel url: db must be a number (got '" +
                               base::RedactUrlPiece(url, kv) + "')");
      }
      db = static_cast<int>(v);
    } else {
      passed_query += (passed_query.empty() ? "?" : "&") + std::string(kv);
    }
  }
  RedisOptions o;
  bool first = true;
  for (bool more = true; more;) {
    const size_t comma = rest.find(',');
    const std::string_view hp = rest.substr(0, comma);
    more = comma != std::string_view::npos;  // "a:1," names an empty last sentinel
    rest = more ? rest.substr(comma + 1) : std::string_view{};
    if (hp.empty() || !HasPort(hp)) {
      return InvalidArgument("redis sentinel url: each sentinel must be host:port (got '" +
                             (hp.empty() ? shown : base::RedactUrlPiece(url, hp)) + "')");
    }
    // Reuse the redis:// parser for the host, the port, the credentials and the options.
    auto parsed = ParseRedisUrl((tls ? "rediss://" : "redis://") + userinfo + std::string(hp) +
                                (first ? passed_query : std::string()));
    if (!parsed.ok()) {
      std::string why(parsed.status().message());
      if (why.starts_with("redis url: ")) why = why.substr(11);
      return InvalidArgument("redis sentinel url: " + why);
    }
    if (parsed->db != 0) {
      return InvalidArgument("redis sentinel url: a sentinel has no database; use ?db=N");
    }
    if (first) o = *parsed;
    first = false;
    if (o.sentinels.size() >= 16)
      return InvalidArgument("redis sentinel url: at most 16 sentinels");
    const bool v6 = parsed->host.find(':') != std::string::npos;
    o.sentinels.push_back((v6 ? "[" + parsed->host + "]" : parsed->host) + ":" +
                          std::to_string(parsed->port));
  }
  o.sentinel_username = std::move(o.username);
  o.sentinel_password = std::move(o.password);
  o.username = std::move(master_username);
  o.password = std::move(master_password);
  if (!o.username.empty() && o.password.empty()) {
    return InvalidArgument("redis sentinel url: master_username needs master_password");
  }
  o.db = db;
  o.sentinel_master = std::string(master);
  // Discovery fills these in; until then they name no server.
  o.host.clear();
  o.port = 0;
  return o;
}

}  // namespace tollgate
