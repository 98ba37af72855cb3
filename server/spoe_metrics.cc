#include "server/spoe_metrics.h"

namespace tollgate::server {
namespace {

struct FrameLabels {
  std::string_view direction, type;
};
#define TOLLGATE_SPOE_FRAME_LABELS(e, direction, type) {direction, type},
constexpr FrameLabels kFrameLabels[] = {TOLLGATE_SPOE_FRAMES(TOLLGATE_SPOE_FRAME_LABELS)};
#undef TOLLGATE_SPOE_FRAME_LABELS

#define TOLLGATE_SPOE_LABEL(e, label) label,
constexpr std::string_view kErrorLabels[] = {TOLLGATE_SPOE_ERRORS(TOLLGATE_SPOE_LABEL)};
constexpr std::string_view kResultLabels[] = {TOLLGATE_SPOE_RESULTS(TOLLGATE_SPOE_LABEL)};
#undef TOLLGATE_SPOE_LABEL

static_assert(std::size(kFrameLabels) == size_t(SpoeFrame::kCount));
static_assert(std::size(kErrorLabels) == size_t(SpoeError::kCount));
static_assert(std::size(kResultLabels) == size_t(SpoeResult::kCount));

template <typename Counter>
auto Sum(std::span<const SpoeCounters* const> shards, Counter counter) {
  decltype(counter(*shards[0]).load()) total = 0;
  for (const SpoeCounters* s : shards) total += counter(*s).load(std::memory_order_relaxed);
  return total;
}

}  // namespace

SpoeError SpoeErrorKind(spop::Error e) {
  switch (e) {
    case spop::Error::kTooBig:
      return SpoeError::kTooBig;
    case spop::Error::kInvalid:
      return SpoeError::kInvalid;
    case spop::Error::kNoVersion:
    case spop::Error::kBadVersion:
      return SpoeError::kVersion;
    case spop::Error::kNoFrameSize:
    case spop::Error::kBadFrameSize:
      return SpoeError::kFrameSize;
    case spop::Error::kFragmentation:
    case spop::Error::kInterlaced:
      return SpoeError::kFragmentation;
    default:
      return SpoeError::kOtherProtocol;
  }
}

SpoeFrame SpoeReceivedFrame(spop::FrameType t) {
  switch (t) {
    case spop::FrameType::kHaproxyHello:
      return SpoeFrame::kHaproxyHello;
    case spop::FrameType::kNotify:
      return SpoeFrame::kNotify;
    case spop::FrameType::kHaproxyDisconnect:
      return SpoeFrame::kHaproxyDisconnect;
    default:
      return SpoeFrame::kUnknown;
  }
}

SpoeResult SpoeDecisionResult(bool allowed, int http_status) {
  if (allowed) return SpoeResult::kAllowed;
  switch (http_status) {
    case 429:
      return SpoeResult::kLimited;
    case 503:
      return SpoeResult::kUnavailable;
    default:
      return SpoeResult::kDenied;
  }
}

void RenderSpoeMetrics(PrometheusWriter& w, std::span<const SpoeCounters* const> shards) {
  if (shards.empty()) return;
  w.Family("tollgate_spoe_frames_total", "counter",
           "SPOP frames read from HAProxy (in) and written to it (out), by type.");
  for (size_t i = 0; i < size_t(SpoeFrame::kCount); ++i) {
    w.Sample("tollgate_spoe_frames_total",
             {"direction", kFrameLabels[i].direction, "type", kFrameLabels[i].type},
             Sum(
                 shards, [i](const SpoeCounters& s) -> const auto& { return s.frames[i]; }));
  }
  w.Family("tollgate_spoe_errors_total", "counter",
           "SPOP connections ended by an error (the SPOP status sent, a failed write) or "
           "refused at accept, by kind.");
  for (size_t i = 0; i < size_t(SpoeError::kCount); ++i) {
    w.Sample("tollgate_spoe_errors_total", {"kind", kErrorLabels[i]},
             Sum(
                 shards, [i](const SpoeCounters& s) -> const auto& { return s.errors[i]; }));
  }
  w.Family("tollgate_spoe_decisions_total", "counter", "NOTIFY messages answered, by result.");
  for (size_t i = 0; i < size_t(SpoeResult::kCount); ++i) {
    w.Sample("tollgate_spoe_decisions_total", {"result", kResultLabels[i]},
             Sum(
                 shards, [i](const SpoeCounters& s) -> const auto& { return s.results[i]; }));
  }
  w.Family("tollgate_spoe_in_flight", "gauge", "NOTIFY messages being decided now.");
  w.Sample("tollgate_spoe_in_flight", {},
           double(Sum(
               shards, [](const SpoeCounters& s) -> const auto& { return s.in_flight; })));
  w.Family("tollgate_spoe_connections", "gauge", "Open SPOP connections.");
  w.Sample("tollgate_spoe_connections", {},
           double(Sum(
               shards, [](const SpoeCounters& s) -> const auto& { return s.connections; })));
  w.Family("tollgate_spoe_connections_total", "counter", "SPOP connections accepted.");
  w.Sample("tollgate_spoe_connections_total", {},
           Sum(
               shards, [](const SpoeCounters& s) -> const auto& { return s.connections_total; }));
}

}  // namespace tollgate::server
