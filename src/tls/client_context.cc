// The client side of tollgate/tls.h: an SSL_CTX that verifies the server it
// connects to (a CA file or the system's trust store) and may present a
// client certificate, built from the same PEM loaders as the server context.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls/pem.h"
#include "tollgate/tls.h"

namespace tollgate {

SslCtxPtr MakeClientTlsContext(const TlsClientSettings& s, std::string_view path, int64_t now_unix,
                               std::vector<ConfigError>* errors,
                               std::vector<ConfigError>* warnings) {
  const size_t errors_before = errors->size();
  if (s.cert_file.empty() != s.key_file.empty()) {
    errors->push_back({FieldPath(path, s.cert_file.empty() ? "cert_file" : "key_file"),
                       "cert_file and key_file go together (a client certificate and its key)"});
    return nullptr;
  }
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) {
    errors->push_back({std::string(path), "cannot create a TLS context: " + tls::OpenSslErrors()});
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_verify_depth(ctx.get(), kMaxVerifyDepth);
  tls::PemLoader load{path, errors};
  if (s.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      errors->push_back(
          {FieldPath(path, "ca_file"),
           "unset, and the system trust store cannot be read: " + tls::OpenSslErrors()});
    }
  } else {
    load.Cas(SSL_CTX_get_cert_store(ctx.get()), nullptr, "ca_file", s.ca_file);
  }
  if (!s.cert_file.empty()) {
    X509* leaf = load.Certificates(ctx.get(), "cert_file", s.cert_file);
    if (leaf != nullptr && load.Key(ctx.get(), leaf, "key_file", s.key_file, s.cert_file)) {
      if (std::string why = tls::ValidityProblem(leaf, now_unix); !why.empty()) {
        warnings->push_back({FieldPath(path, "cert_file"), s.cert_file + ": " + why});
      }
    }
  }
  if (errors->size() != errors_before) return nullptr;
  return ctx;
}

}  // namespace tollgate
