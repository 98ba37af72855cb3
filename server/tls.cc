#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tollgate::server {

void SslCtxFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

namespace {

// Mozilla's "intermediate" configuration (TLS 1.2 part; version 5.7).
constexpr const char* kIntermediateCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
constexpr size_t kMaxPemBytes = size_t{1} << 20;
constexpr size_t kMaxAllowedNames = 256;

// OpenSSL's queued errors as one line (and the queue emptied).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "not valid PEM" : out;
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), int(pem.size())), &BIO_free);
}

// The allowed names of a context, owned by it (ex_data freed with the SSL_CTX).
using NameList = std::vector<std::string>;
void FreeNames(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<NameList*>(ptr);
}
int NamesIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeNames);
  return index;
}

bool EqualNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
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
      for (const auto& want : names) found = found || EqualNoCase(dns, want);
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
    for (const auto& want : names) found = found || EqualNoCase(cn, want);
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

// "expired on ..." / "not valid before ..." when `cert` is not valid at `now_unix`.
std::string ValidityProblem(X509* cert, int64_t now_unix) {
  time_t now = time_t(now_unix);
  auto text = [](const ASN1_TIME* t) {
    BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
    ASN1_TIME_print(bio.get(), t);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, size_t(n));
  };
  if (X509_cmp_time(X509_get0_notAfter(cert), &now) < 0) {
    return "the certificate expired on " + text(X509_get0_notAfter(cert)) +
           ": clients will refuse it";
  }
  if (X509_cmp_time(X509_get0_notBefore(cert), &now) > 0) {
    return "the certificate is not valid before " + text(X509_get0_notBefore(cert)) +
           ": clients will refuse it";
  }
  return "";
}

struct Loader {
  const TlsSettings& s;
  std::string_view path;
  std::vector<ConfigError>* errors;
  void Error(std::string_view field, const std::string& file, const std::string& why) {
    errors->push_back({FieldPath(path, field), file + ": " + why});
  }
  bool Read(std::string_view field, const std::string& file, std::string* pem) {
    std::string why;
    if (ReadPemFile(file, pem, &why)) return true;
    errors->push_back({FieldPath(path, field), why});
    return false;
  }

  // The certificate chain into `ctx`; the leaf is returned (owned by ctx).
  X509* Certificates(SSL_CTX* ctx) {
    std::string pem;
    if (!Read("cert_file", s.cert_file, &pem)) return nullptr;
    BioPtr bio = MemBio(pem);
    X509Ptr leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr), &X509_free);
    if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1) {
      Error("cert_file", s.cert_file, "no PEM certificate: " + OpenSslErrors());
      return nullptr;
    }
    while (X509* next = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      if (SSL_CTX_add0_chain_cert(ctx, next) != 1) {
        X509_free(next);
        Error("cert_file", s.cert_file, "bad chain certificate: " + OpenSslErrors());
        return nullptr;
      }
    }
    ERR_clear_error();  // the end of the file
    return SSL_CTX_get0_certificate(ctx);
  }

  bool Key(SSL_CTX* ctx, X509* leaf) {
    std::string pem;
    if (!Read("key_file", s.key_file, &pem)) return false;
    BioPtr bio = MemBio(pem);
    KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
    OPENSSL_cleanse(pem.data(), pem.size());
    if (!key) {
      Error("key_file", s.key_file, "no PEM private key: " + OpenSslErrors());
      return false;
    }
    if (X509_check_private_key(leaf, key.get()) != 1) {
      ERR_clear_error();
      Error("key_file", s.key_file, "does not match the certificate in " + s.cert_file);
      return false;
    }
    if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
      Error("key_file", s.key_file, "cannot be used: " + OpenSslErrors());
      return false;
    }
    return true;
  }

  bool ClientCas(SSL_CTX* ctx) {
    std::string pem;
    if (!Read("client_ca_file", s.client_ca_file, &pem)) return false;
    BioPtr bio = MemBio(pem);
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    int count = 0;
    while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, ca);
      sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(ca)));
      X509_free(ca);
      ++count;
    }
    ERR_clear_error();
    if (count == 0) {
      sk_X509_NAME_pop_free(names, X509_NAME_free);
      Error("client_ca_file", s.client_ca_file, "holds no PEM certificate");
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
};

}  // namespace

bool ReadPemFile(const std::string& file, std::string* out, std::string* why) {
  if (file.empty()) {
    *why = "is required";
    return false;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    *why = file + ": cannot read: " + std::strerror(errno);
    return false;
  }
  out->assign(kMaxPemBytes + 1, '\0');
  in.read(out->data(), std::streamsize(out->size()));
  out->resize(size_t(in.gcount()));
  if (in.bad()) {
    *why = file + ": cannot read: " + std::strerror(errno);
    return false;
  }
  if (out->size() > kMaxPemBytes) {
    *why = file + ": larger than 1 MiB: not a PEM file";
    return false;
  }
  return true;
}

SslCtxPtr MakeServerTlsContext(const TlsSettings& s, std::string_view path, int64_t now_unix,
                               std::vector<ConfigError>* errors,
                               std::vector<ConfigError>* warnings) {
  const size_t errors_before = errors->size();
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
  if (errors->size() != errors_before) return nullptr;

  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) {
    errors->push_back({std::string(path), "cannot create a TLS context: " + OpenSslErrors()});
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_cipher_list(ctx.get(), kIntermediateCiphers);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  // Resumed sessions (with a verified client certificate) are this server's only.
  static constexpr unsigned char kSessionContext[] = "tollgated";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  Loader load{s, path, errors};
  X509* leaf = load.Certificates(ctx.get());
  bool ok = leaf != nullptr && load.Key(ctx.get(), leaf);
  if (!s.client_ca_file.empty()) ok = load.ClientCas(ctx.get()) && ok;
  if (!ok) return nullptr;
  if (std::string why = ValidityProblem(leaf, now_unix); !why.empty()) {
    warnings->push_back({FieldPath(path, "cert_file"), s.cert_file + ": " + why});
  }
  return ctx;
}

void CheckTlsSettings(const TlsSettings& settings, std::string_view path, int64_t now_unix,
                      std::vector<ConfigError>* errors, std::vector<ConfigError>* warnings) {
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

}  // namespace tollgate::server
