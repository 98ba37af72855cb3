// Internal: the gRPC port's certificates (`grpc.tls`), reloadable like the
// other listeners' (server/tls_reload.h: SIGHUP and the file watch).
//
// gRPC's only reloadable source of certificates is its file watcher
// (grpc::experimental::FileWatcherCertificateProvider), which takes whatever
// the files hold, a half-written file or a key for another certificate
// included, and reads a key and a certificate that are swapped in between as
// a pair. So gRPC never watches the operator's files: GrpcTlsCertificates
// reads them, checks them with the same loaders as the other listeners
// (MakeServerTlsContext: PEM, key matching the certificate, CA file), and only
// then publishes them to gRPC through private in-memory files (memfd), the key
// and its certificate chain in one file that is replaced with one dup3(), so
// gRPC sees either the old pair or the new one. A pair that does not load
// keeps the current one (Reload returns why). gRPC's watcher polls the
// in-memory files every second: a new certificate reaches new connections
// within a second of Reload; open connections keep theirs.
//
// Thread safety: Reload/FilesChanged from any thread; Credentials() once,
// before the server starts.
#ifndef TOLLGATE_SERVER_GRPC_TLS_H_
#define TOLLGATE_SERVER_GRPC_TLS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/tls_reload.h"

namespace tollgate::server {

class GrpcTlsCertificates final : public TlsReloadable {
 public:
  // Null with `errors` (under `path`) when the files cannot be loaded.
  static std::unique_ptr<GrpcTlsCertificates> Create(TlsServerSettings settings, std::string path,
                                                     int64_t now_unix,
                                                     std::vector<ConfigError>* errors,
                                                     std::vector<ConfigError>* warnings);
  ~GrpcTlsCertificates() override;

  // TLS server credentials that follow Reload(): client certificates required
  // and verified when client_ca_file is set.
  std::shared_ptr<grpc::ServerCredentials> Credentials() const;

 protected:
  std::vector<ConfigError> Load(int64_t now_unix, std::vector<ConfigError>* warnings) override;

 private:
  GrpcTlsCertificates(TlsServerSettings settings, std::string path)
      : TlsReloadable(std::move(settings), std::move(path)) {}
  // Replaces the in-memory file `*fd` with one holding `text` (created on first use).
  bool Publish(int* fd, const std::string& text, std::string* why);

  std::mutex mu_;           // one Load at a time
  int pair_fd_ = -1;        // the key, then the certificate chain
  int ca_fd_ = -1;          // the client CAs; -1 without client_ca_file
  int64_t generation_ = 0;  // the files' mtime, so gRPC's torn-read check sees every swap
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_GRPC_TLS_H_
