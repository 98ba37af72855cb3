#include "server/config.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/secrets.h"
#include "tollgate/config_error.h"
#include "tollgate/config_sections.h"
#include "tollgate/http_text.h"
#include "tollgate/ip_address.h"
#include "tollgate/json_fields.h"
#include "tollgate/trace.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

// The config file's fields are read with the one typed reader every config
// parser shares (tollgate/json_fields.h), in its short messages ("must be a string").

constexpr int64_t kHour = 3600 * 1000;

// metrics_on_main, decision_on_main: true, false, or null (the default of the
// mode: on without a gateway, off with one).
void ReadMainListenerModes(JsonFields& r, ServerConfig* c) {
  for (auto [key, field] : {std::pair{"metrics_on_main", &c->metrics_on_main},
                            std::pair{"decision_on_main", &c->decision_on_main}}) {
    if (const json* v = r.Find(key)) {
      if (v->is_null()) {
        field->reset();
      } else if (v->is_boolean()) {
        *field = v->get<bool>();
      } else {
        r.Error(key, "must be true, false or null (the default of the mode)");
      }
    }
  }
}

// `tls`, `admin.tls`, `grpc.tls`: the files are read by CheckServerConfig.
void ReadTls(JsonFields& t, TlsServerSettings* tls) {
  t.String("cert_file", &tls->cert_file);
  t.String("key_file", &tls->key_file);
  t.String("client_ca_file", &tls->client_ca_file);
  t.StringList("allowed_names", &tls->allowed_names);
  t.Duration("handshake_timeout_ms", &tls->handshake_timeout, 1, 10 * 60 * 1000);
  t.Integer("max_handshakes", &tls->max_handshakes, 1, 1 << 20);
}

void ReadGrpc(JsonFields& g, ServerConfig* c) {
  g.String("listen", &c->grpc_listen);
  runtime_config::ReadEnvoy(g, c);
  ReadSection(g, "tls", [c](JsonFields& t) { ReadTls(t, &c->grpc_tls); });
}

// A DNS name: dot-separated labels of letters, digits and '-' (1 to 63 bytes,
// not starting or ending with '-'), at most 253 bytes in all.
bool IsHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    const char c = i < name.size() ? name[i] : '.';
    if (c == '.') {
      if (label == 0 || label > 63 || name[i - 1] == '-' || name[i - label] == '-') return false;
      label = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-') {
      ++label;
    } else {
      return false;
    }
  }
  return true;
}

// admin.allowed_hosts: DNS names (no port, no wildcard), kept in lower case.
void ReadAllowedHosts(JsonFields& a, ServerConfig* c) {
  constexpr size_t kMaxNames = 64;
  std::vector<std::string> names;
  a.StringList("allowed_hosts", &names);
  if (names.size() > kMaxNames) {
    a.Error("allowed_hosts", "at most " + std::to_string(kMaxNames) + " names");
    return;
  }
  c->admin_allowed_hosts.clear();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!IsHostName(names[i])) {
      a.Error(IndexPath("allowed_hosts", i),
              "must be a host name (letters, digits, '-' and '.'; no port, no wildcard)");
      continue;
    }
    c->admin_allowed_hosts.push_back(AsciiLowered(names[i]));
  }
}

// admin.tokens: [{"name", "scope": "read"|"write", "token_file"}], secrets
// read from the files here (token_file only: a scoped token is not inline).
void ReadAdminTokens(JsonFields& a, ServerConfig* c) {
  constexpr size_t kMaxTokens = 64;
  const json* v = a.Find("tokens");
  if (v == nullptr) return;
  if (!v->is_array()) return a.Error("tokens", "must be an array of {name, scope, token_file}");
  if (v->size() > kMaxTokens) {
    return a.Error("tokens", "at most " + std::to_string(kMaxTokens) + " tokens");
  }
  c->admin_tokens.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string key = IndexPath("tokens", i);
    if (!(*v)[i].is_object()) {
      a.Error(key, "must be an object {name, scope, token_file}");
      continue;
    }
    JsonFields t = a.Nested((*v)[i], key);
    AdminToken token;
    const std::optional<std::string> name = t.String("name");
    const std::optional<std::string> scope = t.String("scope");
    const std::optional<std::string> file = t.String("token_file");
    t.RejectUnknown();
    if (!name || !IsAdminTokenName(*name)) {
      t.Error("name", "is required: 1-64 letters, digits, '_', '.' or '-'");
    } else {
      token.name = *name;
    }
    if (!scope || !ParseAdminScope(*scope, &token.scope)) t.Error("scope", "must be read or write");
    std::string why;
    if (!file || file->empty()) {
      t.Error("token_file", "is required (a file holding the token on one line)");
    } else if (!ReadSecretFile(*file, &token.secret, &why)) {
      t.Error("token_file", *file + ": " + why);
    } else if (std::string bad = CheckSecret(token.secret); !bad.empty()) {
      t.Error("token_file", *file + ": the token " + bad);
    } else {
      token.file = *file;
    }
    if (!token.name.empty() && !token.file.empty()) c->admin_tokens.push_back(std::move(token));
  }
}

