#include "server/startup_check.h"

#include <optional>

#include <openssl/ssl.h>

#include "server/grpc_frontend.h"
#include "tollgate/clock.h"
#include "tollgate/ip_address.h"
#include "tollgate/policy.h"
#include "tollgate/runtime.h"
#include "tollgate/tls.h"

namespace tollgate::server {

std::vector<ConfigError> CheckServerConfig(const ServerConfig& c,
                                           std::vector<ConfigError>* warnings) {
  std::vector<ConfigError> errors = ValidateServerConfig(c);
  std::vector<ConfigError> ignored;
  const int64_t now_unix = SystemClock::Instance().WallNow() / 1'000'000'000;
  for (auto [tls, path] : {std::pair{&c.tls, "tls"}, std::pair{&c.admin_tls, "admin.tls"},
                           std::pair{&c.grpc_tls, "grpc.tls"}}) {
    if (tls->enabled()) {
      CheckServerTlsSettings(*tls, path, now_unix, &errors, warnings ? warnings : &ignored);
    } else if (!tls->key_file.empty() || !tls->client_ca_file.empty()) {
      errors.push_back({std::string(path) + ".cert_file", "is required with key_file"});
    }
  }
  MakeUpstreamTlsContext(c, now_unix, &errors, warnings ? warnings : &ignored);
  for (size_t i = 0; i < c.trusted_proxies.size(); ++i) {
    if (!Cidr::Parse(c.trusted_proxies[i])) {
      errors.push_back({"trusted_proxies[" + std::to_string(i) + "]",
                        "'" + c.trusted_proxies[i] +
                            "' is not an address or CIDR (10.0.0.1, 10.0.0.0/8, fd00::/8)"});
    }
  }
  // The store spec was checked by ValidateServerConfig; the policy as the engine opens it.
  PolicySourceOptions policy;
  policy.location = c.policy_path;
  policy.value_dir = c.policy_value_dir;
  for (ConfigError& e : tollgate::Runtime::CheckPolicySource(policy))
    errors.push_back(std::move(e));
  if (!c.grpc_listen.empty() && !c.rls_config.empty()) {
    for (ConfigError& e : GrpcFrontend::CheckConfig(c)) {
      e.path = "rls_config: " + e.path;
      errors.push_back(std::move(e));
    }
  }
  return errors;
}

SslCtxPtr MakeUpstreamTlsContext(const ServerConfig& c, int64_t now_unix,
                                 std::vector<ConfigError>* errors,
                                 std::vector<ConfigError>* warnings) {
  UpstreamUrl url;
  std::string why;
  if (c.upstream.empty() || !ParseUpstreamUrl(c.upstream, &url, &why) || !url.tls) return nullptr;
  SslCtxPtr ctx =
      MakeClientTlsContext(c.upstream_tls, "gateway.upstream_tls", now_unix, errors, warnings);
  if (ctx && !c.upstream_tls_verify) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
    warnings->push_back({"gateway.upstream_tls.verify",
                         "false: the upstream's certificate is not verified (anyone on the path "
                         "can answer for " +
                             url.address.host + ")"});
  }
  return ctx;
}

std::vector<ConfigError> CheckTenantTables(const ServerConfig& c, std::string* unchecked) {
  auto options = RuntimeOptionsOf(c);
  if (!options.ok()) return {};  // CheckServerConfig reports it
  return tollgate::Runtime::CheckTenantTables(*options, unchecked);
}

}  // namespace tollgate::server
