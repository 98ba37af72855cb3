// tollgated: the rate-limit service. See docs/operations.md.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

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

}  // namespace

int main(int argc, char** argv) {
  using tollgate::server::ServerConfig;
  CLI::App app{kDescription, "tollgated"};
  std::string config_path;
  ServerConfig flags;
  app.add_option("-c,--config", config_path,
                 "Server config file (JSON, see examples/tollgated.json); flags override it");
  auto* policy = app.add_option("-p,--policy", flags.policy_path,
                                "Policy file (rules); reloaded on SIGHUP, POST /v1/reload and "
                                "when the file changes");
  auto* listen = app.add_option("-l,--listen", flags.listen,
                                "HOST:PORT for the decision API, /v1/auth and gateway traffic "
                                "(default 127.0.0.1:8080; [::1]:PORT for IPv6)");
  auto* admin = app.add_option("-a,--admin", flags.admin_listen,
                               "HOST:PORT for the admin listener (reload, policy, top, explain, "
                               "metrics); '' disables it (default 127.0.0.1:9090)");
  auto* admin_token_file = app.add_option(
      "--admin-token-file", flags.admin_token_file,
      "File holding the bearer token the admin listener requires: exactly one line of at least "
      "16 visible ASCII characters (required when --admin is not loopback)");
  auto* admin_open =
      app.add_flag("--admin-allow-unauthenticated", flags.admin_allow_unauthenticated,
                   "Serve a non-loopback admin listener without a token (not recommended)");
  auto* store =
      app.add_option("-s,--store", flags.store,
                     "Where state lives: local[://?max_keys=N&overflow=evict|allow|reject] | "
                     "redis://HOST:PORT | "
                     "redis-cluster://HOST:PORT[,HOST:PORT...] | rediss://... | "
                     "rediss-cluster://... (TLS, see docs/redis.md) (default local)");
  auto* failure = app.add_option("-f,--failure-mode", flags.failure_mode,
                                 "When a remote store fails: open (allow, unenforced), closed "
                                 "(503) or degrade (local buckets at a fraction of the limit)");
  auto* threads =
      app.add_option("-t,--threads", flags.threads, "I/O threads; 0 = one per core (default)");
  auto* upstream = app.add_option("-u,--upstream", flags.upstream,
                                  "Gateway mode: http://HOST:PORT[/base] to forward allowed "
                                  "requests to");
  auto* headers = app.add_option("--headers", flags.header_style,
                                 "Rate-limit header style: draft11 | draft03 | x-ratelimit | "
                                 "x-ratelimit-epoch | none");
  auto* log_level = app.add_option("--log-level", flags.log_level,
                                   "trace | debug | info | warn | error | off (JSON lines on "
                                   "stderr)");
  auto* grpc = app.add_option("--grpc", flags.grpc_listen,
                              "HOST:PORT for the Envoy rate limit service (gRPC); off by default");
  auto* rls = app.add_option("--rls-config", flags.rls_config,
                             "envoyproxy/ratelimit YAML file or directory for --grpc (repeatable)");
  auto* grpc_headers =
      app.add_option("--grpc-headers", flags.grpc_header_style,
                     "RateLimit headers in gRPC responses (response_headers_to_add): draft11 | "
                     "draft03 | x-ratelimit | x-ratelimit-epoch | none (default)");
  auto* rls_algorithm =
      app.add_option("--rls-default-algorithm", flags.rls_default_algorithm,
                     "Algorithm for YAML rate_limit blocks without one: token_bucket (default) | "
                     "leaky_bucket | fixed_window | sliding_window | sliding_log (not on Redis)");
  bool check_only = false;
  app.add_flag("--check", check_only,
               "Run exactly the checks a start runs (config, admin token, trusted proxies, store "
               "URL, policy, with --grpc the rls_config YAML), print every error and exit "
               "(0 = valid, 2 = invalid)");
  CLI11_PARSE(app, argc, argv);

  ServerConfig config;
  if (!config_path.empty()) {
    auto errors = tollgate::server::LoadServerConfigFile(config_path, &config);
    if (!errors.empty()) {
      std::cerr << "tollgated: " << config_path << " is invalid:\n";
      for (const auto& e : errors) std::cerr << "  " << e.ToString() << "\n";
      return 2;
    }
  }
  if (policy->count()) config.policy_path = flags.policy_path;
  if (listen->count()) config.listen = flags.listen;
  if (admin->count()) config.admin_listen = flags.admin_listen;
  if (admin_token_file->count()) {
    std::string why;
    if (!tollgate::server::ReadAdminTokenFile(flags.admin_token_file, &config, &why)) {
      std::cerr << "tollgated: invalid configuration:\n  --admin-token-file: " << why << "\n";
      return 2;
    }
  }
  if (admin_open->count()) config.admin_allow_unauthenticated = true;
  if (store->count()) config.store = flags.store;
  if (failure->count()) config.failure_mode = flags.failure_mode;
  if (threads->count()) config.threads = flags.threads;
  if (upstream->count()) config.upstream = flags.upstream;
  if (headers->count()) config.header_style = flags.header_style;
  if (log_level->count()) config.log_level = flags.log_level;
  if (grpc->count()) config.grpc_listen = flags.grpc_listen;
  if (rls->count()) config.rls_config = flags.rls_config;
  if (grpc_headers->count()) config.grpc_header_style = flags.grpc_header_style;
  if (rls_algorithm->count()) config.rls_default_algorithm = flags.rls_default_algorithm;

  // One function for --check and for the start (Server::Create runs it too):
  // a config --check accepts is not refused at start for a config reason.
  auto errors = tollgate::server::CheckServerConfig(config);
  if (!errors.empty()) {
    std::cerr << "tollgated: invalid configuration:\n";
    for (const auto& e : errors) std::cerr << "  " << e.ToString() << "\n";
    return 2;
  }
  if (check_only) {
    std::cout << (config.grpc_listen.empty() ? "config and policy are valid\n"
                                             : "config, policy and rls_config are valid\n");
    return 0;
  }

  auto server = tollgate::server::Server::Create(config);
  if (!server.ok()) {
    std::cerr << "tollgated: " << server.status().message() << "\n";
    return 1;
  }
  (*server)->HandleSignals();
  (*server)->Start();
  (*server)->Wait();
  return 0;
}
