// tollgated: the rate-limit service. See docs/operations.md.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <deque>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/config.h"
#include "server/server.h"
#include "server/startup_check.h"

namespace {

constexpr const char* kDescription =
    "tollgated: rate-limit decisions over HTTP.\n"
    "  Decision API    POST /v1/decide       (JSON request description or explicit items)\n"
    "  nginx           GET  /v1/auth         (auth_request: 204, or 403 + X-RateLimit-Decision)\n"
    "  gateway         any other path        (when gateway.upstream is set: decide, then 429 or "
    "proxy)\n"
    "  operations      GET /metrics /healthz /readyz; admin: POST /v1/reload, GET /v1/policy\n"
    "                  /v1/top /v1/explain\n"
    "Flags override the config file. Signals: SIGTERM/SIGINT drain and exit, SIGHUP reloads the "
    "policy.\nFull reference: docs/operations.md";

using tollgate::ConfigError;
using tollgate::server::ServerConfig;

// The command line: each flag writes into `flags`; when given, it overrides
// the config file's value (Load).
struct CommandLine {
  std::string config_path;
  ServerConfig flags;
  bool check_only = false;
  bool upstream_tls_no_verify = false;
  std::vector<std::function<void(ServerConfig&, std::vector<ConfigError>*)>> overrides;
  std::deque<std::string> texts;  // TextFlag's values (a deque: references stay valid)
  CLI::Option* admin_token_file = nullptr;