void ReadAdmin(JsonFields& a, ServerConfig* c) {
  a.String("listen", &c->admin_listen);
  std::string inline_token;
  a.Integer("max_connections", &c->admin_max_connections, 1, 1 << 20);
  std::string token_file;
  a.String("token", &inline_token);
  a.String("token_file", &token_file);
  a.Bool("allow_unauthenticated", &c->admin_allow_unauthenticated);
  ReadAllowedHosts(a, c);
  ReadAdminTokens(a, c);
  ReadSection(a, "tls", [c](JsonFields& t) { ReadTls(t, &c->admin_tls); });
  if (!inline_token.empty() && !token_file.empty()) {
    a.Error("token_file", "set token_file or token, not both");
  } else if (!inline_token.empty()) {
    c->admin_token = inline_token;
    c->admin_token_file.clear();
  } else if (!token_file.empty()) {
    std::string why;
    if (!ReadAdminTokenFile(token_file, c, &why)) a.Error("token_file", why);
  }
}

void ReadHttp(JsonFields& h, ServerConfig* c) {
  h.Integer("max_header_bytes", &c->max_header_bytes, 1024, 1 << 20);
  h.Integer("max_body_bytes", &c->max_body_bytes, 0, 64 << 20);
  h.Integer("max_chunk_extension_bytes", &c->max_chunk_extension_bytes, 0, 1 << 20);
  h.Integer("max_trailer_bytes", &c->max_trailer_bytes, 64, 1 << 20);
  h.Integer("max_connections", &c->max_connections, 1, 1 << 20);
  h.Integer("max_connections_per_ip", &c->max_connections_per_ip, 1, 1 << 20);
  h.Duration("body_timeout_ms", &c->body_timeout, 10, kHour);
  h.Duration("lingering_close_ms", &c->lingering_close, 0, 60000);
  h.Duration("read_timeout_ms", &c->read_timeout, 10, kHour);
  h.Duration("idle_timeout_ms", &c->idle_timeout, 10, kHour);
  h.Duration("write_timeout_ms", &c->write_timeout, 10, kHour);
  h.Duration("drain_timeout_ms", &c->drain_timeout, 0, kHour);
}

void ReadGateway(JsonFields& g, ServerConfig* c) {
  g.String("upstream", &c->upstream);
  g.Duration("connect_timeout_ms", &c->upstream_connect_timeout, 1, kHour);
  g.Duration("timeout_ms", &c->upstream_timeout, 1, kHour);
  g.Integer("max_idle_connections", &c->upstream_max_idle, 0, 100000);
  g.Integer("max_body_bytes", &c->gateway_max_body_bytes, 0, int64_t{1} << 40);
  ReadSection(g, "upstream_tls", [c](JsonFields& t) {
    t.String("ca_file", &c->upstream_tls.ca_file);
    t.String("cert_file", &c->upstream_tls.cert_file);
    t.String("key_file", &c->upstream_tls.key_file);
    t.String("server_name", &c->upstream_tls.server_name);
    t.Bool("verify", &c->upstream_tls_verify);
  });
  g.Duration("abort_drain_ms", &c->abort_drain_timeout, 0, kHour);
  g.Integer("abort_drain_bytes", &c->abort_drain_bytes, 0, int64_t{1} << 40);
}

void ReadLog(JsonFields& l, ServerConfig* c) {
  ReadEnum(l, "level", &c->log_level, ParseLogLevel,
           "must be trace, debug, info, warn, error or off");
  l.String("file", &c->log_file);
  l.Integer("reject_sample", &c->reject_log_sample, 0, 1 << 30);
  l.Integer("reject_per_second", &c->reject_logs_per_second, 0, 1 << 20);
  l.Integer("shadow_sample", &c->shadow_log_sample, 0, 1 << 30);
  l.Integer("shadow_per_second", &c->shadow_logs_per_second, 0, 1 << 20);
  l.Bool("access_log", &c->access_log);
}

