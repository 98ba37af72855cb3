// StateFileLock: who may read and write a local state file (Runtime's
// RuntimeOptions::local_state), and the restart handshake built on it.
//
// The lock is an exclusive flock(2) on "<state file>.lock", taken before the
// state is loaded and held for the Runtime's life, so it is released only
// after the last save (tollgated: on drain) or when the process dies (the
// kernel releases it: a kill -9 never leaves it held). A new process that
// starts while the old one still runs waits for it, for at most `wait`:
// it loads what the old one saved on its way out, and two processes never
// write the same file. The holder's pid is written into the lock file for
// messages only; nothing trusts it.
//
// Errors: Acquire returns kUnavailable when the lock is still held after
// `wait` (naming the file and the pid written in it) and kInternal when the lock file cannot be
// opened (its path and errno text). Thread safety: none needed; one lock per Runtime, taken once.
#ifndef TOLLGATE_SRC_RUNTIME_STATE_LOCK_H_
#define TOLLGATE_SRC_RUNTIME_STATE_LOCK_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tollgate/clock.h"
#include "tollgate/status.h"

namespace tollgate::runtime {

class StateFileLock {
 public:
  // Takes the lock of `state_file`, trying again every 10 ms until `wait` has
  // passed on `clock`. `on_wait` runs once, when the first try finds it held
  // (with the holder's pid as written, or "").
  static Result<std::unique_ptr<StateFileLock>> Acquire(
      const std::string& state_file, std::chrono::milliseconds wait, const Clock& clock,
      const std::function<void(const std::string& holder)>& on_wait);
  ~StateFileLock();
  StateFileLock(const StateFileLock&) = delete;
  StateFileLock& operator=(const StateFileLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  StateFileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace tollgate::runtime

#endif  // TOLLGATE_SRC_RUNTIME_STATE_LOCK_H_
