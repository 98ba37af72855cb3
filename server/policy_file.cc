#include "server/policy_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tollgate::server {
namespace {

Status Failed(std::string_view step, const std::string& path, int err) {
  return InternalError("cannot " + std::string(step) + " " + path + ": " + std::strerror(err));
}

}  // namespace

Status ReplaceFileAtomically(const std::string& path, std::string_view text) {
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::canonical(path, ec);
  if (ec) return InternalError("cannot resolve " + path + ": " + ec.message());
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) return Failed("stat", target.string(), errno);
  static std::atomic<uint64_t> sequence{0};
  const std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp-" +
                                                   std::to_string(::getpid()) + "-" +
                                                   std::to_string(sequence.fetch_add(1))))
                              .string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0777);
  if (fd < 0) return Failed("create", tmp, errno);
  size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += size_t(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return Failed("write", target.string(), err);
  }
  return Status::Ok();
}

}  // namespace tollgate::server
