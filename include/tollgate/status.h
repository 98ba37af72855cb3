// Status and Result<T>: errors as values.
//
// Every fallible operation in tollgate returns a Status or a Result<T>; both are
// [[nodiscard]]. Exceptions are used only while loading configuration at startup,
// never on the request path.
//
// Thread safety: plain values; safe to copy between threads.
#ifndef TOLLGATE_STATUS_H_
#define TOLLGATE_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tollgate {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad limit, bad key, bad config)
  kTimeout,          // a store call did not finish within its deadline
  kConnection,       // the store could not be reached or the connection broke
  kScript,           // the store's script failed (Lua error, NOSCRIPT after retries)
  kServer,           // the store answered with an error (OOM, READONLY, CLUSTERDOWN...)
  kUnavailable,      // refused without trying (circuit breaker open, shutting down)
  kOverflow,         // a bounded structure is full (local store key cap)
  kInternal,         // a bug: "cannot happen"
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "timeout: redis 127.0.0.1:6379 did not answer within 50ms"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status TimeoutError(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status ConnectionError(std::string m) { return {StatusCode::kConnection, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T> holds either a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result needs an error status or a value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // The error; Status::Ok() when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tollgate

#endif  // TOLLGATE_STATUS_H_
