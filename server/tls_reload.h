// Internal: what every TLS listener of tollgated shares for certificate
// rotation (the main and admin listeners' TlsListener, the gRPC port's
// GrpcTlsCertificates).
//
// A TlsReloadable reads its files again on Reload() and puts the new
// certificates in place for new connections only when every file loaded and
// the key matches the certificate; otherwise the current ones stay and the
// errors (each under the listener's path, "admin.tls.key_file: ...") are
// returned. Connections already open keep the certificate they started with.
//
// FilesChanged() is the file watch: it compares each file's identity (device,
// inode, size, modification time in ns) with what the last load saw, so a file
// rewritten in place or renamed over is noticed with one stat() per file. Each
// Reload() records the identity it read, so a broken file is reported once,
// not at every poll, and is tried again when it changes again.
//
// Thread safety: every member may be called from any thread; the subclass's
// Load() must be safe to run concurrently with its readers.
#ifndef TOLLGATE_SERVER_TLS_RELOAD_H_
#define TOLLGATE_SERVER_TLS_RELOAD_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tollgate/config_error.h"
#include "tollgate/tls.h"

namespace tollgate::server {

class TlsReloadable {
 public:
  virtual ~TlsReloadable() = default;
  TlsReloadable(const TlsReloadable&) = delete;
  TlsReloadable& operator=(const TlsReloadable&) = delete;

  // Reads the files again; the new certificates are used for new connections
  // only when they all loaded. Empty: reloaded.
  std::vector<ConfigError> Reload(int64_t now_unix, std::vector<ConfigError>* warnings);
  // Whether a file changed since the last Reload() read it (and notes it as seen).
  bool FilesChanged();

  const TlsServerSettings& settings() const { return settings_; }
  const std::string& path() const { return path_; }  // "tls", "admin.tls", "grpc.tls"

 protected:
  TlsReloadable(TlsServerSettings settings, std::string path)
      : settings_(std::move(settings)), path_(std::move(path)) {}
  // Builds from the files and swaps in on success; the errors otherwise.
  virtual std::vector<ConfigError> Load(int64_t now_unix, std::vector<ConfigError>* warnings) = 0;

 private:
  std::string FileIdentities() const;

  const TlsServerSettings settings_;
  const std::string path_;
  std::mutex seen_mu_;
  std::string seen_;  // FileIdentities() when last read; guarded by seen_mu_
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_TLS_RELOAD_H_
