#include "server/tls_reload.h"

#include <sys/stat.h>

namespace tollgate::server {

std::vector<ConfigError> TlsReloadable::Reload(int64_t now_unix,
                                               std::vector<ConfigError>* warnings) {
  {
    // Noted before reading: a file that changes while it is read is seen as
    // changed at the next poll and read again.
    std::string now_seen = FileIdentities();
    std::lock_guard lock(seen_mu_);
    seen_ = std::move(now_seen);
  }
  return Load(now_unix, warnings);
}

bool TlsReloadable::FilesChanged() {
  std::string now_seen = FileIdentities();
  std::lock_guard lock(seen_mu_);
  if (now_seen == seen_) return false;
  seen_ = std::move(now_seen);
  return true;
}

std::string TlsReloadable::FileIdentities() const {
  std::string out;
  for (const std::string* file :
       {&settings_.cert_file, &settings_.key_file, &settings_.client_ca_file}) {
    struct stat st {};
    if (file->empty() || ::stat(file->c_str(), &st) != 0) {
      out += "-;";
      continue;
    }
    out += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
           std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  return out;
}

}  // namespace tollgate::server