  // Declares a flag that sets `field` (of ServerConfig or of its engine part, RuntimeConfig).
  template <typename T, typename Owner>
  CLI::Option* Flag(CLI::App& app, const std::string& names, T Owner::*field,
                    const std::string& help) {
    CLI::Option* opt = app.add_option(names, flags.*field, help);
    overrides.push_back([this, opt, field](ServerConfig& c, std::vector<ConfigError>*) {
      if (opt->count()) c.*field = flags.*field;
    });
    return opt;
  }
  // Declares a flag for an enumerated setting: its text is parsed by the config
  // parser as the field at `path` ({"log", "level"}), so a flag takes the names
  // the config file takes and fails with the same message.
  CLI::Option* TextFlag(CLI::App& app, const std::string& names, std::vector<std::string> path,
                        const std::string& help) {
    std::string& text = texts.emplace_back();
    CLI::Option* opt = app.add_option(names, text, help);
    overrides.push_back(
        [opt, &text, path = std::move(path)](ServerConfig& c, std::vector<ConfigError>* errors) {
          if (!opt->count()) return;
          nlohmann::json doc = text;
          for (auto key = path.rbegin(); key != path.rend(); ++key) {
            nlohmann::json section = nlohmann::json::object();
            section[*key] = std::move(doc);
            doc = std::move(section);
          }
          for (ConfigError& e : tollgate::server::ParseServerConfig(doc.dump(), &c)) {
            errors->push_back(std::move(e));
          }
        });
    return opt;
  }
  void Declare(CLI::App& app);
  // Reads the config file and applies the flags over it; false (after
  // printing why) when either is invalid.
  bool Load(ServerConfig* config);
};

void CommandLine::Declare(CLI::App& app) {
  app.add_option("-c,--config", config_path,
                 "Server config file (JSON, see examples/tollgated.json); flags override it");
  Flag(app, "-p,--policy", &ServerConfig::policy_path,
       "Policy file (rules); reloaded on SIGHUP, POST /v1/reload and when the file changes");
  Flag(app, "-l,--listen", &ServerConfig::listen,
       "HOST:PORT for the decision API, /v1/auth and gateway traffic "
       "(default 127.0.0.1:8080; [::1]:PORT for IPv6)");
  Flag(app, "-a,--admin", &ServerConfig::admin_listen,
       "HOST:PORT for the admin listener (reload, policy, top, explain, "
       "metrics); '' disables it (default 127.0.0.1:9090)");
  admin_token_file = app.add_option(
      "--admin-token-file", flags.admin_token_file,
      "File holding the bearer token the admin listener requires: exactly one line of at least "
      "16 visible ASCII characters (required when --admin is not loopback)");
  CLI::Option* admin_open =
      app.add_flag("--admin-allow-unauthenticated", flags.admin_allow_unauthenticated,
                   "Serve a non-loopback admin listener without a token (not recommended)");
  overrides.push_back([admin_open](ServerConfig& c, std::vector<ConfigError>*) {
    if (admin_open->count()) c.admin_allow_unauthenticated = true;
  });
  Flag(app, "-s,--store", &ServerConfig::store,
       "Where state lives: local[://?max_keys=N&overflow=evict|allow|reject] | "
       "redis://HOST:PORT | "
       "redis-cluster://HOST:PORT[,HOST:PORT...] | rediss://... | "
       "rediss-cluster://... (TLS, see docs/redis.md) (default local)");
  TextFlag(app, "-f,--failure-mode", {"failure_mode"},
           "When a remote store fails: open (allow, unenforced), closed "
           "(503) or degrade (local buckets at a fraction of the limit)");
  Flag(app, "-t,--threads", &ServerConfig::threads, "I/O threads; 0 = one per core (default)");
  Flag(app, "-u,--upstream", &ServerConfig::upstream,
       "Gateway mode: http[s]://HOST[:PORT][/base] to forward allowed requests to");
  TextFlag(app, "--upstream-ca-file", {"gateway", "upstream_tls", "ca_file"},
           "PEM CA file an https:// upstream's certificate must chain to (default: the "
           "system's trust store)");
  TextFlag(app, "--upstream-server-name", {"gateway", "upstream_tls", "server_name"},
           "Name sent as SNI and verified in an https:// upstream's certificate (default: the "
           "upstream's host)");
  TextFlag(app, "--upstream-cert", {"gateway", "upstream_tls", "cert_file"},
           "PEM client certificate presented to an https:// upstream (mTLS)");
  TextFlag(app, "--upstream-key", {"gateway", "upstream_tls", "key_file"},
           "PEM private key of --upstream-cert");
  CLI::Option* no_verify = app.add_flag(
      "--upstream-tls-no-verify", upstream_tls_no_verify,
      "Do not verify an https:// upstream's certificate (insecure: anyone on the path can "
      "answer for the upstream; logged as a warning)");
  overrides.push_back([no_verify](ServerConfig& c, std::vector<ConfigError>*) {
    if (no_verify->count()) c.upstream_tls_verify = false;
  });
  TextFlag(app, "--headers", {"headers"},
           "Rate-limit header styles, comma-separated, each sent once: draft11 | draft03 | "
           "x-ratelimit | x-ratelimit-epoch | none (e.g. draft11,draft03,x-ratelimit)");
  TextFlag(app, "--log-level", {"log", "level"},
           "trace | debug | info | warn | error | off (JSON lines on stderr)");
  Flag(app, "--grpc", &ServerConfig::grpc_listen,
       "HOST:PORT for the Envoy rate limit service (gRPC); off by default");
  Flag(app, "--rls-config", &ServerConfig::rls_config,
       "envoyproxy/ratelimit YAML file or directory for --grpc (repeatable)");
  TextFlag(app, "--grpc-headers", {"grpc", "headers"},
           "RateLimit headers in gRPC responses (response_headers_to_add), comma-separated: "
           "draft11 | draft03 | x-ratelimit | x-ratelimit-epoch | none (default)");
  TextFlag(app, "--rls-default-algorithm", {"grpc", "default_algorithm"},
           "Algorithm for YAML rate_limit blocks without one: token_bucket (default) | "
           "leaky_bucket | fixed_window | sliding_window | sliding_log (not on Redis)");
  TextFlag(app, "--tls-cert", {"tls", "cert_file"},
           "PEM certificate chain: the main listener speaks TLS (HTTPS); see docs/operations.md");
  TextFlag(app, "--tls-key", {"tls", "key_file"}, "PEM private key of --tls-cert");
  TextFlag(app, "--tls-client-ca", {"tls", "client_ca_file"},
           "PEM CA file: the main listener requires client certificates from it (mTLS)");
  TextFlag(app, "--admin-tls-cert", {"admin", "tls", "cert_file"},
           "PEM certificate chain: the admin listener speaks TLS (HTTPS)");
  TextFlag(app, "--admin-tls-key", {"admin", "tls", "key_file"},
           "PEM private key of --admin-tls-cert");
  TextFlag(app, "--admin-tls-client-ca", {"admin", "tls", "client_ca_file"},
           "PEM CA file: the admin listener requires client certificates from it (mTLS)");
  app.add_flag("--check", check_only,
               "Run exactly the checks a start runs (config, admin token, trusted proxies, store "
               "URL, policy, with --grpc the rls_config YAML), print every error and exit "
               "(0 = valid, 2 = invalid)");
}

bool CommandLine::Load(ServerConfig* config) {
  if (!config_path.empty()) {
    auto errors = tollgate::server::LoadServerConfigFile(config_path, config);
    if (!errors.empty()) {
      std::cerr << "tollgated: " << config_path << " is invalid:\n";
      for (const auto& e : errors) std::cerr << "  " << e.ToString() << "\n";
      return false;
    }
  }
  std::vector<ConfigError> errors;
  for (const auto& apply : overrides) apply(*config, &errors);
  if (!errors.empty()) {
    std::cerr << "tollgated: invalid configuration:\n";
    for (const auto& e : errors) std::cerr << "  " << e.ToString() << "\n";
    return false;
  }
  if (admin_token_file->count()) {
    std::string why;
    if (!tollgate::server::ReadAdminTokenFile(flags.admin_token_file, config, &why)) {
      std::cerr << "tollgated: invalid configuration:\n  --admin-token-file: " << why << "\n";
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{kDescription, "tollgated"};
  CommandLine cli;
  cli.Declare(app);
  CLI11_PARSE(app, argc, argv);

  ServerConfig config;
  if (!cli.Load(&config)) return 2;
  // One function for --check and for the start (Server::Create runs it too):
  // a config --check accepts is not refused at start for a config reason.
  std::vector<tollgate::ConfigError> warnings;
  auto errors = tollgate::server::CheckServerConfig(config, &warnings);
  for (const auto& w : warnings) std::cerr << "tollgated: warning: " << w.ToString() << "\n";
  if (!errors.empty()) {
    std::cerr << "tollgated: invalid configuration:\n";
    for (const auto& e : errors) std::cerr << "  " << e.ToString() << "\n";
    return 2;
  }
  if (cli.check_only) {
    // What a start reads besides files: the policy's Redis tenant tables,
    // when the store answers (a start refuses an invalid one).
    std::string unchecked;
    errors = tollgate::server::CheckTenantTables(config, &unchecked);
    if (!errors.empty()) {
      std::cerr << "tollgated: invalid configuration:\n";
      for (const auto& e : errors) std::cerr << "  " << e.ToString() << "\n";
      return 2;
    }
    if (!unchecked.empty()) std::cerr << "tollgated: " << unchecked << "\n";
    std::cout << (config.grpc_listen.empty() ? "config and policy are valid\n"
                                             : "config, policy and rls_config are valid\n");
    return 0;
  }

  auto server = tollgate::server::Server::Create(config);
  if (!server.ok()) {
    std::cerr << "tollgated: " << server.status().message() << "\n";
    // An invalid configuration or policy is not restarted (the unit's
    // RestartPreventExitStatus=2); what may pass on its own (a store or an
    // address out of reach, a port in use) is.
    return server.status().code() == tollgate::StatusCode::kInvalidArgument ? 2 : 1;
  }
  (*server)->HandleSignals();
  (*server)->Start();
  (*server)->Wait();
  return 0;
}
