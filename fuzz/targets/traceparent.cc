// Fuzz target: the W3C traceparent header (src/trace/traceparent.cc), which
// every request to tollgated may carry and which decides the trace a decision
// span joins.
//
// Input: the header value.
// Properties:
//   - a parse either fails or yields non-zero ids and flags 0 or 1;
//   - a success only for 55..kMaxTraceparentBytes bytes; version 00 exactly 55;
//   - the ids are the input's own lowercase hex (formatting gives back the
//     header's first 53 bytes after "00-"), and the formatted header parses
//     back to the same context;
//   - the server's log view (server/log.h) agrees: a trace id exactly when the
//     parser accepts.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "server/log.h"
#include "trace/traceparent.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tollgate::fuzz::Quote;
  namespace trace = tollgate::trace;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = trace::ParseTraceparent(text);
  const auto logged = tollgate::server::ParseTraceparent(text);
  FUZZ_CHECK(parsed.has_value() == !logged.trace_id.empty(),
             "the log's view disagrees on " + Quote(text));
  if (!parsed) return 0;
  FUZZ_CHECK(text.size() >= 55 && text.size() <= trace::kMaxTraceparentBytes,
             "accepted a header of " + std::to_string(text.size()) + " bytes");
  FUZZ_CHECK(!text.starts_with("00") || text.size() == 55, "version 00 with extra bytes");
  FUZZ_CHECK(!trace::IsZero(parsed->trace_id) && !trace::IsZero(parsed->span_id),
             "a zero id from " + Quote(text));
  FUZZ_CHECK(parsed->flags <= 1, "flags beyond the sampled bit");
  const std::string formatted = trace::FormatTraceparent(*parsed);
  FUZZ_CHECK(formatted.substr(3, 49) == text.substr(3, 49),
             "ids not the input's: " + Quote(text) + " -> " + formatted);
  const auto back = trace::ParseTraceparent(formatted);
  FUZZ_CHECK(back && back->trace_id == parsed->trace_id && back->span_id == parsed->span_id &&
                 back->flags == parsed->flags,
             "no round trip: " + formatted);
  return 0;
}
