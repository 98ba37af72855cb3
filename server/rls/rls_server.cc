#include "rls/rls_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/rlqs_service.h"
#include "rls/rls_health.h"

namespace tollgate::rls {
namespace {

namespace rlspb = ::envoy::service::ratelimit::v3;

grpc::Status ToGrpc(const Status& st) {
  if (st.ok()) return grpc::Status::OK;
  if (st.code() == StatusCode::kInvalidArgument) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, st.message());
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, st.message());
}

class Service final : public rlspb::RateLimitService::CallbackService {
 public:
  Service(EnvoyDecider* decider, std::vector<std::string> allowed_names)
      : decider_(decider), allowed_names_(std::move(allowed_names)) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* ctx,
                                            const rlspb::RateLimitRequest* request,
                                            rlspb::RateLimitResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!allowed_names_.empty() && !PeerAllowed(*ctx, allowed_names_)) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                       "the client certificate's names are not in grpc.tls.allowed_names"));
      return reactor;
    }
    decider_->Decide(*request, response, [reactor](Status st) { reactor->Finish(ToGrpc(st)); });
    return reactor;
  }

 private:
  EnvoyDecider* decider_;
  const std::vector<std::string> allowed_names_;  // empty: any verified client
};

std::shared_ptr<grpc::ServerCredentials> CredentialsOf(const RlsServerOptions& o) {
  if (o.credentials) return o.credentials;
  if (o.tls_cert_pem.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      o.tls_client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                  : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = o.tls_client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({o.tls_key_pem, o.tls_cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

class RlsServer::Impl {
 public:
  Impl(EnvoyDecider* decider, std::vector<std::string> allowed_names, std::function<bool()> serving)
      : service(decider, allowed_names),
        allowed(std::move(allowed_names)),
        health(std::move(serving)) {}
  Service service;
  std::vector<std::string> allowed;   // grpc.tls.allowed_names, for the RLQS service too
  std::unique_ptr<RlqsService> rlqs;  // with RlsServerOptions::rlqs; outlives `server`
  HealthService health;
  std::unique_ptr<grpc::Server> server;
  std::mutex shutdown_mu;
  bool shut_down = false;
};

Result<std::unique_ptr<RlsServer>> StartRlsServer(const RlsServerOptions& options) {
  std::unique_ptr<RlsServer> s(new RlsServer());
  if (options.decider != nullptr) {
    s->decider_ = options.decider;
  } else {
    if (options.enforcer == nullptr) return InvalidArgument("rls: an Enforcer is required");
    if (!options.config) return InvalidArgument("rls: a configuration is required");
    if (options.clock == nullptr) return InvalidArgument("rls: a clock is required");
    auto decider =
        MakeEnvoyDecider(options.enforcer, options.config, options.clock, options.decide);
    if (!decider.ok()) return decider.status();
    s->own_decider_ = std::move(decider).value();
    s->decider_ = s->own_decider_.get();
  }
  // Serving: the caller's readiness, and neither Drain nor Shutdown called.
  s->impl_ = std::make_unique<RlsServer::Impl>(
      s->decider_, options.tls_allowed_names, [ready = options.serving, stopping = &s->stopping_] {
        return !stopping->load(std::memory_order_acquire) && (!ready || ready());
      });
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, CredentialsOf(options), &port);
  builder.RegisterService(&s->impl_->service);
  builder.RegisterService(&s->impl_->health);
  if (options.rlqs != nullptr) {
    s->impl_->rlqs = std::make_unique<RlqsService>(options.rlqs, s->impl_->allowed);
    builder.RegisterService(s->impl_->rlqs.get());
  }
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options.keepalive_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, options.max_connection_idle_ms);
  // gRPC sets SO_REUSEPORT by default: unless asked, a second tollgated would silently share
  // the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, options.reuse_port ? 1 : 0);
  s->impl_->server = builder.BuildAndStart();
  if (!s->impl_->server || port == 0) {
    return UnavailableError("rls: cannot listen on " + options.address);
  }
  s->port_ = port;
  const auto colon = options.address.rfind(':');
  s->address_ = (colon == std::string::npos ? options.address : options.address.substr(0, colon)) +
                ":" + std::to_string(port);
  return s;
}

std::vector<ConfigError> RlsServer::ReloadFiles(const std::vector<std::string>& paths,
                                                const RlsCompileOptions& options) {
  return decider_->LoadFiles(paths, options);
}

void RlsServer::Shutdown(Nanos grace) {
  stopping_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(impl_->shutdown_mu);
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(grace));
  impl_->server->Wait();
}

RlsServer::~RlsServer() {
  if (impl_ && impl_->server) Shutdown();
}

}  // namespace tollgate::rls
