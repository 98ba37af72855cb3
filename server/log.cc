#include "server/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>

#include "tollgate/trace.h"

namespace tollgate::server {
namespace {

std::string NowIso8601() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm;
  gmtime_r(&secs, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06ldZ", static_cast<long>(micros));
  return buf;
}

}  // namespace

std::string Logger::Client(std::string_view s) { return ClientLogText(s); }

Logger::Logger(LogLevel level, std::shared_ptr<spdlog::logger> sink)
    : level_(level), sink_(std::move(sink)) {}
Logger::~Logger() { Flush(); }

Result<std::unique_ptr<Logger>> Logger::Create(LogLevel level, const std::string& file) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  try {
    if (file.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("cannot open log file: ") + e.what());
  }
  auto logger = std::make_shared<spdlog::logger>("tollgated", sink);
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::trace);
  logger->flush_on(spdlog::level::warn);
  return std::unique_ptr<Logger>(new Logger(level, std::move(logger)));
}

std::unique_ptr<Logger> Logger::Null() {
  return std::unique_ptr<Logger>(new Logger(LogLevel::kOff, nullptr));
}

void Logger::Log(LogLevel level, std::string_view event, nlohmann::json fields) {
  if (!Enabled(level) || level == LogLevel::kOff || !sink_) return;
  nlohmann::ordered_json line = nlohmann::ordered_json::object();
  line["ts"] = NowIso8601();
  line["level"] = LogLevelName(level);
  line["msg"] = std::string(event);
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  // replace: invalid UTF-8 from clients becomes U+FFFD instead of throwing.
  std::string text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  sink_->log(level >= LogLevel::kWarn ? spdlog::level::warn : spdlog::level::info, text);
}

void Logger::Flush() {
  if (sink_) sink_->flush();
}

bool RejectionGate::Admit(int64_t now_s) {
  if (sample_every_ == 0 || per_second_ == 0) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  uint64_t n = seen_.fetch_add(1, std::memory_order_relaxed);
  if (n % sample_every_ != 0) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  int64_t second = second_.load(std::memory_order_relaxed);
  if (second != now_s && second_.compare_exchange_strong(second, now_s)) {
    in_second_.store(0, std::memory_order_relaxed);
  }
  if (in_second_.fetch_add(1, std::memory_order_relaxed) >= per_second_) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

TraceContext ParseTraceparent(std::string_view h) {
  TraceContext t;
  if (!trace::ParseTraceparent(h)) return t;  // the one strict parser (src/trace)
  t.traceparent = h;
  t.trace_id = h.substr(3, 32);
  t.parent_id = h.substr(36, 16);
  return t;
}

}  // namespace tollgate::server
