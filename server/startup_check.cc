#include "server/startup_check.h"

#include <optional>

#include "runtime/etcd_watch.h"

#include "server/grpc_frontend.h"
#include "server/store_bundle.h"
#include "server/tenant_hash.h"
#include "tollgate/ip_address.h"
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
    ParsedPolicy policy =
        ParsePolicyFile(c.policy_path, PolicyParseOptions{.base_dir = c.policy_value_dir});
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

std::vector<ConfigError> CheckTenantTables(const ServerConfig& c, std::string* unchecked) {
  if (c.policy_path.empty() || c.policy_path.find("://") != std::string::npos) return {};
  std::optional<StoreBundle> store;  // opened for the first table
  PolicyParseOptions options{.base_dir = c.policy_value_dir};
  options.read_tenant_hash = [&](const TenantHashRef& ref,
                                 std::vector<std::pair<std::string, std::string>>* entries) {
    if (!unchecked->empty()) return Status::Ok();  // the store is out of reach
    if (!store) {
      auto created = CreateStore(c, &SystemClock::Instance(), &SystemClock::Instance());
      if (!created.ok()) {
        *unchecked = "tenant tables not checked: " + created.status().message();
        return Status::Ok();
      }
      store = std::move(created).value();
    }
    if (!store->redis_command) {
      return InvalidArgument("a Redis tenant table needs a Redis store (store: redis://...)");
    }
    Status read = ReadTenantHash(store->redis_command, ref.key, entries);
    if (StoreUnreachable(read)) {
      *unchecked = "tenant tables not checked: the store did not answer (" + read.message() + ")";
      entries->clear();
      return Status::Ok();
    }
    return read;
  };
  std::vector<ConfigError> errors;
  for (const ConfigError& e : ParsePolicyFile(c.policy_path, options).errors) {
    errors.push_back({c.policy_path + ": " + e.path, e.message});
  }
  return errors;
}

}  // namespace tollgate::server
