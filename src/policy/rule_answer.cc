// How a rule answers (issue 34; docs/configuration.md, "Soft limits" and
// "Per-rule answers"): "soft" and "response", parsed once here and rendered
// by the Enforcer (enforcer.cc: soft rules in FinishAllowed, a rule's own
// refusal in FinishRejected). Kept apart from parse.cc so the rule parser
// only calls ParseAnswerFields.
#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "base/config_errors.h"
#include "base/json_fields.h"
#include "policy/policy_impl.h"
#include "tollgate/http_text.h"

namespace tollgate {

using base::ConfigErrors;
using base::FieldPath;
using base::IndexPath;
using base::JsonFields;
using base::JsonTypeName;
using json = nlohmann::json;

namespace {

constexpr std::array<std::string_view, 3> kPlaceholders = {"{rule}", "{limit}", "{retry_after}"};

// Fields a rule's answer may not set: hop-by-hop and framing fields (the
// front end derives them; a second Content-Length is request smuggling's
// opening), and the fields the answer already carries.
constexpr std::array<std::string_view, 16> kReservedHeaders = {"connection",
                                                               "keep-alive",
                                                               "proxy-connection",
                                                               "transfer-encoding",
                                                               "te",
                                                               "trailer",
                                                               "upgrade",
                                                               "content-length",
                                                               "host",
                                                               "content-type",
                                                               "content-encoding",
                                                               "retry-after",
                                                               "ratelimit",
                                                               "ratelimit-policy",
                                                               "x-ratelimit-decision",
                                                               "x-ratelimit-status"};

// RFC 9110 tchar.
bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

// Why `value` cannot be a field value (RFC 9110 5.5: visible ASCII, SP and
// HTAB inside, no surrounding whitespace), or "". obs-text (bytes >= 0x80) is
// refused: clients disagree on what it means.
std::string FieldValueProblem(std::string_view value) {
  if (value.empty()) return "must not be empty";
  if (value.size() > kMaxResponseHeaderValue) {
    return "must be at most " + std::to_string(kMaxResponseHeaderValue) + " bytes";
  }
  if (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
      value.back() == '\t') {
    return "must not start or end with whitespace";
  }
  for (unsigned char c : value) {
    if (c == '\t' || (c >= 0x20 && c < 0x7f)) continue;
    return "must be visible ASCII, spaces and tabs only (no control bytes, CR, LF or non-ASCII)";
  }
  return "";
}

// Why `text` is no valid template, or "": bounded, no control bytes, and
// every '{' opens one of kPlaceholders (a '}' alone is text).
std::string TemplateProblem(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > kMaxResponseText) {
    return "must be at most " + std::to_string(kMaxResponseText) + " bytes";
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return "must not contain control characters";
    if (c != '{') continue;
    const auto known =
        std::find_if(kPlaceholders.begin(), kPlaceholders.end(),
                     [&](std::string_view p) { return text.substr(i, p.size()) == p; });
    if (known == kPlaceholders.end()) {
      const size_t close = text.find('}', i);
      const std::string_view got = text.substr(
          i, close == std::string_view::npos ? 16 : std::min<size_t>(close - i + 1, 32));
      return "unknown placeholder \"" + std::string(got) +
             "\" (only {rule}, {limit} and {retry_after}; request data is never echoed)";
    }
    i += known->size() - 1;
  }
  return "";
}

void ParseResponseHeaders(const json& h, const std::string& where, RuleResponse* out,
                          ConfigErrors& e) {
  if (!h.is_array() || h.size() > kMaxResponseHeaders) {
    e.Add(where, "must be an array of up to " + std::to_string(kMaxResponseHeaders) +
                     " {\"name\", \"value\"} objects (got " + JsonTypeName(h) + ")");
    return;
  }
  for (size_t i = 0; i < h.size(); ++i) {
    const std::string at = IndexPath(where, i);
    if (!h[i].is_object()) {
      e.Add(at,
            "must be an object {\"name\": ..., \"value\": ...} (got " + JsonTypeName(h[i]) + ")");
      continue;
    }
    JsonFields f(h[i], at, e);
    f.RejectUnknown({"name", "value"});
    std::optional<std::string> name = f.String("name");
    std::optional<std::string> value = f.String("value");
    if (!h[i].contains("name")) f.Error("name", "is required");
    if (!h[i].contains("value")) f.Error("value", "is required");
    if (name) {
      const bool token = !name->empty() && name->size() <= kMaxResponseHeaderName &&
                         std::all_of(name->begin(), name->end(), [](char c) {
                           return IsTokenChar(static_cast<unsigned char>(c));
                         });
      const std::string lower = AsciiLowered(*name);
      if (!token) {
        f.Error("name", "must be 1 to " + std::to_string(kMaxResponseHeaderName) +
                            " token characters (RFC 9110: letters, digits and !#$%&'*+-.^_`|~)");
        name.reset();
      } else if (std::find(kReservedHeaders.begin(), kReservedHeaders.end(), lower) !=
                 kReservedHeaders.end()) {
        f.Error("name", "\"" + *name +
                            "\" is set by tollgate or is a hop-by-hop / framing field; it "
                            "cannot be added");
        name.reset();
      } else {
        for (const HeaderField& seen : out->headers) {
          if (EqualsIgnoreCase(seen.name, *name)) {
            f.Error("name", "\"" + *name + "\" is listed twice");
            name.reset();
            break;
          }
        }
      }
    }
    if (value) {
      if (std::string why = FieldValueProblem(*value); !why.empty()) {
        f.Error("value", why);
        value.reset();
      }
    }
    if (name && value) out->headers.push_back({std::move(*name), std::move(*value)});
  }
}

std::shared_ptr<const RuleResponse> ParseResponse(const json& r, const std::string& where,
                                                  RuleAction action, ConfigErrors& e) {
  if (!r.is_object()) {
    e.Add(where, "must be an object (got " + JsonTypeName(r) + ")");
    return nullptr;
  }
  const size_t before = e.count();
  auto out = std::make_shared<RuleResponse>();
  JsonFields f(r, where, e);
  f.RejectUnknown({"status", "headers", "type", "title", "detail", "ratelimit_headers"});
  if (const json* s = f.Find("status")) {
    if (!s->is_number_integer() || s->get<int64_t>() < 400 || s->get<int64_t>() > 599) {
      f.Error("status", "must be an HTTP error status, an integer from 400 to 599 (got " +
                            (s->is_number() ? s->dump() : JsonTypeName(*s)) + ")");
    } else {
      out->status = s->get<int>();
    }
  }
  if (const json* h = f.Find("headers"))
    ParseResponseHeaders(*h, f.PathOf("headers"), out.get(), e);
  using TextField = std::pair<const char*, std::string*>;
  for (auto [key, field] : {TextField{"type", &out->type}, TextField{"title", &out->title},
                            TextField{"detail", &out->detail}}) {
    if (auto text = f.String(key)) {
      if (std::string why = TemplateProblem(*text); !why.empty()) {
        f.Error(key, why);
      } else {
        *field = std::move(*text);
      }
    }
  }
  if (out->type.find_first_of(" \"<>\\^`|") != std::string::npos) {
    f.Error("type", "must be a URI reference (no spaces, quotes, <, >, \\, ^, `, |)");
  }
  if (auto rl = f.Bool("ratelimit_headers")) out->ratelimit_headers = *rl;
  if (action == RuleAction::kDeny && !out->ratelimit_headers) {
    f.Error("ratelimit_headers", "is not used by a deny rule (it sends no rate-limit headers)");
  }
  if (e.count() != before) return nullptr;
  return out;
}

}  // namespace