void ReadIdentities(JsonFields& i, ServerConfig* c) {
  i.Bool("raw", &c->raw_identities);
  std::string key_file;
  i.String("hash_key_file", &key_file);
  if (!key_file.empty()) {
    std::string why;
    if (!ReadSecretFile(key_file, &c->identity_hash_key, &why)) {
      i.Error("hash_key_file", key_file + ": " + why);
    } else {
      c->identity_hash_key_file = key_file;
    }
  }
}

void ReadTracing(JsonFields& t, ServerConfig* c) {
  t.String("endpoint", &c->trace_endpoint);
  t.Double("sample_ratio", &c->trace_sample_ratio, 0.0, 1.0);
  t.Bool("parent_based", &c->trace_parent_based);
  t.String("service_name", &c->trace_service_name);
  t.Integer("max_queue", &c->trace_max_queue, 1, 1 << 20);
  t.Integer("max_batch", &c->trace_max_batch, 1, 1 << 16);
  t.Duration("flush_interval_ms", &c->trace_flush_interval, 10, 60000);
  t.Duration("timeout_ms", &c->trace_timeout, 1, 60000);
}

void ReadTop(JsonFields& t, ServerConfig* c) {
  t.Duration("window_ms", &c->top_window, 1000, 24 * kHour);
  t.Integer("capacity", &c->top_capacity, 1, 10000);
}

// `spoe`: HAProxy's SPOE agent (server/spoe_session.h).
void ReadSpoe(JsonFields& s, ServerConfig* c) {
  s.String("listen", &c->spoe_listen);
  s.StringList("allowed_peers", &c->spoe_allowed_peers);
  s.Integer("max_connections", &c->spoe_max_connections, 1, 1 << 20);
  s.Integer("max_frame_size", &c->spoe_max_frame_size, 256, 1 << 20);
  s.Integer("max_in_flight", &c->spoe_max_in_flight, 1, 4096);
  s.Duration("hello_timeout_ms", &c->spoe_hello_timeout, 10, kHour);
  s.Duration("idle_timeout_ms", &c->spoe_idle_timeout, 10, 24 * kHour);
  s.Duration("write_timeout_ms", &c->spoe_write_timeout, 10, kHour);
  s.String("message", &c->spoe_message);
}

// The top-level fields and sections, in the order their errors are reported.
void ReadServerConfig(JsonFields& r, ServerConfig* c) {
  runtime_config::ReadPolicySource(r, c);
  r.String("listen", &c->listen);
  r.Bool("reuse_port", &c->reuse_port);
  r.Integer("threads", &c->threads, 0, 256);
  ReadMainListenerModes(r, c);
  ReadSection(r, "tls", [c](JsonFields& t) { ReadTls(t, &c->tls); });
  r.String("grpc_listen", &c->grpc_listen);
  r.StringList("rls_config", &c->rls_config);
  ReadSection(r, "grpc", [c](JsonFields& g) { ReadGrpc(g, c); });
  ReadStringOrSection(r, "admin", &c->admin_listen,
                      "must be \"HOST:PORT\", \"\" (off) or an object",
                      [c](JsonFields& a) { ReadAdmin(a, c); });
  runtime_config::ReadStore(r, c);
  runtime_config::ReadDecisions(r, c);
  ReadSection(r, "http", [c](JsonFields& h) { ReadHttp(h, c); });
  ReadSection(r, "gateway", [c](JsonFields& g) { ReadGateway(g, c); });
  ReadSection(r, "log", [c](JsonFields& l) { ReadLog(l, c); });
  ReadSection(r, "identities", [c](JsonFields& i) { ReadIdentities(i, c); });
  ReadSection(r, "top", [c](JsonFields& t) { ReadTop(t, c); });
  ReadSection(r, "tracing", [c](JsonFields& t) { ReadTracing(t, c); });
  ReadSection(r, "spoe", [c](JsonFields& s) { ReadSpoe(s, c); });
  r.Find("$schema");  // allowed, ignored
  r.Find("comment");  // allowed, ignored
}

// Validation, one concern each; ValidateServerConfig runs them in this order.

