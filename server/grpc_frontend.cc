#include "server/grpc_frontend.h"

#if TOLLGATE_HAVE_RLS
#include "rls/rls_decider.h"
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#endif
#include "tollgate/store_spec.h"

namespace tollgate::server {

#if TOLLGATE_HAVE_RLS
namespace {

class RlsFrontend final : public GrpcFrontend {
 public:
  RlsFrontend(std::unique_ptr<rls::RlsDecider> decider, std::unique_ptr<rls::RlsServer> server)
      : decider_(std::move(decider)), server_(std::move(server)) {}
  ~RlsFrontend() override { Shutdown(); }
  std::string address() const override { return server_->address(); }
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
  std::unique_ptr<rls::RlsDecider> decider_;  // reads the Runtime's snapshot
  std::unique_ptr<rls::RlsServer> server_;    // declared after: stops first
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

rls::RlsDecideOptions DecideOptionsFor(const ServerConfig& config) {
  rls::RlsDecideOptions o;
  o.header_styles = config.grpc_header_styles;
  o.retry_after = config.grpc_retry_after;
  o.retry_after_jitter = config.grpc_retry_after_jitter;
  return o;
}

}  // namespace

std::optional<EnforcerOptions> GrpcFrontend::EnforcerOptionsFor(const ServerConfig& config) {
  if (config.grpc_listen.empty()) return std::nullopt;
  return rls::EnvoyEnforcerOptions(DecideOptionsFor(config));
}

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig& config,
                                                          tollgate::Runtime& engine,
                                                          const Clock* clock) {
  Enforcer* enforcer = engine.envoy_enforcer();
  if (enforcer == nullptr) return InvalidArgument("grpc: the runtime has no Envoy enforcer");
  // The rule files become the Runtime's companion: compiled now, then
  // reloaded (and checked by a PUT) with the policy, in its one swap.
  std::vector<ConfigError> errors = engine.AttachCompanion(rls::RlsCompanion(
      engine.policies(), *enforcer, config.rls_config, CompileOptionsFor(config)));
  if (!errors.empty()) {
    std::string text = "invalid rls_config:";
    for (const auto& e : errors) text += "\n  " + e.ToString();
    return InvalidArgument(text);
  }
  auto decider = std::make_unique<rls::RlsDecider>(&engine.policies(), enforcer, clock,
                                                   DecideOptionsFor(config));
  rls::RlsServerOptions options;
  options.address = config.grpc_listen;
  options.decider = decider.get();
  options.clock = clock;
  auto server = rls::StartRlsServer(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<GrpcFrontend>(
      new RlsFrontend(std::move(decider), std::move(server).value()));
}

std::vector<ConfigError> GrpcFrontend::CheckConfig(const ServerConfig& config) {
  return rls::CheckRlsConfigFiles(config.rls_config, CompileOptionsFor(config));
}
#else
std::optional<EnforcerOptions> GrpcFrontend::EnforcerOptionsFor(const ServerConfig&) {
  return std::nullopt;
}

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig&, tollgate::Runtime&,
                                                          const Clock*) {
  return UnavailableError("grpc not available in this build (server/rls was not built)");
}

std::vector<ConfigError> GrpcFrontend::CheckConfig(const ServerConfig&) {
  return {{"grpc_listen", "grpc not available in this build (server/rls was not built)"}};
}
#endif

}  // namespace tollgate::server
