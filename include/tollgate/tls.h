// TLS contexts built from PEM files: the settings of one TLS endpoint, the
// OpenSSL context made from them, and the result names of a handshake.
//
// A server context (MakeServerTlsContext) reads the PEM certificate chain, the
// private key and, for mTLS, the client CA file; it checks that the key matches
// the certificate, and builds an SSL_CTX that speaks TLS 1.2 and 1.3 only, with
// Mozilla's "intermediate" TLS 1.2 cipher list (TLS 1.3 keeps OpenSSL's
// suites), no compression and no renegotiation. With client_ca_file a client
// must present a certificate that chains to a CA in that file (verify depth
// kMaxVerifyDepth); with allowed_names too, its subject CN or one of its SAN
// DNS names or URIs must be in that list (exact; DNS names compared without
// case), checked in the handshake, so a refused client gets a TLS alert. The
// context owns everything its verification needs: it may outlive the settings
// it was built from.
//
// A client context (MakeClientTlsContext: the etcd policy source's) verifies
// the server it connects to, always: against the CAs of ca_file, or the
// system's trust store without one; it speaks TLS 1.2 and 1.3 only, and
// presents a client certificate when cert_file and key_file are set. The name
// to verify and send as SNI is per connection (server_name, else the host
// dialled): the caller sets it on each SSL (SSL_set1_host,
// SSL_set_tlsext_host_name). Built from the same PEM loaders (src/tls/pem.h).
//
// Errors are ConfigErrors whose path is the field at fault under the caller's
// config path ("tls.key_file: /etc/tollgate/key.pem: does not match the
// certificate in /etc/tollgate/cert.pem"). An expired certificate (or one not
// yet valid) is a warning, not an error: the caller starts and logs it, and
// peers refuse the handshake.
//
// OpenSSL's types appear here only as the forward-declared ssl_ctx_st and
// ssl_st; the OpenSSL headers stay in src/tls/. No I/O library either: a
// listener or a client (Asio's ssl::context takes an SSL_CTX over) wraps the
// context itself (tollgated: server/tls_listener.h).
//
// Thread safety: the functions are reentrant; an SSL_CTX is shared by the
// connections made from it (OpenSSL locks it internally). Implemented in
// tollgate_tls (src/tls/), which links OpenSSL's libssl and libcrypto.
#ifndef TOLLGATE_TLS_H_
#define TOLLGATE_TLS_H_

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

namespace tollgate {

// A TLS server endpoint (tollgated's `tls`, `admin.tls`, `grpc.tls`).
struct TlsServerSettings {
  std::string cert_file;                   // PEM: the certificate, then its chain; "" = TLS off
  std::string key_file;                    // PEM private key of the certificate
  std::string client_ca_file;              // PEM CAs: client certificates required (mTLS)
  std::vector<std::string> allowed_names;  // mTLS: CN, SAN DNS or URI that may connect
  // For the listener that serves the context (checked here with the rest, so one
  // check covers the whole settings object).
  std::chrono::milliseconds handshake_timeout{10000};
  size_t max_handshakes = 256;  // handshakes in progress on the listener; more are closed
  bool enabled() const { return !cert_file.empty(); }
};

// A TLS client endpoint (tollgated's `etcd.tls`).
struct TlsClientSettings {
  std::string ca_file = {};      // PEM CAs that sign the server's certificate; "" = the system's
  std::string cert_file = {};    // PEM client certificate (and chain) ...
  std::string key_file = {};     // ... and its key: both or neither
  std::string server_name = {};  // the name verified and sent as SNI; "" = the host dialled
  bool any() const {
    return !ca_file.empty() || !cert_file.empty() || !key_file.empty() || !server_name.empty();
  }
};

struct SslCtxFree {
  void operator()(ssl_ctx_st* ctx) const;
};
using SslCtxPtr = std::unique_ptr<ssl_ctx_st, SslCtxFree>;

inline constexpr int kMaxVerifyDepth = 8;

// The server context for `settings` (enabled), or null with the errors under
// `path` ("tls", "admin.tls"). `warnings` gets what does not stop a start (an
// expired certificate), judged at `now_unix` (seconds since the epoch).
SslCtxPtr MakeServerTlsContext(const TlsServerSettings& settings, std::string_view path,
                               int64_t now_unix, std::vector<ConfigError>* errors,
                               std::vector<ConfigError>* warnings);

// The client context for `settings`, or null with the errors under `path`
// ("etcd.tls"): a CA file without a certificate, a certificate without its
// key or not matching it. `warnings`: a client certificate not valid at
// `now_unix`.
SslCtxPtr MakeClientTlsContext(const TlsClientSettings& settings, std::string_view path,
                               int64_t now_unix, std::vector<ConfigError>* errors,
                               std::vector<ConfigError>* warnings);

// The checks MakeServerTlsContext makes (for a config check): no context is kept.
void CheckServerTlsSettings(const TlsServerSettings& settings, std::string_view path,
                            int64_t now_unix, std::vector<ConfigError>* errors,
                            std::vector<ConfigError>* warnings);

// Reads a PEM file whole (at most 1 MiB), for libraries that take PEM text
// (gRPC's credentials); false with "<file>: <why>" ("is required" for "").
bool ReadPemFile(const std::string& file, std::string* out, std::string* why);

// Why a server handshake failed, for a handshake metric. Names declared once,
// in this order.
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
// the I/O layer reported (0 when the error was not OpenSSL's: the peer closed).
TlsHandshakeResult ClassifyHandshakeFailure(ssl_st* ssl, unsigned long openssl_error);

}  // namespace tollgate

#endif  // TOLLGATE_TLS_H_
