#include "runtime/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tollgate::runtime {
namespace {

// The pid the holder wrote, for messages ("" when unreadable).
std::string Holder(int fd) {
  char buf[24] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string out;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) out += buf[i];
  return out;
}

}  // namespace

Result<std::unique_ptr<StateFileLock>> StateFileLock::Acquire(
    const std::string& state_file, std::chrono::milliseconds wait, const Clock& clock,
    const std::function<void(const std::string& holder)>& on_wait) {
  const std::string path = state_file + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return InternalError("store.local_state_file: cannot open the lock file " + path + ": " +
                         std::strerror(errno));
  }
  constexpr auto kRetry = std::chrono::milliseconds(10);
  const int64_t deadline = clock.Now() + std::chrono::nanoseconds(wait).count();
  // Bounded by tries as well as by the clock: a clock that does not move ends it too.
  const int64_t max_tries = wait / kRetry + 1;
  for (int64_t tries = 0;; ++tries) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int err = errno;
      ::close(fd);
      return InternalError("store.local_state_file: cannot lock " + path + ": " +
                           std::strerror(err));
    }
    if (tries == 0 && on_wait) on_wait(Holder(fd));
    if (tries >= max_tries || clock.Now() >= deadline) {
      const std::string holder = Holder(fd);
      ::close(fd);
      return UnavailableError("store.local_state_file: " + path + " is still locked by " +
                              (holder.empty() ? "another process" : "process " + holder) +
                              " after " + std::to_string(wait.count()) +
                              " ms (store.state_lock_wait_ms): another tollgated uses this "
                              "state file and has not exited");
    }
    std::this_thread::sleep_for(kRetry);  // flock has no timed wait; the deadline bounds it
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return std::unique_ptr<StateFileLock>(new StateFileLock(fd, path));
}

StateFileLock::~StateFileLock() { ::close(fd_); }

}  // namespace tollgate::runtime
