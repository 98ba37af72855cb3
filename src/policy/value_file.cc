#include "policy/value_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "policy/policy_impl.h"

namespace tollgate {
namespace {

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool Under(std::string_view path, std::string_view top) {
  return path == top ||
         (path.size() > top.size() && path.substr(0, top.size()) == top && path[top.size()] == '/');
}

// procfs and sysfs hold a process's secrets and the kernel's knobs, never a
// policy's values, wherever they are mounted.
bool KernelFilesystem(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return true;  // cannot tell: refuse
  return fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC;
}

// The components of `name` below `dir` (resolved `root`), or why not.
bool Components(const std::string& dir, const std::string& root, std::string_view name,
                std::vector<std::string>* parts, std::string* why) {
  if (name.front() == '/') {
    std::string_view given(dir);
    while (given.size() > 1 && given.back() == '/') given.remove_suffix(1);
    if (!given.empty() && given.front() == '/' && Under(name, given) && name != given) {
      name.remove_prefix(given.size() + 1);
    } else if (Under(name, root) && name != root) {
      name.remove_prefix(root == "/" ? 1 : root.size() + 1);
    } else {
      *why = "is outside the policy's directory (" + root + "); name a file in it";
      return false;
    }
  }
  while (true) {
    const size_t slash = name.find('/');
    const std::string_view part = name.substr(0, slash);
    if (part.empty() || part == "." || part == "..") {
      *why =
          "must be a relative path below the policy's directory, without \"..\", \".\" or "
          "empty parts";
      return false;
    }
    parts->emplace_back(part);
    if (slash == std::string_view::npos) return true;
    name.remove_prefix(slash + 1);
  }
}

std::string OpenError(int err, bool last) {
  if (err == ELOOP || (!last && err == ENOTDIR)) {
    return last ? "is a symbolic link (not followed)"
                : "a directory on its path is a symbolic link or not a directory (not followed)";
  }
  return std::strerror(err);
}

bool Confined(const std::string& dir, const std::string& name, std::string* out, std::string* why) {
  if (name.empty() || name.find('\0') != std::string::npos) {
    *why = "is not a file name";
    return false;
  }
  const std::string base = dir.empty() ? "." : dir;
  char resolved[PATH_MAX];
  if (::realpath(base.c_str(), resolved) == nullptr) {
    *why = "the policy's directory " + base + " cannot be opened: " + std::strerror(errno);
    return false;
  }
  const std::string root(resolved);
  if (Under(root, "/proc") || Under(root, "/sys")) {
    *why = "the policy's directory " + root + " is under /proc or /sys";
    return false;
  }
  std::vector<std::string> parts;
  if (!Components(base, root, name, &parts, why)) return false;
  Fd at(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (at.get() < 0) {
    *why = "the policy's directory " + root + " cannot be opened: " + std::strerror(errno);
    return false;
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const int next =
        ::openat(at.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      *why = OpenError(errno, false);
      return false;
    }
    at.Reset(next);
  }
  // Non-blocking: opening a FIFO must not wait for a writer.
  Fd file(::openat(at.get(), parts.back().c_str(),
                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (file.get() < 0) {
    *why = OpenError(errno, true);
    return false;
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "is not a regular file";
    return false;
  }
  if (KernelFilesystem(file.get())) {
    *why = "is on procfs or sysfs";
    return false;
  }
  const std::string too_large =
      "is larger than " + std::to_string(kMaxValueFileBytes >> 20) + " MiB";
  if (static_cast<uint64_t>(st.st_size) > kMaxValueFileBytes) {
    *why = too_large;
    return false;
  }
  out->clear();
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(file.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::strerror(errno);
      return false;
    }
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > kMaxValueFileBytes) {  // grew while we read it
      *why = too_large;
      return false;
    }
  }
}

}  // namespace

bool ReadConfinedFile(const std::string& dir, const std::string& name, std::string* out,
                      std::string* why) {
  std::string reason;
  if (Confined(dir, name, out, &reason)) return true;
  out->clear();
  *why = "cannot read " + name.substr(0, 256) + ": " + reason;
  return false;
}

}  // namespace tollgate
