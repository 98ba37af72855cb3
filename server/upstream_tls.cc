#include "server/upstream_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>

#include "server/tls_listener.h"
#include "tollgate/ip_address.h"

namespace tollgate::server {

namespace {

namespace ssl = boost::asio::ssl;

constexpr std::string_view kResultNames[] = {
#define TOLLGATE_UPSTREAM_TLS_NAME(e, name) name,
    TOLLGATE_UPSTREAM_TLS_RESULTS(TOLLGATE_UPSTREAM_TLS_NAME)
#undef TOLLGATE_UPSTREAM_TLS_NAME
};
static_assert(std::size(kResultNames) == size_t(UpstreamTlsResult::kCount));

// The SSL ex_data slot where a connection finds its worker's SessionSlot.
int SessionSlotIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::string NameOf(const ServerConfig& c, const UpstreamUrl& u) {
  return c.upstream_tls.server_name.empty() ? u.address.host : c.upstream_tls.server_name;
}

}  // namespace

std::string_view UpstreamTlsResultName(UpstreamTlsResult r) { return kResultNames[size_t(r)]; }

UpstreamTls::UpstreamTls(SslCtxPtr ctx, const ServerConfig& config, const UpstreamUrl& upstream,
                         size_t workers)
    : context_(ctx.release()),  // Asio's context takes the SSL_CTX over (and frees it)
      server_name_(NameOf(config, upstream)),
      server_name_is_ip_(IpAddress::Parse(server_name_).has_value()),
      verify_(config.upstream_tls_verify),
      sessions_(workers) {
  for (SessionSlot& slot : sessions_) slot.owner = this;
  SSL_CTX* native = context_.native_handle();
  // Sessions are kept by the workers (NewSession), not in OpenSSL's cache.
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(native, &UpstreamTls::NewSession);
}

UpstreamTls::~UpstreamTls() {
  for (SessionSlot& slot : sessions_) SSL_SESSION_free(slot.session);
}

int UpstreamTls::NewSession(SSL* ssl, SSL_SESSION* session) {
  auto* slot = static_cast<SessionSlot*>(SSL_get_ex_data(ssl, SessionSlotIndex()));
  if (slot == nullptr) return 0;  // not ours to keep: OpenSSL frees it
  SSL_SESSION_free(slot->session);
  slot->session = session;
  return 1;  // kept: the reference is the slot's now
}

std::unique_ptr<TlsStream, TlsStreamDelete> UpstreamTls::NewStream(
    boost::asio::ip::tcp::socket& socket, size_t worker) {
  std::unique_ptr<TlsStream, TlsStreamDelete> stream(new TlsStream(socket, context_));
  SSL* native = stream->native_handle();
  SessionSlot& slot = sessions_[worker % sessions_.size()];
  SSL_set_ex_data(native, SessionSlotIndex(), &slot);
  if (slot.session != nullptr) SSL_set_session(native, slot.session);
  // SNI carries DNS names only (RFC 6066); an address is checked against the
  // certificate's IP SANs.
  if (!server_name_is_ip_) SSL_set_tlsext_host_name(native, server_name_.c_str());
  if (verify_) {
    if (server_name_is_ip_) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(native), server_name_.c_str());
    } else {
      SSL_set1_host(native, server_name_.c_str());
    }
  }
  return stream;
}

UpstreamTlsResult UpstreamTls::Finish(TlsStream& stream, const boost::system::error_code& ec,
                                      bool timed_out, std::string* reason) {
  UpstreamTlsResult r = UpstreamTlsResult::kOk;
  SSL* native = stream.native_handle();
  const long verified = SSL_get_verify_result(native);
  if (!ec) {
    if (SSL_session_reused(native)) resumed_.fetch_add(1, std::memory_order_relaxed);
  } else if (timed_out) {
    r = UpstreamTlsResult::kTimeout;
    *reason = "TLS handshake timed out";
  } else if (verify_ && verified != X509_V_OK) {
    switch (verified) {
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        r = UpstreamTlsResult::kNameMismatch;
        break;
      case X509_V_ERR_CERT_HAS_EXPIRED:
      case X509_V_ERR_CERT_NOT_YET_VALID:
        r = UpstreamTlsResult::kExpired;
        break;
      default:
        r = UpstreamTlsResult::kUntrusted;
    }
    *reason = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verified) +
              " (verified name " + server_name_ +
              "; is gateway.upstream_tls.ca_file the CA that signed the upstream's certificate?)";
  } else if (ec == boost::asio::error::eof || ec == ssl::error::stream_truncated ||
             ec == boost::asio::error::connection_reset) {
    r = UpstreamTlsResult::kClosed;
    *reason = "the upstream closed the connection in the TLS handshake: " + ec.message();
  } else if (ec.category() == boost::asio::error::get_ssl_category()) {
    // An alert from the upstream (reasons from SSL_AD_REASON_OFFSET on) is
    // its refusal; anything else did not speak TLS as we do.
    const bool alert = ERR_GET_REASON(static_cast<unsigned long>(ec.value())) >= 1000;
    r = alert ? UpstreamTlsResult::kRefused : UpstreamTlsResult::kProtocol;
    *reason = std::string(alert ? "the upstream refused the TLS handshake: "
                                : "no TLS handshake with the upstream (does it speak TLS on "
                                  "this port?): ") +
              ec.message();
  } else {
    r = UpstreamTlsResult::kClosed;
    *reason = "TLS handshake failed: " + ec.message();
  }
  handshakes_[size_t(r)].fetch_add(1, std::memory_order_relaxed);
  return r;
}

void UpstreamTls::Render(PrometheusWriter& w, const UpstreamTls* tls) {
  w.Family("tollgate_upstream_tls_handshakes_total", "counter",
           "Gateway TLS handshakes with an https:// upstream, by result (ok, or why they "
           "failed: the request was answered 502, 504 for a timeout).");
  for (size_t r = 0; r < size_t(UpstreamTlsResult::kCount); ++r) {
    w.Sample("tollgate_upstream_tls_handshakes_total", {"result", kResultNames[r]},
             tls ? tls->handshakes_[r].load(std::memory_order_relaxed) : 0);
  }
  w.Family("tollgate_upstream_tls_resumed_total", "counter",
           "Upstream TLS handshakes that resumed a worker's previous session (abbreviated).");
  w.Sample("tollgate_upstream_tls_resumed_total", {},
           tls ? tls->resumed_.load(std::memory_order_relaxed) : 0);
}

}  // namespace tollgate::server
