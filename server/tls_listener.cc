#include "server/tls_listener.h"

#include <openssl/ssl.h>

#include "server/context.h"

namespace tollgate::server {

void TlsStreamDelete::operator()(TlsStream* stream) const {
  // An upstream connection's stream (the only owner of this deleter), closed
  // without a close_notify: marked shut down, or SSL_free would take its
  // session for a failed one and make it not resumable (ssl_clear_bad_session).
  SSL_set_shutdown(stream->native_handle(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  delete stream;
}

namespace {

std::shared_ptr<TlsListener::Context> Build(const TlsServerSettings& settings,
                                            std::string_view path, int64_t now_unix,
                                            std::vector<ConfigError>* errors,
                                            std::vector<ConfigError>* warnings) {
  SslCtxPtr ctx = MakeServerTlsContext(settings, path, now_unix, errors, warnings);
  if (!ctx) return nullptr;
  // Asio's context takes the SSL_CTX over (and frees it).
  return std::make_shared<TlsListener::Context>(ctx.release());
}

}  // namespace

std::unique_ptr<TlsListener> TlsListener::Create(TlsServerSettings settings, std::string path,
                                                 int64_t now_unix, std::vector<ConfigError>* errors,
                                                 std::vector<ConfigError>* warnings) {
  std::unique_ptr<TlsListener> l(new TlsListener(std::move(settings), std::move(path)));
  std::vector<ConfigError> first = l->Reload(now_unix, warnings);
  if (!first.empty()) {
    errors->insert(errors->end(), first.begin(), first.end());
    return nullptr;
  }
  return l;
}

std::vector<ConfigError> TlsListener::Load(int64_t now_unix, std::vector<ConfigError>* warnings) {
  std::vector<ConfigError> errors;
  std::shared_ptr<Context> next = Build(settings(), path(), now_unix, &errors, warnings);
  if (next) {
    std::lock_guard lock(mu_);
    context_ = std::move(next);
  }
  return errors;
}

std::optional<TlsListener::HandshakeSlot> TlsListener::TryHandshake() {
  size_t n = handshakes_.fetch_add(1, std::memory_order_relaxed);
  HandshakeSlot slot(&handshakes_);
  if (n >= settings().max_handshakes) return std::nullopt;  // the slot gives it back
  return slot;
}

}  // namespace tollgate::server
