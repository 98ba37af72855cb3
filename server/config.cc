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
#include "tollgate/http_text.h"
#include "tollgate/json_fields.h"
#include "tollgate/trace.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

// The config file's fields are read with the one typed reader every config
// parser shares (tollgate/json_fields.h), in its short messages ("must be a string").

// The enumerated settings are parsed here, once, with each enum's own parser
// (its names are declared beside the enum). ForwardedHeader's names, which
// only the config file spells, are declared here.
constexpr std::pair<std::string_view, ForwardedHeader> kForwardedHeaderNames[] = {
    {"x-forwarded-for", ForwardedHeader::kXForwardedFor},
    {"forwarded", ForwardedHeader::kForwarded}};

bool ParseForwardedHeader(std::string_view name, ForwardedHeader* out) {
  for (const auto& [text, value] : kForwardedHeaderNames) {
    if (text == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

// A failure mode as the config spells it: exactly open, closed or degrade
// (ParseFailureMode's older aliases are the policy's, not the config's).
bool ParseConfigFailureMode(std::string_view name, FailureMode* out) {
  FailureMode mode;
  if (!ParseFailureMode(name, &mode) || FailureModeName(mode) != name) return false;
  *out = mode;
  return true;
}

// The string at `key` parsed by `parse` into *out; "`key`: `expected`" when it
// names no value (*out then keeps its value).
template <typename Enum>
void ReadEnum(JsonFields& f, std::string_view key, Enum* out,
              bool (*parse)(std::string_view, Enum*), std::string_view expected) {
  const std::optional<std::string> text = f.String(key);
  if (text && !parse(*text, out)) f.Error(key, expected);
}

// Header styles: "draft11,x-ratelimit" or ["draft11", "x-ratelimit"], parsed
// by ParseHeaderStyles as one comma-separated list.
void ReadStyleList(JsonFields& f, std::string_view key, std::vector<HeaderStyle>* out) {
  const json* v = f.Find(key);
  if (v == nullptr) return;
  std::string joined;
  if (v->is_string()) {
    joined = v->get<std::string>();
  } else if (!v->is_array() || v->empty()) {
    return f.Error(key, "must be a style or a non-empty array of styles");
  } else {
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return f.Error(IndexPath(key, i), "must be a string");
      joined += (i ? "," : "") + (*v)[i].get<std::string>();
    }
  }
  std::string why;
  if (!ParseHeaderStyles(joined, out, &why)) f.Error(key, why);
}

// grpc.default_algorithm: the message names the value and the algorithms.
void ReadDefaultAlgorithm(JsonFields& g, ServerConfig* c) {
  const std::optional<std::string> name = g.String("default_algorithm");
  if (name && !ParseAlgorithm(*name, &c->rls_default_algorithm)) {
    g.Error("default_algorithm", "unknown algorithm \"" + *name +
                                     "\" (token_bucket, leaky_bucket, fixed_window, "
                                     "sliding_window, sliding_log)");
  }
}

constexpr std::string_view kFailureModes = "must be open, closed or degrade";

constexpr int64_t kHour = 3600 * 1000;

// Reads the object at `key` with `read(section reader)`, then flags its unknown
// fields; any other JSON type is "<key>: must be an object".
template <typename Read>
void ReadSection(JsonFields& r, std::string_view key, Read read) {
  if (const json* v = r.Find(key)) {
    if (!v->is_object()) return r.Error(key, "must be an object");
    JsonFields section = r.Nested(*v, key);
    read(section);
    section.RejectUnknown();
  }
}

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
  g.StringList("rls_config", &c->rls_config);
  ReadStyleList(g, "headers", &c->grpc_header_styles);
  g.Bool("retry_after", &c->grpc_retry_after);
  g.Double("retry_after_jitter", &c->grpc_retry_after_jitter, 0.0, 10.0);
  ReadDefaultAlgorithm(g, c);
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

void ReadBreaker(JsonFields& b, ServerConfig* c) {
  b.Integer("consecutive_failures", &c->breaker_consecutive_failures, 1, 1000000);
  b.Double("failure_ratio", &c->breaker_failure_ratio, 0.0, 2.0);
  if (c->breaker_failure_ratio <= 0) b.Error("failure_ratio", "must be > 0");
  b.Integer("min_calls", &c->breaker_min_calls, 1, 1000000);
  b.Duration("window_ms", &c->breaker_window, 1, 3600000);
  b.Duration("open_ms", &c->breaker_open, 1, 600000);
  b.Integer("half_open_probes", &c->breaker_half_open_probes, 1, 65535);
}

void ReadStore(JsonFields& s, ServerConfig* c) {
  s.String("url", &c->store);
  ReadEnum(s, "failure_mode", &c->failure_mode, ParseConfigFailureMode, kFailureModes);
  s.Double("degrade_fraction", &c->degrade_fraction, 0.0, 1.0);
  s.Integer("local_max_keys", &c->local_max_keys, 1, int64_t{1} << 32);
  ReadEnum(s, "local_overflow", &c->local_overflow, ParseOverflowPolicy,
           "must be evict, allow or reject");
  s.Integer("local_max_keys_per_rule", &c->local_max_keys_per_rule, 0, int64_t{1} << 32);
  s.String("local_state_file", &c->local_state_file);
  s.Duration("state_save_interval_ms", &c->state_save_interval, 0, 86400000);
  s.Duration("state_lock_wait_ms", &c->state_lock_wait, 0, 3600000);
  s.Duration("timeout_ms", &c->store_timeout, 1, 60000);
  s.Bool("charge_back", &c->charge_back);
  s.Duration("call_deadline_ms", &c->call_deadline, 0, 60000);
  s.Bool("share_rollback", &c->share_rollback);
  s.Duration("rollback_sync_ms", &c->rollback_sync, 10, 3600000);
  ReadSection(s, "breaker", [c](JsonFields& b) { ReadBreaker(b, c); });
}

// The RS256 public key file: at most 64 KiB, read now (the name is kept for
// error paths). Empty string with `why` set when it cannot be read.
std::string ReadPublicKeyFile(const std::string& key_file, std::string* why) {
  errno = 0;
  std::ifstream in(key_file, std::ios::binary);
  const int open_errno = errno;
  std::ostringstream pem;
  if (in) pem << in.rdbuf();
  if (!in || pem.str().empty() || pem.str().size() > (64u << 10)) {
    *why = !in                 ? std::strerror(open_errno)
           : pem.str().empty() ? "empty or not a file"
                               : "larger than 64 KiB";
    return "";
  }
  return pem.str();
}

void ReadJwt(JsonFields& j, ServerConfig* c) {
  j.String("hs256_secret", &c->jwt_hs256_secret);
  std::string inline_pem;
  std::string key_file;
  j.String("rs256_public_key_pem", &inline_pem);
  j.String("rs256_public_key_file", &key_file);
  if (!inline_pem.empty()) {
    c->jwt_rs256_public_key_pem = inline_pem;
    c->jwt_rs256_public_key_file.clear();
  }
  if (!key_file.empty()) {
    if (!inline_pem.empty()) {
      j.Error("rs256_public_key_file",
              "set rs256_public_key_file or rs256_public_key_pem, not both");
    } else {
      std::string why;
      std::string pem = ReadPublicKeyFile(key_file, &why);
      if (pem.empty()) {
        j.Error("rs256_public_key_file", "cannot read " + key_file + ": " + why);
      } else {
        c->jwt_rs256_public_key_pem = std::move(pem);
        c->jwt_rs256_public_key_file = key_file;
      }
    }
  }
  j.String("issuer", &c->jwt_issuer);
  j.String("audience", &c->jwt_audience);
  j.Integer("leeway_s", &c->jwt_leeway_s, 0, 3600);
  j.Bool("verified_upstream", &c->jwt_verified_upstream);
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

// `etcd`: how an etcd policy source connects (the files are checked by
// Runtime::CheckPolicySource and read when the source opens).
void ReadEtcd(JsonFields& e, ServerConfig* c) {
  e.String("username", &c->etcd.username);
  e.String("password_file", &c->etcd.password_file);
  e.Duration("timeout_ms", &c->etcd.timeout, 1, 60000);
  ReadSection(e, "tls", [c](JsonFields& t) {
    t.String("ca_file", &c->etcd.tls.ca_file);
    t.String("cert_file", &c->etcd.tls.cert_file);
    t.String("key_file", &c->etcd.tls.key_file);
    t.String("server_name", &c->etcd.tls.server_name);
  });
}

// `admin` and `store` take a string (their address, their URL) or an object.
template <typename Read>
void ReadStringOrSection(JsonFields& r, std::string_view key, std::string* as_string,
                         std::string_view type_error, Read read) {
  if (const json* v = r.Find(key)) {
    if (v->is_string()) {
      *as_string = v->get<std::string>();
    } else if (v->is_object()) {
      JsonFields section = r.Nested(*v, key);
      read(section);
      section.RejectUnknown();
    } else {
      r.Error(key, type_error);
    }
  }
}

// The top-level fields and sections, in the order their errors are reported.
void ReadServerConfig(JsonFields& r, ServerConfig* c) {
  r.String("policy", &c->policy_path);
  r.Duration("policy_poll_interval_ms", &c->policy_poll_interval, 0, kHour);
  r.String("policy_value_dir", &c->policy_value_dir);
  r.Bool("policy_remote_files", &c->policy_remote_files);
  ReadSection(r, "etcd", [c](JsonFields& e) { ReadEtcd(e, c); });
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
  ReadStringOrSection(r, "store", &c->store, "must be a URL string or an object",
                      [c](JsonFields& s) { ReadStore(s, c); });
  ReadEnum(r, "failure_mode", &c->failure_mode, ParseConfigFailureMode, kFailureModes);
  ReadStyleList(r, "headers", &c->header_styles);
  r.Double("retry_after_jitter", &c->retry_after_jitter, 0.0, 10.0);
  r.StringList("trusted_proxies", &c->trusted_proxies);
  ReadEnum(r, "forwarded_header", &c->forwarded_header, ParseForwardedHeader,
           "must be x-forwarded-for or forwarded");
  ReadSection(r, "jwt", [c](JsonFields& j) { ReadJwt(j, c); });
  ReadSection(r, "http", [c](JsonFields& h) { ReadHttp(h, c); });
  ReadSection(r, "gateway", [c](JsonFields& g) { ReadGateway(g, c); });
  ReadSection(r, "log", [c](JsonFields& l) { ReadLog(l, c); });
  ReadSection(r, "identities", [c](JsonFields& i) { ReadIdentities(i, c); });
  ReadSection(r, "top", [c](JsonFields& t) { ReadTop(t, c); });
  ReadSection(r, "tracing", [c](JsonFields& t) { ReadTracing(t, c); });
  r.Find("$schema");  // allowed, ignored
  r.Find("comment");  // allowed, ignored
}

// Validation, one concern each; ValidateServerConfig runs them in this order.

void CheckListeners(const ServerConfig& c, std::vector<ConfigError>* errors) {
  std::string why;
  HostPort hp;
  if (c.policy_path.empty()) errors->push_back({"policy", "is required (--policy FILE)"});
  if (c.policy_remote_files && c.policy_value_dir.empty() &&
      c.policy_path.find("://") != std::string::npos) {
    errors->push_back({"policy_value_dir",
                       "is required when an etcd policy may read value files "
                       "(policy_remote_files)"});
  }
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
  if (!(c.grpc_retry_after_jitter >= 0 && c.grpc_retry_after_jitter <= 10)) {
    errors->push_back({"grpc.retry_after_jitter", "must be between 0 and 10"});
  }
}

void CheckStore(const ServerConfig& c, std::vector<ConfigError>* errors) {
  if (auto spec = StoreSpecOf(c); !spec.ok()) {
    errors->push_back({"store", spec.status().message()});
  } else if (Status store = CheckStoreSpec(*spec); !store.ok()) {
    // The runtime's one store grammar; its "store: " is this error's path already.
    std::string_view why = store.message();
    if (why.starts_with("store: ")) why.remove_prefix(7);
    errors->push_back({"store", std::string(why)});
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
  if (!c.upstream.empty()) {
    UpstreamUrl u;
    if (!ParseUpstreamUrl(c.upstream, &u, &why)) errors->push_back({"gateway.upstream", why});
  }
  if (c.threads < 0 || c.threads > 256) errors->push_back({"threads", "must be in [0, 256]"});
}

void CheckJwt(const ServerConfig& c, std::vector<ConfigError>* errors) {
  if (c.jwt_rs256_public_key_pem.empty()) return;
  JwtOptions jwt;
  jwt.rs256_public_key_pem = c.jwt_rs256_public_key_pem;
  if (Status v = ValidateJwtOptions(jwt); !v.ok()) {
    std::string message(v.message());
    if (message.starts_with("jwt: ")) message.erase(0, 5);
    if (!c.jwt_rs256_public_key_file.empty()) message += " (" + c.jwt_rs256_public_key_file + ")";
    errors->push_back({c.jwt_rs256_public_key_file.empty() ? "jwt.rs256_public_key_pem"
                                                           : "jwt.rs256_public_key_file",
                       message});
  }
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
  constexpr std::string_view kScheme = "http://";
  if (text.substr(0, kScheme.size()) != kScheme) {
    *error = "must start with http:// (https upstreams are not supported)";
    return false;
  }
  std::string_view rest = text.substr(kScheme.size());
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
  if (!has_port) with_port += ":80";
  if (!ParseHostPort(with_port, &out->address, error)) return false;
  if (out->address.port == 0) {
    *error = "port must not be 0";
    return false;
  }
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

// Reconnect attempts back off to at most this, so decisions return to Redis
// within ~1 s of its recovery (breaker cool-down + one reconnect + a probe).
constexpr std::chrono::milliseconds kReconnectBackoffMax{200};

Result<StoreSpec> StoreSpecOf(const ServerConfig& config) {
  StoreSpec spec;
  spec.url = config.store;
  spec.local.max_keys = config.local_max_keys;
  spec.local.max_keys_per_group = config.local_max_keys_per_rule;
  spec.local.overflow = config.local_overflow;
  spec.call_timeout = config.store_timeout;
  spec.reconnect_backoff_max = kReconnectBackoffMax;
  ResilienceSpec r;
  r.mode = config.failure_mode;
  r.degrade_fraction = config.degrade_fraction;
  r.charge_back = config.charge_back;
  r.call_deadline = config.call_deadline;
  r.breaker.consecutive_failures = config.breaker_consecutive_failures;
  r.breaker.failure_ratio = config.breaker_failure_ratio;
  r.breaker.min_calls = config.breaker_min_calls;
  r.breaker.window = config.breaker_window;
  r.breaker.open_duration = config.breaker_open;
  r.breaker.half_open_probes = config.breaker_half_open_probes;
  spec.resilience = r;
  return spec;
}

Result<LocalStoreOptions> LocalStoreOptionsOf(const ServerConfig& c) {
  auto spec = StoreSpecOf(c);
  if (!spec.ok()) return spec.status();
  if (auto scheme = StoreSchemeOf(c.store); !scheme.ok() || *scheme != StoreScheme::kLocal) {
    return spec->local;
  }
  return LocalOptionsOf(*spec);
}

std::vector<ConfigError> ValidateServerConfig(const ServerConfig& c) {
  std::vector<ConfigError> errors;
  CheckListeners(c, &errors);
  CheckSecrets(c, &errors);
  CheckGrpc(c, &errors);
  CheckStore(c, &errors);
  CheckProcess(c, &errors);
  CheckJwt(c, &errors);
  CheckTracing(c, &errors);
  return errors;
}

size_t ReadBufferLimit(const ServerConfig& c) {
  // Room for the largest head or trailer section plus one read's worth, so
  // the parser's own limits (431, 400) fire before the buffer is full.
  return std::max({c.max_header_bytes, c.max_trailer_bytes, c.max_chunk_extension_bytes}) + 4096;
}

EnforcerOptions MakeEnforcerOptions(const ServerConfig& c) {
  EnforcerOptions o;
  o.header_styles = c.header_styles;
  o.retry_after_jitter = c.retry_after_jitter;
  o.trusted_proxies = c.trusted_proxies;
  o.forwarded_header = c.forwarded_header;
  o.jwt.hs256_secret = c.jwt_hs256_secret;
  o.jwt.rs256_public_key_pem = c.jwt_rs256_public_key_pem;
  o.jwt.verified_upstream = c.jwt_verified_upstream;
  o.jwt.issuer = c.jwt_issuer;
  o.jwt.audience = c.jwt_audience;
  o.jwt.leeway = std::chrono::seconds(c.jwt_leeway_s);
  // The gateway releases when the upstream response ends, /v1/decide answers
  // carry lease tokens for /v1/release; /v1/auth and RLS callers rely on
  // lease expiry (docs/configuration.md, "Concurrency rules").
  o.releases_leases = true;
  return o;
}

Result<RuntimeOptions> RuntimeOptionsOf(const ServerConfig& c) {
  RuntimeOptions options;
  options.policy.location = c.policy_path;
  options.policy.value_dir = c.policy_value_dir;
  options.policy.remote_files = c.policy_remote_files;
  options.policy.etcd = c.etcd;
  auto spec = StoreSpecOf(c);
  if (!spec.ok()) return spec.status();
  options.store = std::move(spec).value();
  options.enforcer = MakeEnforcerOptions(c);
  options.fleet.share_rollback = c.share_rollback;
  options.fleet.rollback_sync = c.rollback_sync;
  options.local_state.file = c.local_state_file;
  options.local_state.save_interval = c.state_save_interval;
  options.local_state.lock_wait = c.state_lock_wait;
  return options;
}

}  // namespace tollgate::server