void CheckListeners(const ServerConfig& c, std::vector<ConfigError>* errors) {
  std::string why;
  HostPort hp;
  if (!ParseHostPort(c.listen, &hp, &why)) errors->push_back({"listen", why});
  if (c.admin_listen.empty()) return;
  if (!ParseHostPort(c.admin_listen, &hp, &why)) {
    errors->push_back({"admin.listen", why});
  } else if (c.admin_token.empty() && c.admin_tokens.empty() && !c.admin_allow_unauthenticated &&
             !IsLoopbackHost(hp.host)) {
    errors->push_back({"admin.token_file",
                       "is required: admin.listen (" + c.admin_listen +
                           ") is not a loopback address, so anyone who can reach it could "
                           "reload, read the policy and see who is limited; set "
                           "admin.token_file (--admin-token-file), or opt out with "
                           "admin.allow_unauthenticated: true (--admin-allow-unauthenticated)"});
  }
}

void CheckSecrets(const ServerConfig& c, std::vector<ConfigError>* errors) {
  if (!c.identity_hash_key.empty()) {
    if (std::string bad = CheckSecret(c.identity_hash_key); !bad.empty()) {
      errors->push_back(
          {"identities.hash_key_file", c.identity_hash_key_file + ": the key " + bad});
    }
  }
  if (!c.admin_token.empty()) {
    if (std::string bad = CheckSecret(c.admin_token); !bad.empty()) {
      errors->push_back(
          c.admin_token_file.empty()
              ? ConfigError{"admin.token", "the token " + bad}
              : ConfigError{"admin.token_file", c.admin_token_file + ": the token " + bad});
    }
  }
  if (std::string bad = CheckAdminTokenSet(AdminTokensOf(c)); !bad.empty()) {
    errors->push_back({"admin.tokens", bad + " (the legacy admin.token is named \"admin\")"});
  }
}

void CheckGrpc(const ServerConfig& c, std::vector<ConfigError>* errors) {
  std::string why;
  HostPort hp;
  if (!c.grpc_listen.empty()) {
    if (!ParseHostPort(c.grpc_listen, &hp, &why)) errors->push_back({"grpc_listen", why});
    if (c.rls_config.empty()) {
      errors->push_back({"rls_config", "is required with grpc_listen (envoyproxy/ratelimit YAML)"});
    }
  }
}

// spoe.*: the listener, its peers' CIDRs and the message name.
void CheckSpoe(const ServerConfig& c, std::vector<ConfigError>* errors) {
  if (c.spoe_listen.empty()) return;
  std::string why;
  HostPort hp;
  if (!ParseHostPort(c.spoe_listen, &hp, &why)) errors->push_back({"spoe.listen", why});
  if (c.spoe_allowed_peers.empty()) {
    errors->push_back({"spoe.allowed_peers",
                       "must name at least one CIDR (SPOP has no "
                       "authentication: only these peers may connect)"});
  }
  for (size_t i = 0; i < c.spoe_allowed_peers.size(); ++i) {
    if (!Cidr::Parse(c.spoe_allowed_peers[i])) {
      errors->push_back({"spoe.allowed_peers[" + std::to_string(i) + "]",
                         "\"" + c.spoe_allowed_peers[i] + "\" is not an address or CIDR"});
    }
  }
  if (c.spoe_message.empty() || c.spoe_message.size() > 255) {
    errors->push_back({"spoe.message", "must be 1 to 255 bytes (a spoe-message name)"});
  }
}

// tracing.endpoint: the exporter's URL grammar (tollgate/trace.h).
void CheckTracing(const ServerConfig& c, std::vector<ConfigError>* errors) {
  if (c.trace_endpoint.empty()) return;
  const Status url = trace::CheckCollectorUrl(c.trace_endpoint);
  if (!url.ok()) errors->push_back({"tracing.endpoint", url.message()});
}

void CheckProcess(const ServerConfig& c, std::vector<ConfigError>* errors) {
  std::string why;
  UpstreamUrl u;
  if (!c.upstream.empty() && !ParseUpstreamUrl(c.upstream, &u, &why)) {
    errors->push_back({"gateway.upstream", why});
  } else if ((c.upstream_tls.any() || !c.upstream_tls_verify) && !u.tls) {
    errors->push_back({"gateway.upstream_tls",
                       c.upstream.empty() ? "is set, but there is no gateway.upstream"
                                          : "is set, but gateway.upstream is http:// (plain): "
                                            "use https:// to talk TLS to the upstream"});
  }
  if (c.threads < 0 || c.threads > 256) errors->push_back({"threads", "must be in [0, 256]"});
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool ParseHostPort(std::string_view text, HostPort* out, std::string* error) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *error = "expected [IPv6]:PORT";
      return false;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      *error = "expected HOST:PORT";
      return false;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      *error = "an IPv6 address must be written in brackets: [::1]:PORT";
      return false;
    }
  }
  for (unsigned char c : host) {
    if (c <= 0x20 || c == 0x7f || c == '[' || c == ']') {
      *error = "host must not contain spaces, control characters or brackets";
      return false;
    }
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    *error = "port must be a number in [0, 65535]";
    return false;
  }
  out->host = host.empty() ? "0.0.0.0" : std::string(host);
  out->port = static_cast<uint16_t>(value);
  return true;
}

