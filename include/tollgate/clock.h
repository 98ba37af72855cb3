// Clock: the only way tollgate logic learns the time.
//
// Two kinds of time are used and never mixed:
//  - monotonic time (Clock::Now) drives local decisions; it never steps backwards
//    on a real SteadyClock, and every algorithm also tolerates a clock that does;
//  - wall time (Clock::WallNow) is used only for headers that carry dates and
//    for Redis in client-clock mode.
// Both are int64 nanoseconds. Tests inject a ManualClock and move it by hand.
//
// A clock also times waits (abseil's Clock::AwaitWithDeadline, leveldb's
// Env::SleepForMicroseconds): WaitUntil() blocks on a condition variable until
// a predicate holds or the clock reaches a deadline, so deadline logic (a
// store call's guard, a reconnect or probe timer) can take an injected clock
// and a test can expire it with ManualClock::Advance() instead of waiting.
// Libraries keep two injected clocks apart: the decision clock (Options::clock)
// and the I/O clock (Options::io_clock: call deadlines, reconnect, topology
// and probe timers), so that a test can freeze one and let the other run.
//
// Thread safety: every Clock is safe to call from any thread.
#ifndef TOLLGATE_CLOCK_H_
#define TOLLGATE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <functional>
#include <mutex>

namespace tollgate {

using Nanos = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary epoch.
  virtual int64_t Now() const = 0;
  // Nanoseconds since the Unix epoch.
  virtual int64_t WallNow() const = 0;

  // Blocks on `cv` (with `lock` held, as std::condition_variable::wait does)
  // until `done()` is true or Now() >= deadline_ns; returns done(). Whoever
  // makes done() true notifies `cv` under the lock. The default waits real
  // time, which is right for any clock that moves with it (SystemClock,
  // CoarseClock); ManualClock overrides it.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         int64_t deadline_ns, const std::function<bool()>& done) const {
    while (!done()) {
      const int64_t remaining = deadline_ns - Now();
      if (remaining <= 0) return false;
      cv.wait_for(lock, Nanos(remaining));
    }
    return true;
  }
};

// The real clocks: std::chrono::steady_clock and system_clock.
class SystemClock final : public Clock {
 public:
  int64_t Now() const override {
    return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t WallNow() const override {
    return std::chrono::duration_cast<Nanos>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // A process-wide instance; stateless, so sharing it is not a mutable global.
  static SystemClock& Instance() {
    static SystemClock clock;
    return clock;
  }
};

// CLOCK_MONOTONIC_COARSE: ~5 ns to read instead of ~24 ns (measured on the
// project's VMs), at the kernel tick's resolution (Resolution(), typically
// 1-4 ms). Exactness is unaffected, since no algorithm over-grants on any
// monotonic clock; refills are just observed up to one tick late. For hot
// local decisions where a millisecond of refill latency does not matter.
class CoarseClock final : public Clock {
 public:
  int64_t Now() const override {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  int64_t WallNow() const override {
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  static Nanos Resolution() {
    timespec ts;
    clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
    return Nanos(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec);
  }
  static CoarseClock& Instance() {
    static CoarseClock clock;
    return clock;
  }
};

// A clock moved only by the test. Now() and WallNow() move together.
// WaitUntil() returns when done() holds or once Advance()/Set() has reached
// the deadline; real time alone never expires it. A waiter looks at the time
// again every millisecond of real time (Advance() does not know the waiters'
// condition variables), so it wakes at most that long after the clock passed
// its deadline.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 1'000'000'000'000LL,
                       int64_t wall_offset_ns = 1'700'000'000'000'000'000LL)
      : now_(start_ns), wall_offset_(wall_offset_ns) {}

  int64_t Now() const override { return now_.load(std::memory_order_acquire); }
  int64_t WallNow() const override { return Now() + wall_offset_; }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 int64_t deadline_ns, const std::function<bool()>& done) const override {
    while (!done()) {
      if (Now() >= deadline_ns) return false;
      cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    return true;
  }

  void Advance(Nanos d) { now_.fetch_add(d.count(), std::memory_order_acq_rel); }
  // May move backwards: algorithms must survive it.
  void Set(int64_t now_ns) { now_.store(now_ns, std::memory_order_release); }

 private:
  std::atomic<int64_t> now_;
  const int64_t wall_offset_;
};

}  // namespace tollgate

#endif  // TOLLGATE_CLOCK_H_
