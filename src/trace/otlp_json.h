// Internal: spans as an OTLP/HTTP JSON ExportTraceServiceRequest.
//
// The encoding follows the OTLP specification's JSON mapping of the protobuf
// messages: lowerCamelCase field names, trace and span ids as lowercase hex
// (not base64), 64-bit integers (times, intValue) as decimal strings, enums as
// integers. All spans go under one resource (service.name) and one scope.
#ifndef TOLLGATE_TRACE_OTLP_JSON_H_
#define TOLLGATE_TRACE_OTLP_JSON_H_

#include <span>
#include <string>
#include <string_view>

#include "trace/span.h"

namespace tollgate::trace {

std::string EncodeOtlpJson(std::span<const Span> spans, std::string_view service_name);

}  // namespace tollgate::trace

#endif  // TOLLGATE_TRACE_OTLP_JSON_H_
