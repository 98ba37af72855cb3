// Waiter<T>: a one-shot value handed from a callback to a blocked thread.
#ifndef TOLLGATE_SRC_REDIS_WAITER_H_
#define TOLLGATE_SRC_REDIS_WAITER_H_

#include <condition_variable>
#include <mutex>
#include <optional>

namespace tollgate::redis {

template <typename T>
class Waiter {
 public:
  void Set(T v) {
    std::lock_guard<std::mutex> lock(mu_);
    value_.emplace(std::move(v));
    cv_.notify_one();
  }
  // Blocks until Set(); the store guarantees every callback runs (deadlines).
  T Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return value_.has_value(); });
    return std::move(*value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;
};

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_WAITER_H_
