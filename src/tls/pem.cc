#include "tls/pem.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>

#include "tollgate/tls.h"

namespace tollgate {

namespace {
constexpr size_t kMaxPemBytes = size_t{1} << 20;
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

namespace tls {

namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), int(pem.size())), &BIO_free);
}

}  // namespace

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

void PemLoader::Error(std::string_view field, const std::string& file, const std::string& why) {
  errors->push_back({FieldPath(path, field), file + ": " + why});
}

bool PemLoader::Read(std::string_view field, const std::string& file, std::string* pem) {
  std::string why;
  if (ReadPemFile(file, pem, &why)) return true;
  errors->push_back({FieldPath(path, field), why});
  return false;
}

X509* PemLoader::Certificates(SSL_CTX* ctx, std::string_view field, const std::string& file) {
  std::string pem;
  if (!Read(field, file, &pem)) return nullptr;
  BioPtr bio = MemBio(pem);
  X509Ptr leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1) {
    Error(field, file, "no PEM certificate: " + OpenSslErrors());
    return nullptr;
  }
  while (X509* next = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, next) != 1) {
      X509_free(next);
      Error(field, file, "bad chain certificate: " + OpenSslErrors());
      return nullptr;
    }
  }
  ERR_clear_error();  // the end of the file
  return SSL_CTX_get0_certificate(ctx);
}

bool PemLoader::Key(SSL_CTX* ctx, X509* leaf, std::string_view field, const std::string& file,
                    const std::string& cert_file) {
  std::string pem;
  if (!Read(field, file, &pem)) return false;
  BioPtr bio = MemBio(pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key) {
    Error(field, file, "no PEM private key: " + OpenSslErrors());
    return false;
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    Error(field, file, "does not match the certificate in " + cert_file);
    return false;
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    Error(field, file, "cannot be used: " + OpenSslErrors());
    return false;
  }
  return true;
}

bool PemLoader::Cas(X509_STORE* store, STACK_OF(X509_NAME) * subjects, std::string_view field,
                    const std::string& file) {
  std::string pem;
  if (!Read(field, file, &pem)) return false;
  BioPtr bio = MemBio(pem);
  int count = 0;
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, ca);
    if (subjects != nullptr) sk_X509_NAME_push(subjects, X509_NAME_dup(X509_get_subject_name(ca)));
    X509_free(ca);
    ++count;
  }
  ERR_clear_error();
  if (count == 0) {
    Error(field, file, "holds no PEM certificate");
    return false;
  }
  return true;
}

}  // namespace tls
}  // namespace tollgate
