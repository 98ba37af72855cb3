#include "server/grpc_frontend.h"

#if TOLLGATE_HAVE_RLS
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#endif
#include "tollgate/store_spec.h"

namespace tollgate::server {

#if TOLLGATE_HAVE_RLS
namespace {

class RlsFrontend final : public GrpcFrontend {
 public:
  RlsFrontend(std::unique_ptr<rls::RlsServer> server, std::vector<std::string> paths,
              rls::RlsCompileOptions compile)
      : server_(std::move(server)), paths_(std::move(paths)), compile_(std::move(compile)) {}
  ~RlsFrontend() override { Shutdown(); }
  std::string address() const override { return server_->address(); }
  std::vector<ConfigError> Reload() override { return server_->ReloadFiles(paths_, compile_); }
  void AppendMetrics(std::string* out) const override { server_->counters().AppendPrometheus(out); }
  std::vector<RuleCounters> DecisionCounters() const override {
    std::vector<RuleCounters> out;
    for (const rls::RuleCountersSnapshot& r : server_->counters().RuleSnapshot()) {
      RuleCounters c;
      c.rule = r.rule;
#define TOLLGATE_COPY_DECISION(field, label) c.field = r.field;
      TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_COPY_DECISION)
#undef TOLLGATE_COPY_DECISION
      out.push_back(std::move(c));
    }
    return out;
  }
  ServerMetrics::LatencyCounts DecisionLatency() const override {
    return server_->counters().Latency();
  }
  void Shutdown() override { server_->Shutdown(); }

 private:
  std::unique_ptr<rls::RlsServer> server_;
  std::vector<std::string> paths_;
  rls::RlsCompileOptions compile_;
};

// What the YAML may ask of the configured store: the Redis stores run every
// algorithm but sliding_log, so it is a load error there instead of
// UNAVAILABLE on every call.
rls::RlsCompileOptions CompileOptionsFor(const ServerConfig& config) {
  rls::RlsCompileOptions o;
  o.default_algorithm = config.rls_default_algorithm;
  const Result<StoreScheme> scheme = StoreSchemeOf(config.store);
  const bool local = scheme.ok() && *scheme == StoreScheme::kLocal;
  if (scheme.ok() && *scheme == StoreScheme::kRedisCluster) {
    o.store_name = "the redis-cluster store";
  } else if (!local) {
    o.store_name = "the redis store";
  }
  if (!local) {
    o.supported_algorithms = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                              Algorithm::kFixedWindow, Algorithm::kSlidingWindow};
  }
  return o;
}

}  // namespace

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig& config, Store* store,
                                                          const Clock* clock) {
  rls::RlsCompileOptions compile = CompileOptionsFor(config);
  auto parsed = rls::LoadRlsConfigFiles(config.rls_config, compile);
  if (!parsed.config) {
    std::string text = "invalid rls_config:";
    for (const auto& e : parsed.errors) text += "\n  " + e.ToString();
    return InvalidArgument(text);
  }
  rls::RlsServerOptions options;
  options.address = config.grpc_listen;
  options.store = store;
  options.config = parsed.config;
  options.clock = clock;
  options.decide.header_styles = config.grpc_header_styles;
  options.decide.retry_after = config.grpc_retry_after;
  options.decide.retry_after_jitter = config.grpc_retry_after_jitter;
  auto server = rls::StartRlsServer(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<GrpcFrontend>(
      new RlsFrontend(std::move(server).value(), config.rls_config, std::move(compile)));
}

std::vector<ConfigError> GrpcFrontend::CheckConfig(const ServerConfig& config) {
  // As LoadRlsConfigFiles, but the files that parsed are compiled even when
  // another one did not, so one run reports the errors of every file.
  rls::RlsYamlResult read = rls::ReadRlsYamlFiles(config.rls_config);
  std::vector<ConfigError> errors = std::move(read.errors);
  if (!read.domains.empty() || errors.empty()) {
    auto compiled = rls::CompileRlsConfig(read.domains, CompileOptionsFor(config));
    errors.insert(errors.end(), compiled.errors.begin(), compiled.errors.end());
  }
  return errors;
}
#else
Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig&, Store*,
                                                          const Clock*) {
  return UnavailableError("grpc not available in this build (server/rls was not built)");
}

std::vector<ConfigError> GrpcFrontend::CheckConfig(const ServerConfig&) {
  return {{"grpc_listen", "grpc not available in this build (server/rls was not built)"}};
}
#endif

}  // namespace tollgate::server
