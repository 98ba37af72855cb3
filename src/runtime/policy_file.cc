#include "runtime/policy_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace tollgate::runtime {
namespace {

Status Failed(std::string_view step, const std::string& path, int err) {
  return InternalError("cannot " + std::string(step) + " " + path + ": " + std::strerror(err));
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int WriteAll(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += size_t(n);
  }
  return 0;
}

}  // namespace

Status ReplaceFileAtomically(const std::string& path, std::string_view text) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgument("cannot write " + path + ": not a file name");
  }
  Fd at{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (at.fd < 0) return Failed("open the directory of", path, errno);
  struct stat st {};
  if (::fstatat(at.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Failed("stat", path, errno);
  }
  if (S_ISLNK(st.st_mode)) {
    return InvalidArgument("cannot write " + path +
                           ": it is a symbolic link (not followed; name the file it points to "
                           "as the policy to write it back)");
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument("cannot write " + path + ": not a regular file");
  static std::atomic<uint64_t> sequence{0};
  const std::string tmp = "." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(sequence.fetch_add(1));
  const int fd = ::openat(at.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          st.st_mode & 0777);
  if (fd < 0) return Failed("create", dir + "/" + tmp, errno);
  int err = WriteAll(fd, text);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::renameat(at.fd, tmp.c_str(), at.fd, name.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlinkat(at.fd, tmp.c_str(), 0);
    return Failed("write", path, err);
  }
  // The rename is durable once the directory is.
  if (::fsync(at.fd) != 0) return Failed("sync the directory of", path, errno);
  return Status::Ok();
}

Result<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) return Failed("read", path, errno);
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Failed("read", path, errno);
    if (n == 0) return out;
    out.append(buf, size_t(n));
    if (out.size() > max_bytes) {
      return InvalidArgument("cannot read " + path + ": larger than " + std::to_string(max_bytes) +
                             " bytes");
    }
  }
}

}  // namespace tollgate::runtime