bool ParseUpstreamUrl(std::string_view text, UpstreamUrl* out, std::string* error) {
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  const bool tls = text.substr(0, kHttps.size()) == kHttps;
  if (!tls && text.substr(0, kHttp.size()) != kHttp) {
    *error = "must start with http:// or https://";
    return false;
  }
  std::string_view rest = text.substr(tls ? kHttps.size() : kHttp.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view base = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  if (authority.empty()) {
    *error = "missing host";
    return false;
  }
  // The authority becomes the Host field and the base path part of the request
  // line of every upstream request: no byte that could end either.
  for (unsigned char c : rest) {
    if (c <= 0x20 || c == 0x7f) {
      *error = "must not contain spaces or control characters";
      return false;
    }
  }
  std::string with_port(authority);
  bool has_port = authority.back() != ']' && authority.find(':') != std::string_view::npos &&
                  authority.find(':') == authority.rfind(':');
  if (authority.front() == '[') has_port = authority.find("]:") != std::string_view::npos;
  if (!has_port) with_port += tls ? ":443" : ":80";
  if (!ParseHostPort(with_port, &out->address, error)) return false;
  if (out->address.port == 0) {
    *error = "port must not be 0";
    return false;
  }
  out->tls = tls;
  out->host_header = std::string(authority);
  out->base_path = std::string(base);
  return true;
}

std::vector<ConfigError> ParseServerConfig(std::string_view json_text, ServerConfig* c) {
  std::vector<ConfigError> errors;
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded()) {
    errors.push_back({"", "not valid JSON"});
    return errors;
  }
  if (!doc.is_object()) {
    errors.push_back({"", "must be a JSON object"});
    return errors;
  }
  ConfigErrors collector(&errors);
  JsonFields r(doc, "", collector, JsonFields::Messages::kShort);
  ReadServerConfig(r, c);
  r.RejectUnknown();
  return errors;
}

std::vector<AdminToken> AdminTokensOf(const ServerConfig& c) {
  std::vector<AdminToken> tokens;
  if (!c.admin_token.empty()) {
    tokens.push_back({"admin", AdminScope::kWrite, c.admin_token_file, c.admin_token});
  }
  tokens.insert(tokens.end(), c.admin_tokens.begin(), c.admin_tokens.end());
  return tokens;
}

bool ReadAdminTokenFile(const std::string& path, ServerConfig* config, std::string* error) {
  std::string token;
  if (!ReadSecretFile(path, &token, error)) {
    *error = path + ": " + *error;
    return false;
  }
  config->admin_token = std::move(token);
  config->admin_token_file = path;
  return true;
}

std::vector<ConfigError> LoadServerConfigFile(const std::string& path, ServerConfig* config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {{"", "cannot open config file " + path}};
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (4u << 20)) return {{"", "config file larger than 4 MiB"}};
  return ParseServerConfig(text.str(), config);
}

std::vector<ConfigError> ValidateServerConfig(const ServerConfig& c) {
  // The engine's checks (tollgate/runtime_config.h) among tollgated's, in the file's order.
  std::vector<ConfigError> errors;
  runtime_config::CheckPolicySource(c, &errors);
  CheckListeners(c, &errors);
  CheckSecrets(c, &errors);
  CheckGrpc(c, &errors);
  runtime_config::CheckEnvoy(c, &errors);
  runtime_config::CheckStore(c, &errors);
  CheckProcess(c, &errors);
  runtime_config::CheckJwt(c, &errors);
  CheckTracing(c, &errors);
  CheckSpoe(c, &errors);
  return errors;
}

size_t ReadBufferLimit(const ServerConfig& c) {
  // Room for the largest head or trailer section plus one read's worth, so
  // the parser's own limits (431, 400) fire before the buffer is full.
  return std::max({c.max_header_bytes, c.max_trailer_bytes, c.max_chunk_extension_bytes}) + 4096;
}

}  // namespace tollgate::server
