#include "server/http_util.h"

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

namespace tollgate::server {

std::string_view StatusPhrase(int status) {
  // RFC 9110 renamed two phrases Beast 1.74 still has from RFC 7231.
  if (status == 413) return "Content Too Large";
  if (status == 422) return "Unprocessable Content";
  auto reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  return {reason.data(), reason.size()};
}

void SerializeResponse(const Response& r, bool keep_alive, const char* date, bool head_only,
                       std::string* out) {
  std::string_view reason = StatusPhrase(r.status);
  out->append("HTTP/1.1 ");
  out->append(std::to_string(r.status));
  out->push_back(' ');
  out->append(reason.data(), reason.size());
  out->append("\r\nDate: ");
  out->append(date);
  out->append("\r\n");
  for (const HeaderField& h : r.headers) {
    out->append(h.name);
    out->append(": ");
    out->append(h.value);
    out->append("\r\n");
  }
  if (!r.content_type.empty()) {
    out->append("Content-Type: ");
    out->append(r.content_type);
    out->append("\r\n");
  }
  if (r.status != 204 && r.status != 304 && r.status >= 200) {
    out->append("Content-Length: ");
    out->append(std::to_string(r.body.size()));
    out->append("\r\n");
  }
  if (!keep_alive || r.close) out->append("Connection: close\r\n");
  out->append("\r\n");
  if (!head_only && r.status != 204 && r.status != 304) out->append(r.body);
}

Response Problem(int status, std::string_view summary, std::string_view detail,
                 const std::vector<ConfigError>& errors) {
  // RFC 9457 4.2.1: with type about:blank the title is the status phrase.
  nlohmann::json j = {{"type", "about:blank"}, {"title", StatusPhrase(status)}, {"status", status}};
  std::string text(summary);
  if (!text.empty() && !detail.empty()) text += ": ";
  text += detail;
  if (!text.empty()) j["detail"] = std::move(text);
  if (!errors.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : errors) list.push_back({{"path", e.path}, {"message", e.message}});
    j["errors"] = std::move(list);
  }
  Response r;
  r.status = status;
  r.content_type = kProblemJson;
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  r.body.push_back('\n');
  return r;
}

}  // namespace tollgate::server
