// Time in tests that must hold on a slow, loaded machine: sanitizers, CPU
// hogs beside the suite, other builds on the same two cores.
//
// Tests synchronise on conditions, never on sleeps. Where a test has to give
// something time, that time is one of two kinds, and both scale:
//  - how long to wait for a condition before giving up (WaitFor's timeout, a
//    call timeout a call is expected to meet, a start-up deadline): wrap it in
//    Scaled(), or use WaitFor(), which scales its timeout;
//  - an allowance in a bound the test checks ("a call takes at most the
//    deadline plus an allowance"): keep the bound's meaning and scale only the
//    allowance, or scale the configured time and the allowance together, so
//    that their ratio, which is what catches the bug, stays the same.
// Nothing asserts on wall-clock speed.
//
// TimeScale() is TOLLGATE_TEST_TIME_SCALE when set (a number in [1, 100]);
// otherwise the build's factor (1; 2 under ASan; 4 under TSan) times the
// machine's load when the test process started (the 1-minute load average per
// CPU, clamped to [1, 4]). Header-only: every test target can include it.
// Thread safety: all functions may be called from any thread.
#ifndef TOLLGATE_TESTS_TESTING_TIMING_H_
#define TOLLGATE_TESTS_TESTING_TIMING_H_

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

namespace tollgate::testing {

#if defined(__SANITIZE_THREAD__)
#define TOLLGATE_TESTING_TSAN 1
#elif defined(__SANITIZE_ADDRESS__)
#define TOLLGATE_TESTING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TOLLGATE_TESTING_TSAN 1
#elif __has_feature(address_sanitizer)
#define TOLLGATE_TESTING_ASAN 1
#endif
#endif

// How much slower than an idle machine with a plain build this run is
// assumed to be (see the file comment). Computed once per process.
inline double TimeScale() {
  static const double scale = [] {
    if (const char* env = std::getenv("TOLLGATE_TEST_TIME_SCALE")) {
      char* end = nullptr;
      const double v = std::strtod(env, &end);
      if (end != env && *end == '\0' && v >= 1 && v <= 100) return v;
      std::fprintf(stderr, "TOLLGATE_TEST_TIME_SCALE=%s ignored (want a number in [1, 100])\n",
                   env);
    }
#if defined(TOLLGATE_TESTING_TSAN)
    double build = 4;
#elif defined(TOLLGATE_TESTING_ASAN)
    double build = 2;
#else
    double build = 1;
#endif
    double load = 1;
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      double avg = 0;
      const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
      if (std::fscanf(f, "%lf", &avg) == 1 && cpus > 0) {
        load = std::clamp(avg / static_cast<double>(cpus), 1.0, 4.0);
      }
      std::fclose(f);
    }
    return build * load;
  }();
  return scale;
}

// `d` * TimeScale(), rounded up to whole milliseconds.
template <typename Rep, typename Period>
std::chrono::milliseconds Scaled(std::chrono::duration<Rep, Period> d) {
  const double ms = std::chrono::duration<double, std::milli>(d).count() * TimeScale();
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(ms)));
}

// Polls pred() every `poll` until it holds or `deadline` (as given, not
// scaled: for callers whose deadline is scaled already or is not a wait for a
// condition) has passed; returns pred(). The poll interval paces the wait:
// the condition is what synchronises. The one polling loop of the tests and
// their fixtures.
template <typename Pred>
bool PollUntil(Pred pred, std::chrono::milliseconds deadline,
               std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

// PollUntil with the timeout Scaled(): waiting for a condition.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(5),
             std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
  return PollUntil(std::move(pred), Scaled(timeout), poll);
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_TIMING_H_
