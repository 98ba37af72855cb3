// Test fixture: a tiny OTLP/HTTP collector on a free loopback port.
//
// It accepts POST /v1/traces with Content-Type application/json and decodes
// each ExportTraceServiceRequest strictly (every field the OTLP JSON mapping
// requires, ids as lowercase hex of the right length, times and intValue as
// decimal strings, kind and status code in range); a request that fails is
// answered 400 and recorded in errors(). Modes: kAnswer (200 "{}") and kHang
// (reads the request, never answers, keeps the connection open), and three
// hostile collectors that, after reading a request, send a reply that never
// ends until the client closes: kEndlessChunkExtension (a chunked 200 whose
// first chunk-size line's extension goes on and on), kEndlessHeader (a header
// value that never ends) and kHugeBody (a 200 announcing a 1 GiB body and
// sending it).
//
// Thread safety: spans(), errors() and requests() may be called from any
// thread while the collector runs on its own.
#ifndef TOLLGATE_TESTS_TESTING_OTLP_COLLECTOR_H_
#define TOLLGATE_TESTS_TESTING_OTLP_COLLECTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::testing {

struct ReceivedSpan {
  std::string trace_id, span_id, parent_span_id;  // hex; parent "" for a root
  std::string name, service_name;
  int kind = 0;
  int status_code = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::map<std::string, std::string> attributes;  // stringValue / intValue / "true"/"false"
};

// Decodes one OTLP JSON export request strictly; "" and the spans appended on
// success, else why the body is not a valid request (with the field's path).
std::string DecodeOtlpJson(std::string_view body, std::vector<ReceivedSpan>* out);

class OtlpCollector {
 public:
  enum class Mode { kAnswer, kHang, kEndlessChunkExtension, kEndlessHeader, kHugeBody };
  explicit OtlpCollector(Mode mode = Mode::kAnswer);
  ~OtlpCollector();

  int port() const;
  std::string endpoint() const;  // http://127.0.0.1:<port>/v1/traces
  std::vector<ReceivedSpan> spans() const;
  std::vector<std::string> errors() const;
  uint64_t requests() const;  // requests read (valid or not)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A loopback port nothing listens on (bound, then closed): connections are refused.
int ClosedLoopbackPort();

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_OTLP_COLLECTOR_H_
