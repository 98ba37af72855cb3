// Internal: gateway mode's TLS to an https:// upstream (`gateway.upstream_tls`,
// docs/configuration.md), the client side of what nginx's proxy_ssl_* and
// Envoy's UpstreamTlsContext do.
//
// MakeUpstreamTlsContext (server/startup_check.h: no Asio there) is the one
// builder of the upstream's SSL_CTX, run by the startup check (so `tollgated --check` and a start
// fail alike, exit 2, on a CA file, client certificate or key that cannot be read, each error under
// "gateway.upstream_tls.<field>") and again when the server starts. It is
// tollgate/tls.h's client context (TLS 1.2 and 1.3 only, the CAs of ca_file or
// the system's trust store, an optional client certificate for mTLS), with
// verification turned off only when the config says `"verify": false` (a
// warning at --check and at every start).
//
// UpstreamTls holds that context and what each new upstream connection needs:
// NewStream() wraps the connection's socket in a TLS stream that sends the
// server name as SNI (a DNS name; an IP address is not sent, RFC 6066) and,
// when verifying, checks the certificate names it (a DNS SAN, or an IP SAN
// for an address); the proxy then runs the client handshake within the
// upstream connect timeout (server/proxy.cc). Classify() names why a handshake
// failed (a result label and a reason for the log line), and the counters
// behind tollgate_upstream_tls_handshakes_total{result} and
// tollgate_upstream_tls_resumed_total live here.
//
// Sessions: each worker keeps the last session the upstream gave it (TLS 1.3
// tickets arrive after the handshake, through the new-session callback) and
// offers it on its next new connection, so a worker reconnecting after the
// pool emptied does an abbreviated handshake. A worker's slot is touched by
// that worker's thread only.
//
// Certificates are read once, at start: a changed CA file or client
// certificate takes effect at the next restart (SIGHUP reloads the listeners'
// certificates, not the upstream's).
//
// Thread safety: NewStream(worker) and the callbacks it arms run on that
// worker's thread; Count() and Render() may be called from any thread.
#ifndef TOLLGATE_SERVER_UPSTREAM_TLS_H_
#define TOLLGATE_SERVER_UPSTREAM_TLS_H_

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/config.h"
#include "server/context.h"
#include "tollgate/metrics.h"
#include "tollgate/tls.h"

struct ssl_session_st;  // OpenSSL's SSL_SESSION

namespace tollgate::server {

// How an upstream TLS handshake ended. Names declared once, in this order.
#define TOLLGATE_UPSTREAM_TLS_RESULTS(X)                                                \
  X(kOk, "ok")                                                                          \
  X(kTimeout, "timeout")            /* not done within gateway.connect_timeout_ms */    \
  X(kUntrusted, "untrusted")        /* the certificate does not chain to ca_file */     \
  X(kExpired, "expired")            /* the certificate expired or is not valid yet */   \
  X(kNameMismatch, "name_mismatch") /* the certificate does not name server_name */     \
  X(kRefused, "refused")            /* the upstream sent an alert (a client cert...) */ \
  X(kProtocol, "protocol")          /* not TLS (a plaintext upstream), no common... */  \
  X(kClosed, "closed")              /* the upstream closed the connection */
enum class UpstreamTlsResult : uint8_t {
#define TOLLGATE_UPSTREAM_TLS_ENUM(e, name) e,
  TOLLGATE_UPSTREAM_TLS_RESULTS(TOLLGATE_UPSTREAM_TLS_ENUM)
#undef TOLLGATE_UPSTREAM_TLS_ENUM
      kCount
};
std::string_view UpstreamTlsResultName(UpstreamTlsResult r);

class UpstreamTls {
 public:
  // Takes `ctx` (MakeUpstreamTlsContext's) over; `workers` session slots.
  UpstreamTls(SslCtxPtr ctx, const ServerConfig& config, const UpstreamUrl& upstream,
              size_t workers);
  ~UpstreamTls();
  UpstreamTls(const UpstreamTls&) = delete;
  UpstreamTls& operator=(const UpstreamTls&) = delete;

  // A TLS stream over `socket` (connected), ready for the client handshake:
  // SNI and the name to verify set, `worker`'s last session offered.
  std::unique_ptr<TlsStream, TlsStreamDelete> NewStream(boost::asio::ip::tcp::socket& socket,
                                                        size_t worker);
  // After a handshake: its result (`timed_out`: the sweeper closed the socket)
  // and, when it failed, why (for the log: OpenSSL's reason, the verification
  // error, the name verified). Counts the result, and a resumed session.
  UpstreamTlsResult Finish(TlsStream& stream, const boost::system::error_code& ec, bool timed_out,
                           std::string* reason);

  const std::string& server_name() const { return server_name_; }
  bool verify() const { return verify_; }
  // tollgate_upstream_tls_handshakes_total{result}, tollgate_upstream_tls_resumed_total.
  void Render(PrometheusWriter& w) const { Render(w, this); }
  // The same families with every sample 0 when `tls` is null (no https://
  // upstream): /metrics lists what docs/failure-modes.md names in every mode.
  static void Render(PrometheusWriter& w, const UpstreamTls* tls);

 private:
  struct SessionSlot {
    UpstreamTls* owner = nullptr;
    ssl_session_st* session = nullptr;  // owned; the worker's last one
  };
  static int NewSession(ssl_st* ssl, ssl_session_st* session);

  boost::asio::ssl::context context_;
  const std::string server_name_;  // sent as SNI (a DNS name) and verified
  const bool server_name_is_ip_;
  const bool verify_;
  std::vector<SessionSlot> sessions_;  // one per worker
  std::array<std::atomic<uint64_t>, size_t(UpstreamTlsResult::kCount)> handshakes_{};
  std::atomic<uint64_t> resumed_{0};
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_UPSTREAM_TLS_H_
