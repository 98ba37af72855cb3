#include "trace/otlp_json.h"

#include <nlohmann/json.hpp>

namespace tollgate::trace {
namespace {

using json = nlohmann::json;

json AnyValue(const Attribute& a) {
  if (const auto* s = std::get_if<std::string>(&a.value)) return {{"stringValue", *s}};
  if (const auto* i = std::get_if<int64_t>(&a.value)) {
    return {{"intValue", std::to_string(*i)}};
  }
  return {{"boolValue", std::get<bool>(a.value)}};
}

json Attributes(const std::vector<Attribute>& attributes) {
  json out = json::array();
  for (const Attribute& a : attributes) out.push_back({{"key", a.key}, {"value", AnyValue(a)}});
  return out;
}

json SpanJson(const Span& s) {
  json j = {{"traceId", Hex(s.context.trace_id)},
            {"spanId", Hex(s.context.span_id)},
            {"flags", int(s.context.flags)},
            {"name", s.name},
            {"kind", int(s.kind)},
            {"startTimeUnixNano", std::to_string(s.start_unix_ns)},
            {"endTimeUnixNano", std::to_string(s.end_unix_ns)},
            {"attributes", Attributes(s.attributes)}};
  if (!IsZero(s.parent_span_id)) j["parentSpanId"] = Hex(s.parent_span_id);
  json status = {{"code", int(s.status)}};
  if (s.status == SpanStatus::kError && !s.status_message.empty()) {
    status["message"] = s.status_message;
  }
  j["status"] = std::move(status);
  return j;
}

}  // namespace

std::string EncodeOtlpJson(std::span<const Span> spans, std::string_view service_name) {
  json list = json::array();
  for (const Span& s : spans) list.push_back(SpanJson(s));
  json resource = {{"attributes", json::array({{{"key", "service.name"},
                                                {"value", {{"stringValue", service_name}}}}})}};
  json request = {{"resourceSpans",
                   json::array({{{"resource", std::move(resource)},
                                 {"scopeSpans", json::array({{{"scope", {{"name", "tollgate"}}},
                                                              {"spans", std::move(list)}}})}}})}};
  // Replace invalid UTF-8 (a rule name is ASCII, but never trust it) instead of throwing.
  return request.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tollgate::trace
