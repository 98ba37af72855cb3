// Structured logs: one JSON object a line, through spdlog.
//
// Every line is {"ts":"...","level":"info","msg":"<event>", ...fields}. Field
// values are serialised by nlohmann::json, so quotes and backslashes can never
// break a line or forge a field. Client-controlled strings (paths, keys, header
// values) go through Logger::Client first (tollgate/log_text.h: cut, then
// EscapeLogText), so no control character, C1 control or bidi override from a
// request reaches a terminal or a log viewer, and nothing is lost (the escape
// is reversible, UnescapeLogText).
//
// RejectionGate decides which rejections get a line: 1 in `sample_every`,
// and never more than `per_second` lines in any one second, so a flood of 429s
// cannot flood the log.
//
// Thread safety: Logger and RejectionGate are safe to share between threads.
#ifndef TOLLGATE_SERVER_LOG_H_
#define TOLLGATE_SERVER_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/log_level.h"
#include "tollgate/log_text.h"
#include "tollgate/status.h"

namespace spdlog {
class logger;
}

namespace tollgate::server {

class Logger {
 public:
  static constexpr size_t kMaxClientString = kMaxClientLogText;

  // `file` empty: stderr. Fails if the file cannot be opened.
  static Result<std::unique_ptr<Logger>> Create(LogLevel level, const std::string& file);
  // A logger that keeps lines in memory (tests) when `capture` is true, or drops them.
  static std::unique_ptr<Logger> Null();
  ~Logger();

  bool Enabled(LogLevel level) const { return level >= level_; }
  void Log(LogLevel level, std::string_view event,
           nlohmann::json fields = nlohmann::json::object());
  void Info(std::string_view event, nlohmann::json fields = nlohmann::json::object()) {
    Log(LogLevel::kInfo, event, std::move(fields));
  }
  void Warn(std::string_view event, nlohmann::json fields = nlohmann::json::object()) {
    Log(LogLevel::kWarn, event, std::move(fields));
  }
  void Error(std::string_view event, nlohmann::json fields = nlohmann::json::object()) {
    Log(LogLevel::kError, event, std::move(fields));
  }
  void Flush();

  // A client-controlled string, bounded and escaped (ClientLogText).
  static std::string Client(std::string_view s);

 private:
  Logger(LogLevel level, std::shared_ptr<spdlog::logger> sink);
  LogLevel level_;
  std::shared_ptr<spdlog::logger> sink_;
};

class RejectionGate {
 public:
  RejectionGate(uint32_t sample_every, uint32_t per_second)
      : sample_every_(sample_every), per_second_(per_second) {}
  // `now_s`: monotonic seconds. True when this rejection should be logged.
  bool Admit(int64_t now_s);
  uint64_t suppressed() const { return suppressed_.load(std::memory_order_relaxed); }
  // Suppressed since the previous call (for the line an Admit let through).
  uint64_t TakeSuppressed() {
    const uint64_t total = suppressed_.load(std::memory_order_relaxed);
    return total - reported_.exchange(total, std::memory_order_relaxed);
  }

 private:
  const uint32_t sample_every_;
  const uint32_t per_second_;
  std::atomic<uint64_t> seen_{0};
  std::atomic<int64_t> second_{0};
  std::atomic<uint32_t> in_second_{0};
  std::atomic<uint64_t> suppressed_{0};
  std::atomic<uint64_t> reported_{0};
};

// A W3C trace context (traceparent), validated. https://www.w3.org/TR/trace-context/
struct TraceContext {
  std::string_view traceparent;  // the whole valid header, "" when absent or invalid
  std::string_view trace_id;     // 32 hex
  std::string_view parent_id;    // 16 hex
};
// Parses version 00 (and future versions by their 00 prefix); invalid -> empty.
TraceContext ParseTraceparent(std::string_view header);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_LOG_H_
