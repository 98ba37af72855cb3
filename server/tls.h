// TLS for tollgated's listeners: the settings of one listener (`tls`,
// `admin.tls`, `grpc.tls`) and the OpenSSL server context built from them.
//
// MakeServerTlsContext reads the PEM certificate chain, the private key and,
// for mTLS, the client CA file; it checks that the key matches the
// certificate, and builds an SSL_CTX that speaks TLS 1.2 and 1.3 only, with
// Mozilla's "intermediate" TLS 1.2 cipher list (TLS 1.3 keeps OpenSSL's
// suites), no compression and no renegotiation. With client_ca_file a client
// must present a certificate that chains to a CA in that file (verify depth
// kMaxVerifyDepth); with allowed_names too, its subject CN or one of its SAN
// DNS names or URIs must be in that list (exact; DNS names compared without
// case), checked in the handshake, so a refused client gets a TLS alert. The
// context owns everything its verification needs: it may outlive the
// TlsSettings it was built from.
//
// Errors are ConfigErrors whose path is the field at fault under the
// listener's config path ("tls.key_file: /etc/tollgate/key.pem: does not
// match the certificate in /etc/tollgate/cert.pem"). An expired certificate
// (or one not yet valid) is a warning, not an error: tollgated starts and
// logs it, and clients refuse the handshake (docs/operations.md, "TLS").
//
// No Asio here: `tollgated --check` links this (tollgated_config). The
// listener side (ssl_stream, reload, handshake caps) is server/tls_listener.h.
//
// Thread safety: the functions are reentrant; an SSL_CTX is shared by the
// connections made from it (OpenSSL locks it internally).
#ifndef TOLLGATE_SERVER_TLS_H_
#define TOLLGATE_SERVER_TLS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/config_error.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX
struct ssl_st;      // OpenSSL's SSL

namespace tollgate::server {

struct TlsSettings {
  std::string cert_file;                   // PEM: the certificate, then its chain; "" = TLS off
  std::string key_file;                    // PEM private key of the certificate
  std::string client_ca_file;              // PEM CAs: client certificates required (mTLS)
  std::vector<std::string> allowed_names;  // mTLS: CN, SAN DNS or URI that may connect
  std::chrono::milliseconds handshake_timeout{10000};
  size_t max_handshakes = 256;  // handshakes in progress on the listener; more are closed
  bool enabled() const { return !cert_file.empty(); }
};

struct SslCtxFree {
  void operator()(ssl_ctx_st* ctx) const;
};
using SslCtxPtr = std::unique_ptr<ssl_ctx_st, SslCtxFree>;

inline constexpr int kMaxVerifyDepth = 8;

// The server context for `settings` (enabled), or the errors under `path`
// ("tls", "admin.tls"). `warnings` gets what does not stop a start (an expired
// certificate), judged at `now_unix` (seconds since the epoch).
SslCtxPtr MakeServerTlsContext(const TlsSettings& settings, std::string_view path, int64_t now_unix,
                               std::vector<ConfigError>* errors,
                               std::vector<ConfigError>* warnings);

// The checks MakeServerTlsContext makes (for `tollgated --check` and
// CheckServerConfig): no context is kept.
void CheckTlsSettings(const TlsSettings& settings, std::string_view path, int64_t now_unix,
                      std::vector<ConfigError>* errors, std::vector<ConfigError>* warnings);

// Reads a PEM file whole (at most 1 MiB), for gRPC's credentials; false with
// "<file>: <why>".
bool ReadPemFile(const std::string& file, std::string* out, std::string* why);

// Why a handshake failed, for the tollgate_tls_handshakes_total metric.
// Names declared once, in this order.
#define TOLLGATE_TLS_HANDSHAKE_RESULTS(X)                                           \
  X(kOk, "ok")                                                                      \
  X(kTimeout, "timeout")                 /* handshake_timeout passed */             \
  X(kBusy, "busy")                       /* max_handshakes in progress: closed */   \
  X(kNoClientCert, "no_client_cert")     /* mTLS: the client sent none */           \
  X(kBadClientCert, "bad_client_cert")   /* mTLS: not from the CA, expired, ... */  \
  X(kNameNotAllowed, "name_not_allowed") /* mTLS: no name in allowed_names */       \
  X(kProtocol, "protocol")               /* not TLS, no common version or cipher */ \
  X(kClosed, "closed")                   /* the client went away */
enum class TlsHandshakeResult : uint8_t {
#define TOLLGATE_TLS_ENUM(e, name) e,
  TOLLGATE_TLS_HANDSHAKE_RESULTS(TOLLGATE_TLS_ENUM)
#undef TOLLGATE_TLS_ENUM
      kCount
};
std::string_view TlsHandshakeResultName(TlsHandshakeResult r);

// Classifies a failed server handshake on `ssl` from the OpenSSL error code
// Asio reported (0 when the error was not OpenSSL's: the peer closed).
TlsHandshakeResult ClassifyHandshakeFailure(ssl_st* ssl, unsigned long openssl_error);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_TLS_H_