void ParseAnswerFields(const json& j, const std::string& path, RuleAction action, bool concurrency,
                       Rule* rule, ConfigErrors& e) {
  if (auto s = j.find("soft"); s != j.end()) {
    const std::string where = FieldPath(path, "soft");
    if (!s->is_boolean()) {
      e.Add(where, "must be true or false (got " + JsonTypeName(*s) + ")");
    } else if (s->get<bool>()) {
      if (action != RuleAction::kLimit) {
        e.Add(where, "is only used by limit rules");
      } else if (concurrency) {
        e.Add(where, "is not used by a concurrency rule (a slot cannot be lent past its limit)");
      } else {
        rule->soft = true;
        // A soft rule never refuses: what only a refusal would use, or what
        // would make it refuse after all, is an error, not ignored.
        for (const char* field :
             {"mode", "enforce_percent", "rollback", "block_for", "count_on", "refund_on"}) {
          if (j.contains(field)) {
            e.Add(FieldPath(path, field), "is not used by a soft rule (it never refuses)");
          }
        }
      }
    }
  }
  auto r = j.find("response");
  if (r == j.end()) return;
  const std::string where = FieldPath(path, "response");
  if (action != RuleAction::kLimit && action != RuleAction::kDeny) {
    e.Add(where, "is only used by limit and deny rules (this rule never refuses)");
    return;
  }
  if (rule->soft) {
    e.Add(where, "is not used by a soft rule (it never refuses)");
    return;
  }
  rule->response = ParseResponse(*r, where, action, e);
}

std::string AnswerDescription(const Rule& rule) {
  std::string out;
  if (rule.soft) out += " soft";
  if (rule.response) {
    out += " response=" + std::to_string(rule.response->status              ? rule.response->status
                                         : rule.action == RuleAction::kDeny ? 403
                                                                            : 429);
    if (!rule.response->headers.empty()) {
      out += " response_headers=" + std::to_string(rule.response->headers.size());
    }
    if (!rule.response->ratelimit_headers) out += " ratelimit_headers=false";
  }
  return out;
}

std::string FillAnswerTemplate(std::string_view text, std::string_view rule, int64_t limit,
                               int64_t retry_after_seconds) {
  std::string out;
  out.reserve(text.size() + 32);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') {
      if (text.substr(i, 6) == "{rule}") {
        out.append(rule);
        i += 5;
        continue;
      }
      if (text.substr(i, 7) == "{limit}") {
        out += std::to_string(limit);
        i += 6;
        continue;
      }
      if (text.substr(i, 13) == "{retry_after}") {
        out += std::to_string(retry_after_seconds);
        i += 12;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

void ApplyRuleResponse(const RuleResponse& response, std::string_view rule,
                       std::string_view default_type, std::string_view default_title,
                       std::string_view default_detail, int64_t limit, CheckOutcome& out) {
  if (response.status != 0) out.http_status = response.status;
  const int64_t retry = out.retry_after_seconds;
  auto fill = [&](const std::string& text, std::string_view fallback) {
    return text.empty() ? std::string(fallback) : FillAnswerTemplate(text, rule, limit, retry);
  };
  // Built with nlohmann (a refusal with its own answer is rare; the default
  // one keeps its hand-written renderer): every text is escaped as JSON.
  json body;
  body["type"] = fill(response.type, default_type);
  body["title"] = fill(response.title, default_title);
  body["status"] = out.http_status;
  if (std::string detail = fill(response.detail, default_detail); !detail.empty()) {
    body["detail"] = std::move(detail);
  }
  body["violated-policies"] = json::array({std::string(rule)});
  if (retry > 0) body["retry-after"] = retry;
  out.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  out.headers.insert(out.headers.end(), response.headers.begin(), response.headers.end());
}

}  // namespace tollgate
