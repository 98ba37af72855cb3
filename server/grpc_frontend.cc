#include "server/grpc_frontend.h"

#if TOLLGATE_HAVE_RLS
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#endif

namespace tollgate::server {

#if TOLLGATE_HAVE_RLS
namespace {

class RlsFrontend final : public GrpcFrontend {
 public:
  RlsFrontend(std::unique_ptr<rls::RlsServer> server, std::vector<std::string> paths)
      : server_(std::move(server)), paths_(std::move(paths)) {}
  ~RlsFrontend() override { Shutdown(); }
  std::string address() const override { return server_->address(); }
  std::vector<ConfigError> Reload() override { return server_->ReloadFiles(paths_); }
  void AppendMetrics(std::string* out) const override { server_->counters().AppendPrometheus(out); }
  void Shutdown() override { server_->Shutdown(); }

 private:
  std::unique_ptr<rls::RlsServer> server_;
  std::vector<std::string> paths_;
};

}  // namespace

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig& config, Store* store,
                                                          const Clock* clock) {
  auto parsed = rls::LoadRlsConfigFiles(config.rls_config);
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
  auto server = rls::StartRlsServer(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<GrpcFrontend>(
      new RlsFrontend(std::move(server).value(), config.rls_config));
}
#else
Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const ServerConfig&, Store*,
                                                          const Clock*) {
  return UnavailableError("grpc not available in this build (server/rls was not built)");
}
#endif

}  // namespace tollgate::server
