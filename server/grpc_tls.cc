#include "server/grpc_tls.h"

#include <fcntl.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/crypto.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tollgate::server {

namespace {

std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// The three files' text, or false with an error under `path`.
bool ReadAll(const TlsServerSettings& s, std::string_view path, std::string* cert, std::string* key,
             std::string* ca, std::vector<ConfigError>* errors) {
  std::string why;
  if (!ReadPemFile(s.cert_file, cert, &why)) {
    errors->push_back({FieldPath(path, "cert_file"), why});
  } else if (!ReadPemFile(s.key_file, key, &why)) {
    errors->push_back({FieldPath(path, "key_file"), why});
  } else if (!s.client_ca_file.empty() && !ReadPemFile(s.client_ca_file, ca, &why)) {
    errors->push_back({FieldPath(path, "client_ca_file"), why});
  }
  return errors->empty();
}

}  // namespace

std::unique_ptr<GrpcTlsCertificates> GrpcTlsCertificates::Create(
    TlsServerSettings settings, std::string path, int64_t now_unix,
    std::vector<ConfigError>* errors, std::vector<ConfigError>* warnings) {
  std::unique_ptr<GrpcTlsCertificates> c(
      new GrpcTlsCertificates(std::move(settings), std::move(path)));
  std::vector<ConfigError> first = c->Reload(now_unix, warnings);
  if (!first.empty()) {
    errors->insert(errors->end(), first.begin(), first.end());
    return nullptr;
  }
  return c;
}

GrpcTlsCertificates::~GrpcTlsCertificates() {
  for (int fd : {pair_fd_, ca_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::vector<ConfigError> GrpcTlsCertificates::Load(int64_t now_unix,
                                                   std::vector<ConfigError>* warnings) {
  std::lock_guard lock(mu_);
  std::vector<ConfigError> errors;
  std::string cert, key, ca;
  if (!ReadAll(settings(), path(), &cert, &key, &ca, &errors)) return errors;
  // The checks every listener makes, on the files; then the files read again:
  // what was checked is what gRPC gets, or nothing changes.
  (void)MakeServerTlsContext(settings(), path(), now_unix, &errors, warnings);
  if (!errors.empty()) return errors;
  std::string cert2, key2, ca2;
  if (!ReadAll(settings(), path(), &cert2, &key2, &ca2, &errors)) return errors;
  const bool same = cert == cert2 && key == key2 && ca == ca2;
  OPENSSL_cleanse(key2.data(), key2.size());
  if (!same) {
    OPENSSL_cleanse(key.data(), key.size());
    return {{path(),
             "the files changed while they were read: kept the current certificate "
             "(read again when they change)"}};
  }
  ++generation_;
  std::string pair = key + "\n" + cert;
  OPENSSL_cleanse(key.data(), key.size());
  std::string why;
  bool ok = Publish(&pair_fd_, pair, &why) && (ca.empty() || Publish(&ca_fd_, ca, &why));
  OPENSSL_cleanse(pair.data(), pair.size());
  if (!ok) errors.push_back({path(), "cannot hand the certificate to gRPC: " + why});
  return errors;
}

bool GrpcTlsCertificates::Publish(int* fd, const std::string& text, std::string* why) {
  int next = ::memfd_create("tollgate-grpc-tls", MFD_CLOEXEC);
  if (next < 0) {
    *why = std::string("memfd_create: ") + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(next, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = std::string("write: ") + std::strerror(errno);
      ::close(next);
      return false;
    }
    done += size_t(n);
  }
  // gRPC reads the key and the certificate in two reads between two stat()s,
  // comparing whole-second mtimes: every version gets its own.
  const struct timespec times[2] = {{time_t(generation_), 0}, {time_t(generation_), 0}};
  if (::futimens(next, times) != 0) {
    *why = std::string("futimens: ") + std::strerror(errno);
    ::close(next);
    return false;
  }
  if (*fd < 0) {
    *fd = next;
    return true;
  }
  // One step: the path gRPC reads names the new file from here on.
  if (::dup3(next, *fd, O_CLOEXEC) < 0) {
    *why = std::string("dup3: ") + std::strerror(errno);
    ::close(next);
    return false;
  }
  ::close(next);
  return true;
}

std::shared_ptr<grpc::ServerCredentials> GrpcTlsCertificates::Credentials() const {
  const std::string pair = FdPath(pair_fd_);
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      pair, pair, ca_fd_ < 0 ? "" : FdPath(ca_fd_), /*refresh_interval_sec=*/1);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (ca_fd_ >= 0) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace tollgate::server
