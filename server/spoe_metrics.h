// Internal: the SPOE agent's counters (docs/haproxy.md, "Metrics"), one
// SpoeCounters in each ServerMetrics shard, summed into /metrics:
//
//   tollgate_spoe_frames_total{direction,type}  SPOP frames read and written
//   tollgate_spoe_errors_total{kind}            connections ended by an error
//                                               (the SPOP status sent, a failed
//                                               write) or refused at accept
//   tollgate_spoe_decisions_total{result}       NOTIFYs answered, by verdict
//   tollgate_spoe_in_flight                     NOTIFYs being decided now
//   tollgate_spoe_connections                   open SPOP connections
//   tollgate_spoe_connections_total             SPOP connections accepted
//
// Each family's label values are declared once in a list below: a new one is
// one line there (the atomics, the index enum and the samples follow).
//
// Thread safety: the counters are relaxed atomics, added to by the shard's
// worker and read by Render from any thread. The gauges' shards go up and
// down on the same worker; their sum is the gauge.
#ifndef TOLLGATE_SERVER_SPOE_METRICS_H_
#define TOLLGATE_SERVER_SPOE_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <span>

#include "server/spoe/spop.h"
#include "tollgate/metrics.h"

namespace tollgate::server {

// (enumerator, direction, type)
#define TOLLGATE_SPOE_FRAMES(X)                     \
  X(kHaproxyHello, "in", "haproxy_hello")           \
  X(kNotify, "in", "notify")                        \
  X(kHaproxyDisconnect, "in", "haproxy_disconnect") \
  X(kUnknown, "in", "unknown")                      \
  X(kAgentHello, "out", "agent_hello")              \
  X(kAck, "out", "ack")                             \
  X(kAgentDisconnect, "out", "agent_disconnect")

// (enumerator, kind)
#define TOLLGATE_SPOE_ERRORS(X)       \
  X(kTooBig, "too_big")               \
  X(kInvalid, "invalid")              \
  X(kVersion, "version")              \
  X(kFrameSize, "frame_size")         \
  X(kFragmentation, "fragmentation")  \
  X(kOtherProtocol, "other_protocol") \
  X(kWriteFailed, "write_failed")     \
  X(kPeerRefused, "peer_refused")     \
  X(kOverCapacity, "max_connections")

// (enumerator, result)
#define TOLLGATE_SPOE_RESULTS(X)    \
  X(kAllowed, "allowed")            \
  X(kLimited, "limited")            \
  X(kDenied, "denied")              \
  X(kUnavailable, "unavailable")    \
  X(kMessageError, "message_error") \
  X(kNoMessage, "no_message")

#define TOLLGATE_SPOE_ENUMERATOR(e, ...) e,
enum class SpoeFrame : uint8_t { TOLLGATE_SPOE_FRAMES(TOLLGATE_SPOE_ENUMERATOR) kCount };
enum class SpoeError : uint8_t { TOLLGATE_SPOE_ERRORS(TOLLGATE_SPOE_ENUMERATOR) kCount };
enum class SpoeResult : uint8_t { TOLLGATE_SPOE_RESULTS(TOLLGATE_SPOE_ENUMERATOR) kCount };
#undef TOLLGATE_SPOE_ENUMERATOR

struct SpoeCounters {
  std::array<std::atomic<uint64_t>, size_t(SpoeFrame::kCount)> frames{};
  std::array<std::atomic<uint64_t>, size_t(SpoeError::kCount)> errors{};
  std::array<std::atomic<uint64_t>, size_t(SpoeResult::kCount)> results{};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> connections{0};
  std::atomic<uint64_t> connections_total{0};

  void Count(SpoeFrame f) { frames[size_t(f)].fetch_add(1, std::memory_order_relaxed); }
  void Count(SpoeError e) { errors[size_t(e)].fetch_add(1, std::memory_order_relaxed); }
  void Count(SpoeResult r) { results[size_t(r)].fetch_add(1, std::memory_order_relaxed); }
};

// The kind a protocol error is counted as (the SPOP status sent with it).
SpoeError SpoeErrorKind(spop::Error e);
// The frame a received type is counted as.
SpoeFrame SpoeReceivedFrame(spop::FrameType t);
// A decided NOTIFY's result, from the answer's status (200, 429, 403, 503).
SpoeResult SpoeDecisionResult(bool allowed, int http_status);

// Appends the families above, summed over `shards` (each a SpoeCounters).
void RenderSpoeMetrics(PrometheusWriter& w, std::span<const SpoeCounters* const> shards);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SPOE_METRICS_H_
