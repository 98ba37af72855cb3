// Internal: the PEM loaders every TLS context of tollgate_tls is built from
// (server contexts in server_context.cc; a client context would use the same
// ones), and OpenSSL's error queue as text.
//
// PemLoader reports each problem as a ConfigError under `path` plus the field
// that named the file ("tls.cert_file: /etc/cert.pem: no PEM certificate:
// ..."), so every context names its faults the same way. Each loader reads
// the file with ReadPemFile (at most 1 MiB) and wipes key material from
// memory after use.
//
// Thread safety: a PemLoader belongs to one call; the functions are reentrant.
#ifndef TOLLGATE_SRC_TLS_PEM_H_
#define TOLLGATE_SRC_TLS_PEM_H_

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/config_error.h"

namespace tollgate::tls {

// OpenSSL's queued errors as one line (and the queue emptied); "not valid
// PEM" when the queue held none.
std::string OpenSslErrors();

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

// "the certificate expired on ..." / "... is not valid before ..." when `cert`
// is not valid at `now_unix`; "" when it is.
std::string ValidityProblem(X509* cert, int64_t now_unix);

struct PemLoader {
  std::string_view path;  // the settings' config path ("tls")
  std::vector<ConfigError>* errors;

  void Error(std::string_view field, const std::string& file, const std::string& why);
  // The file's text, or false with an error under `field`.
  bool Read(std::string_view field, const std::string& file, std::string* pem);
  // The certificate, then its chain, into `ctx`; the leaf (owned by ctx) or null.
  X509* Certificates(SSL_CTX* ctx, std::string_view field, const std::string& file);
  // The private key of `leaf` (read from `file`, named `cert_file` in a mismatch) into `ctx`.
  bool Key(SSL_CTX* ctx, X509* leaf, std::string_view field, const std::string& file,
           const std::string& cert_file);
  // Every certificate of a CA file into `store`; their subjects appended to
  // `subjects` when not null. False (with an error) when the file holds none.
  bool Cas(X509_STORE* store, STACK_OF(X509_NAME) * subjects, std::string_view field,
           const std::string& file);
};

}  // namespace tollgate::tls

#endif  // TOLLGATE_SRC_TLS_PEM_H_
