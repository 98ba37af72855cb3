// Internal: the OTLP/HTTP span exporter (JSON encoding) with batching and a
// bounded queue.
//
// Enqueue() is what a decision calls: it takes a mutex for one push and never
// waits on the network. When the queue holds `max_queue` spans the span is
// dropped and counted (Stats::dropped); the queue never grows past that.
// One exporter thread sends a batch (at most `max_batch` spans) when that many
// are queued or `flush_interval` passed since the last send, as one POST of
// application/json to the collector, with `timeout` for connect, write and the
// response together: one deadline per export. The reply is read in bounded
// bytes (`reply_limits`: head, chunk-size line with its extensions, body;
// trace/otlp_reply.h): a reply past a bound is dropped there, its batch
// failed and counted (Stats::oversized_replies), so a hostile collector costs
// at most those bytes and the timeout. A failed or timed-out batch is counted
// (Stats::failed) and not retried: tracing must never build a backlog behind a
// dead collector.
//
// Lifetime: the destructor abandons an export in flight (counted as failed),
// sends one last batch of what is queued within `shutdown_timeout`, and joins
// the thread; spans beyond that batch are discarded.
// Thread safety: Enqueue, stats and Flush may be called from any thread.
#ifndef TOLLGATE_TRACE_EXPORTER_H_
#define TOLLGATE_TRACE_EXPORTER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tollgate/status.h"
#include "trace/otlp_reply.h"
#include "trace/span.h"

namespace tollgate::trace {

using Millis = std::chrono::milliseconds;

struct ExporterOptions {
  std::string endpoint;  // http://host[:port][/path]; port 4318 and /v1/traces by default
  std::string service_name = "tollgated";
  size_t max_queue = 2048;  // spans waiting; more are dropped
  size_t max_batch = 512;   // spans per request
  Millis flush_interval{1000};
  Millis timeout{2000};           // one request: connect + send + response
  Millis shutdown_timeout{1000};  // the destructor's last send
  ReplyLimits reply_limits;       // bytes of a collector's reply (trace/otlp_reply.h)
};

// Bytes one socket read takes; a reply is read at most this far past a bound.
inline constexpr size_t kReplyReadBytes = 4096;

// The parts of an OTLP/HTTP endpoint URL. Only plain http:// (a collector on
// the host or the pod); errors say which part is wrong.
struct CollectorUrl {
  std::string host;  // name or address, without brackets
  uint16_t port = 4318;
  std::string path = "/v1/traces";
  std::string host_header;  // host[:port] as sent in Host
};
Result<CollectorUrl> ParseCollectorUrl(std::string_view url);

class OtlpHttpExporter {
 public:
  struct Stats {
    uint64_t exported = 0;           // spans the collector accepted (2xx)
    uint64_t dropped = 0;            // spans refused because the queue was full
    uint64_t failed = 0;             // spans in batches that failed (connect, timeout, non-2xx)
    uint64_t queued = 0;             // spans waiting now
    uint64_t reply_bytes = 0;        // bytes read from collectors' replies, in all
    uint64_t oversized_replies = 0;  // replies dropped past a bound (their batches failed)
  };

  // Validates the options, resolves the collector's host once and starts the thread.
  static Result<std::unique_ptr<OtlpHttpExporter>> Create(ExporterOptions options);
  ~OtlpHttpExporter();
  OtlpHttpExporter(const OtlpHttpExporter&) = delete;
  OtlpHttpExporter& operator=(const OtlpHttpExporter&) = delete;

  // Queues `span` for export; false (and counted) when the queue is full.
  bool Enqueue(Span span);
  Stats stats() const;
  // Asks the thread to send what is queued now, without waiting for it.
  void Flush();
  const ExporterOptions& options() const { return options_; }

 private:
  struct Endpoint;
  OtlpHttpExporter(ExporterOptions options, std::unique_ptr<Endpoint> endpoint);
  void Run();
  // One export; `last`: the destructor's, within shutdown_timeout.
  bool Send(const std::string& body, bool last);

  const ExporterOptions options_;
  const std::unique_ptr<Endpoint> endpoint_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Span> queue_;  // guarded by mu_; size() <= max_queue
  bool stopping_ = false;    // guarded by mu_
  bool flush_ = false;       // guarded by mu_
  void* active_ = nullptr;   // guarded by mu_: the io_context of the send in flight
  std::atomic<uint64_t> exported_{0}, dropped_{0}, failed_{0}, reply_bytes_{0},
      oversized_replies_{0};
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace tollgate::trace

#endif  // TOLLGATE_TRACE_EXPORTER_H_
