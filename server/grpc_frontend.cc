#include "server/grpc_frontend.h"

#if TOLLGATE_HAVE_RLS
#include "rls/rlqs_quota.h"
#include "rls/rls_server.h"
#include "server/grpc_tls.h"
#include "tollgate/envoy_rls.h"
#endif
#include "tollgate/store_spec.h"

namespace tollgate::server {

#if TOLLGATE_HAVE_RLS
namespace {

class RlsFrontend final : public GrpcFrontend {
 public:
  RlsFrontend(std::unique_ptr<rls::EnvoyDecider> decider, std::unique_ptr<rls::RlqsQuota> quota,
              std::unique_ptr<GrpcTlsCertificates> certificates,
              std::unique_ptr<rls::RlsServer> server)
      : decider_(std::move(decider)),
        quota_(std::move(quota)),
        certificates_(std::move(certificates)),
        server_(std::move(server)) {}
  ~RlsFrontend() override { Shutdown(); }
  std::string address() const override { return server_->address(); }
  void AppendMetrics(std::string* out) const override {
    decider_->AppendMetrics(out);
    quota_->AppendPrometheus(out);
  }
  std::vector<RuleCounters> DecisionCounters() const override {
    return decider_->DecisionCounters();
  }
  ServerMetrics::LatencyCounts DecisionLatency() const override {
    return decider_->DecisionLatency();
  }
  void Drain() override { server_->Drain(); }
  void Shutdown() override { server_->Shutdown(); }
  TlsReloadable* tls() override { return certificates_.get(); }

 private:
  std::unique_ptr<rls::EnvoyDecider> decider_;         // reads the Runtime's snapshot
  std::unique_ptr<rls::RlqsQuota> quota_;              // RLQS assignments, on the same rules
  std::unique_ptr<GrpcTlsCertificates> certificates_;  // null: plaintext (h2c)
  std::unique_ptr<rls::RlsServer> server_;             // declared after: stops first
};

// What the YAML may ask of the configured store (an unreadable store spec is
// taken as Redis: the narrower set).
rls::RlsCompileOptions CompileOptionsFor(const ServerConfig& config) {
  const Result<StoreScheme> scheme = StoreSchemeOf(config.store);
  return rls::RlsCompileOptionsFor(scheme.ok() ? *scheme : StoreScheme::kRedis,
                                   config.rls_default_algorithm);
}

rls::RlsDecideOptions DecideOptionsFor(const ServerConfig& config) {
  rls::RlsDecideOptions o;
  o.header_styles = config.grpc_header_styles;
  o.retry_after = config.grpc_retry_after;
  o.retry_after_jitter = config.grpc_retry_after_jitter;
  o.response_metadata = config.grpc_response_metadata;
  return o;
}

}  // namespace

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig& config,
                                                          tollgate::Runtime& engine,
                                                          const Clock* clock,
                                                          trace::DecisionTracer* tracer) {
  auto decider = rls::AttachEnvoyDecider(engine, config.rls_config, CompileOptionsFor(config),
                                         clock, DecideOptionsFor(config));
  if (!decider.ok()) return decider.status();
  // The Rate Limit Quota Service: the same rules, the same Enforcer and store.
  rls::RlqsOptions quota_options;
  quota_options.tracer = tracer;  // a decision span per assignment round
  auto quota = rls::RlqsQuota::Create(
      &engine.enforcer(), [d = decider->get()] { return d->config(); }, clock, quota_options);
  if (!quota.ok()) return quota.status();
  rls::RlsServerOptions options;
  options.rlqs = quota->get();
  options.address = config.grpc_listen;
  options.reuse_port = config.reuse_port;
  options.decider = decider->get();
  options.clock = clock;
  // Health: the policy and the Envoy rules are installed, and the store can
  // decide (or its failure mode answers for it), as /readyz.
  options.serving = [&engine, d = decider->get()] { return engine.Ready() && d->config(); };
  std::unique_ptr<GrpcTlsCertificates> certificates;
  if (const TlsServerSettings& tls = config.grpc_tls; tls.enabled()) {
    // Checked by CheckServerConfig; loaded again here (and on every reload).
    std::vector<ConfigError> errors, warnings;
    certificates = GrpcTlsCertificates::Create(tls, "grpc.tls", clock->WallNow() / 1'000'000'000,
                                               &errors, &warnings);
    if (!certificates) return InvalidArgument(errors.empty() ? "grpc.tls" : errors[0].ToString());
    options.credentials = certificates->Credentials();
    options.tls_allowed_names = tls.allowed_names;
  }
  auto server = rls::StartRlsServer(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<GrpcFrontend>(
      new RlsFrontend(std::move(decider).value(), std::move(quota).value(), std::move(certificates),
                      std::move(server).value()));
}

std::vector<ConfigError> GrpcFrontend::CheckConfig(const ServerConfig& config) {
  return rls::CheckRlsConfigFiles(config.rls_config, CompileOptionsFor(config));
}
#else
Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig&, tollgate::Runtime&,
                                                          const Clock*, trace::DecisionTracer*) {
  return UnavailableError("grpc not available in this build (server/rls was not built)");
}

std::vector<ConfigError> GrpcFrontend::CheckConfig(const ServerConfig&) {
  return {{"grpc_listen", "grpc not available in this build (server/rls was not built)"}};
}
#endif

}  // namespace tollgate::server
