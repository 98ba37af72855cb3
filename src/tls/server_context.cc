// The server side of tollgate/tls.h: a server SSL_CTX with optional mTLS and
// allowed client names, and the classification of a failed server handshake.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls/pem.h"
#include "tollgate/http_text.h"
#include "tollgate/tls.h"

namespace tollgate {

void SslCtxFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

namespace {

// Mozilla's "intermediate" configuration (TLS 1.2 part; version 5.7).
constexpr const char* kIntermediateCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
constexpr size_t kMaxAllowedNames = 256;

// The allowed names of a context, owned by it (ex_data freed with the SSL_CTX).
using NameList = std::vector<std::string>;
void FreeNames(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<NameList*>(ptr);
}
int NamesIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeNames);
  return index;
}

std::string_view View(const ASN1_STRING* s) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), size_t(ASN1_STRING_length(s))};
}

// Whether the certificate's subject CN, a SAN DNS name or a SAN URI is in `names`.
bool NameAllowed(X509* cert, const NameList& names) {
  bool found = false;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans) && !found; ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
    if (n->type == GEN_DNS) {
      std::string_view dns = View(n->d.dNSName);
      for (const auto& want : names) found = found || EqualsIgnoreCase(dns, want);
    } else if (n->type == GEN_URI) {
      std::string_view uri = View(n->d.uniformResourceIdentifier);
      for (const auto& want : names) found = found || uri == want;
    }
  }
  GENERAL_NAMES_free(sans);
  const X509_NAME* subject = X509_get_subject_name(cert);
  for (int at = -1; !found;) {
    at = X509_NAME_get_index_by_NID(subject, NID_commonName, at);
    if (at < 0) break;
    std::string_view cn = View(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
    for (const auto& want : names) found = found || EqualsIgnoreCase(cn, want);
  }
  return found;
}

// OpenSSL's chain verification, then at the leaf the allowed names.
int VerifyClient(int preverify_ok, X509_STORE_CTX* store) {
  if (preverify_ok != 1 || X509_STORE_CTX_get_error_depth(store) != 0) return preverify_ok;
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* names =
      ssl ? static_cast<NameList*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), NamesIndex()))
          : nullptr;
  if (names == nullptr || names->empty()) return 1;
  if (NameAllowed(X509_STORE_CTX_get_current_cert(store), *names)) return 1;
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

// The fields checked before any file is read.
void CheckFields(const TlsServerSettings& s, std::string_view path,
                 std::vector<ConfigError>* errors) {
  if (s.key_file.empty()) errors->push_back({FieldPath(path, "key_file"), "is required"});
  if (!s.allowed_names.empty() && s.client_ca_file.empty()) {
    errors->push_back({FieldPath(path, "allowed_names"),
                       "needs client_ca_file (names are checked on client certificates)"});
  }
  if (s.allowed_names.size() > kMaxAllowedNames) {
    errors->push_back({FieldPath(path, "allowed_names"),
                       "at most " + std::to_string(kMaxAllowedNames) + " names"});
  }
  for (size_t i = 0; i < s.allowed_names.size(); ++i) {
    if (s.allowed_names[i].empty() || s.allowed_names[i].size() > 1024) {
      errors->push_back(
          {IndexPath(FieldPath(path, "allowed_names"), i), "must be a name of 1 to 1024 bytes"});
    }
  }
  if (s.handshake_timeout.count() <= 0) {
    errors->push_back({FieldPath(path, "handshake_timeout_ms"), "must be positive"});
  }
  if (s.max_handshakes == 0) {
    errors->push_back({FieldPath(path, "max_handshakes"), "must be at least 1"});
  }
}

// mTLS: client certificates from the CAs of client_ca_file, names checked at the leaf.
bool RequireClientCertificates(SSL_CTX* ctx, const TlsServerSettings& s, tls::PemLoader* load) {
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  if (!load->Cas(SSL_CTX_get_cert_store(ctx), names, "client_ca_file", s.client_ca_file)) {
    sk_X509_NAME_pop_free(names, X509_NAME_free);
    return false;
  }
  SSL_CTX_set_client_CA_list(ctx, names);  // takes `names`
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, &VerifyClient);
  SSL_CTX_set_verify_depth(ctx, kMaxVerifyDepth);
  if (!s.allowed_names.empty()) {
    SSL_CTX_set_ex_data(ctx, NamesIndex(), new NameList(s.allowed_names));
  }
  return true;
}

}  // namespace

SslCtxPtr MakeServerTlsContext(const TlsServerSettings& s, std::string_view path, int64_t now_unix,
                               std::vector<ConfigError>* errors,
                               std::vector<ConfigError>* warnings) {
  const size_t errors_before = errors->size();
  CheckFields(s, path, errors);
  if (errors->size() != errors_before) return nullptr;

  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) {
    errors->push_back({std::string(path), "cannot create a TLS context: " + tls::OpenSslErrors()});
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_cipher_list(ctx.get(), kIntermediateCiphers);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  // Resumed sessions (with a verified client certificate) are this server's only.
  static constexpr unsigned char kSessionContext[] = "tollgated";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  tls::PemLoader load{path, errors};
  X509* leaf = load.Certificates(ctx.get(), "cert_file", s.cert_file);
  bool ok = leaf != nullptr && load.Key(ctx.get(), leaf, "key_file", s.key_file, s.cert_file);
  if (!s.client_ca_file.empty()) ok = RequireClientCertificates(ctx.get(), s, &load) && ok;
  if (!ok) return nullptr;
  if (std::string why = tls::ValidityProblem(leaf, now_unix); !why.empty()) {
    warnings->push_back({FieldPath(path, "cert_file"), s.cert_file + ": " + why});
  }
  return ctx;
}

void CheckServerTlsSettings(const TlsServerSettings& settings, std::string_view path,
                            int64_t now_unix, std::vector<ConfigError>* errors,
                            std::vector<ConfigError>* warnings) {
  (void)MakeServerTlsContext(settings, path, now_unix, errors, warnings);
}

std::string_view TlsHandshakeResultName(TlsHandshakeResult r) {
  switch (r) {
#define TOLLGATE_TLS_NAME(e, name) \
  case TlsHandshakeResult::e:      \
    return name;
    TOLLGATE_TLS_HANDSHAKE_RESULTS(TOLLGATE_TLS_NAME)
#undef TOLLGATE_TLS_NAME
    case TlsHandshakeResult::kCount:
      break;
  }
  return "unknown";
}

TlsHandshakeResult ClassifyHandshakeFailure(ssl_st* ssl, unsigned long openssl_error) {
  if (openssl_error == 0) return TlsHandshakeResult::kClosed;
  switch (ERR_GET_REASON(openssl_error)) {
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      return TlsHandshakeResult::kNoClientCert;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return ssl != nullptr && SSL_get_verify_result(ssl) == X509_V_ERR_APPLICATION_VERIFICATION
                 ? TlsHandshakeResult::kNameNotAllowed
                 : TlsHandshakeResult::kBadClientCert;
    default:
      return TlsHandshakeResult::kProtocol;
  }
}

}  // namespace tollgate
