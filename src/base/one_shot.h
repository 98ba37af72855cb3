// OneShot<T>: hands one value from a callback (on a store's I/O thread) to a
// thread blocked waiting for it: the bridge from an async API
// (Store::AcquireAsync, a decider's callback) to a synchronous one.
//
// Share it through a std::shared_ptr when the waiter may give up (WaitFor):
// the callback then still has a live object to fill after the waiter is gone.
// Without a timeout, a stack object is enough only if the callback is
// guaranteed to run before Wait() returns (it is the one that makes it return).
//
// Thread safety: Set() and Wait()/WaitFor() may be called from different
// threads. Set() is meant to be called once; a second Set() replaces a value
// not yet taken.
#ifndef TOLLGATE_SRC_BASE_ONE_SHOT_H_
#define TOLLGATE_SRC_BASE_ONE_SHOT_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "tollgate/clock.h"

namespace tollgate::base {

template <typename T>
class OneShot {
 public:
  void Set(T v) {
    std::lock_guard<std::mutex> lock(mu_);
    value_.emplace(std::move(v));
    cv_.notify_all();
  }

  // Blocks until Set(), then takes the value.
  T Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return value_.has_value(); });
    return std::move(*value_);
  }

  // Blocks until Set() or until `timeout` has passed (steady clock); nullopt
  // on timeout.
  template <typename Rep, typename Period>
  std::optional<T> WaitFor(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return value_.has_value(); })) return std::nullopt;
    return std::move(*value_);
  }

  // Blocks until Set() or until clock.Now() >= deadline_ns (Clock::WaitUntil,
  // so a ManualClock expires it only when moved); nullopt on timeout.
  std::optional<T> WaitUntil(const Clock& clock, int64_t deadline_ns) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!clock.WaitUntil(lock, cv_, deadline_ns, [&] { return value_.has_value(); })) {
      return std::nullopt;
    }
    return std::move(*value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;  // guarded by mu_
};

// The synchronous form of an async call: calls `start` with a callback taking
// a T, then blocks until that callback has run (on any thread, before or
// after `start` returns) and returns its value. The callback shares the slot,
// so it may outlive this call (a store that keeps a copy of it after calling
// it) without touching freed memory. Never returns before the callback: use
// OneShot::WaitUntil directly for a deadline.
//   return base::CallSync<Result<bool>>([&](auto done) { ReleaseLeaseAsync(key, id, done); });
template <typename T, typename Start>
T CallSync(Start&& start) {
  auto slot = std::make_shared<OneShot<T>>();
  std::forward<Start>(start)([slot](T value) { slot->Set(std::move(value)); });
  return slot->Wait();
}

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_ONE_SHOT_H_
