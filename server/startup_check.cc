#include "server/startup_check.h"

#include "runtime/etcd_watch.h"

#include "server/grpc_frontend.h"
#include "src/policy/client_ip.h"
#include "tollgate/policy.h"

namespace tollgate::server {

std::vector<ConfigError> CheckServerConfig(const ServerConfig& c) {
  std::vector<ConfigError> errors = ValidateServerConfig(c);
  for (size_t i = 0; i < c.trusted_proxies.size(); ++i) {
    if (!Cidr::Parse(c.trusted_proxies[i])) {
      errors.push_back({"trusted_proxies[" + std::to_string(i) + "]",
                        "'" + c.trusted_proxies[i] +
                            "' is not an address or CIDR (10.0.0.1, 10.0.0.0/8, fd00::/8)"});
    }
  }
  if (c.policy_path.find("://") != std::string::npos) {
    // A URL: only etcd:// is a source (https://, etcds:// are refused saying
    // TLS is not supported). The key is read at start-up, not here.
    if (auto url = etcd::ParseEtcdUrl(c.policy_path); !url.ok()) {
      errors.push_back({"policy", url.status().message()});
    }
  } else if (!c.policy_path.empty()) {
    ParsedPolicy policy = ParsePolicyFile(c.policy_path);
    for (const ConfigError& e : policy.errors) {
      errors.push_back({e.path.empty() ? c.policy_path : c.policy_path + ": " + e.path, e.message});
    }
  }
  if (!c.grpc_listen.empty() && !c.rls_config.empty()) {
    for (ConfigError& e : GrpcFrontend::CheckConfig(c)) {
      e.path = "rls_config: " + e.path;
      errors.push_back(std::move(e));
    }
  }
  return errors;
}

}  // namespace tollgate::server
