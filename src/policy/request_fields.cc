#include "policy/request_fields.h"

#include <charconv>

#include "base/json_depth.h"
#include "tollgate/http_text.h"
#include "tollgate/ip_address.h"
#include "tollgate/request_body.h"

namespace tollgate {
namespace {

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && IsSpaceOrTab(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpaceOrTab(s.back())) s.remove_suffix(1);
  return s;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// ":digits" at most 65535, or ":" alone (RFC 3986 allows an empty port).
bool ValidPort(std::string_view port) {
  if (port.size() > 5) return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value <= 65535;
}

}  // namespace

bool ValidCookieName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

std::optional<std::string_view> CookieValue(std::span<const std::string_view> fields,
                                            std::string_view name) {
  size_t budget = kMaxCookieBytes;
  size_t pairs = 0;
  for (std::string_view field : fields) {
    if (field.size() > budget) field = field.substr(0, budget);  // the scan's bound
    budget -= field.size();
    while (!field.empty()) {
      if (++pairs > kMaxCookiePairs) return std::nullopt;
      const size_t semi = field.find(';');
      std::string_view pair = field.substr(0, semi);
      field = semi == std::string_view::npos ? std::string_view() : field.substr(semi + 1);
      const size_t eq = pair.find('=');
      if (eq == std::string_view::npos) continue;  // no name=value: skipped
      if (TrimSpaces(pair.substr(0, eq)) != name) continue;
      std::string_view value = TrimSpaces(pair.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      // The first occurrence decides, even when it is unusable: a later copy
      // of the name never stands in for it.
      if (value.empty() || value.size() > kMaxCookieValueBytes) return std::nullopt;
      return value;
    }
    if (budget == 0) break;
  }
  return std::nullopt;
}

std::optional<std::string> NormalizeHost(std::string_view authority) {
  if (authority.empty() || authority.size() > kMaxHostBytes) return std::nullopt;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !ValidPort(rest.substr(1)))) return std::nullopt;
    const std::string_view literal = authority.substr(1, close - 1);
    // IpAddress::Parse also takes IPv4 and brackets; a literal must be IPv6 text.
    if (literal.empty() || literal.find(':') == std::string_view::npos ||
        literal.find_first_of("[]%") != std::string_view::npos) {
      return std::nullopt;
    }
    auto ip = IpAddress::Parse(literal);
    if (!ip) return std::nullopt;
    // An IPv4-mapped literal comes back as IPv4: written as the address it is.
    return ip->v6 ? "[" + ip->ToString() + "]" : ip->ToString();
  }
  std::string_view host = authority;
  if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    if (!ValidPort(host.substr(colon + 1))) return std::nullopt;
    host = host.substr(0, colon);
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.empty() || host.size() > 253) return std::nullopt;
  std::string out;
  out.reserve(host.size());
  size_t label = 0;
  for (char c : host) {
    if (c == '.') {
      if (label == 0) return std::nullopt;
      label = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
      ++label;
    } else if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
      ++label;
    } else {
      return std::nullopt;
    }
    if (label > 63) return std::nullopt;
    out.push_back(c);
  }
  if (label == 0) return std::nullopt;  // "a.." : an empty last label (fuzz_host)
  return out;
}

bool ParseJsonPointer(std::string_view text, JsonPointer* out, std::string* error) {
  out->tokens.clear();
  if (text.size() > kMaxPointerBytes) {
    *error = "a JSON pointer of at most " + std::to_string(kMaxPointerBytes) + " bytes";
    return false;
  }
  if (text.empty()) return true;
  if (text.front() != '/') {
    *error = "a JSON pointer starts with '/' (RFC 6901), e.g. body:/username";
    return false;
  }
  text.remove_prefix(1);
  for (;;) {
    const size_t slash = text.find('/');
    const std::string_view raw = text.substr(0, slash);
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '~') {
        token.push_back(raw[i]);
        continue;
      }
      if (i + 1 >= raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1')) {
        *error = "in a JSON pointer '~' is written ~0 and '/' ~1 (RFC 6901)";
        return false;
      }
      token.push_back(raw[++i] == '0' ? '~' : '/');
    }
    if (out->tokens.size() == kMaxPointerTokens) {
      *error = "a JSON pointer of at most " + std::to_string(kMaxPointerTokens) + " tokens";
      return false;
    }
    out->tokens.push_back(std::move(token));
    if (slash == std::string_view::npos) return true;
    text.remove_prefix(slash + 1);
  }
}

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media = TrimOws(content_type.substr(0, content_type.find(';')));
  if (EqualsIgnoreCase(media, "application/json")) return true;
  const size_t slash = media.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  constexpr std::string_view kSuffix = "+json";
  return media.size() > slash + 1 + kSuffix.size() &&
         EqualsIgnoreCase(media.substr(media.size() - kSuffix.size()), kSuffix);
}

namespace {
// RequestBodyField's name: the pair is recognised by this address.
constexpr std::string_view kRequestBodyName = ":tollgate-body";
}  // namespace

HeaderPair RequestBodyField(std::string_view body) { return {kRequestBodyName, body}; }

std::optional<std::string_view> RequestBodyOf(const RequestView& request) {
  // Front ends append it last: look from the end.
  for (auto it = request.headers.rbegin(); it != request.headers.rend(); ++it) {
    if (it->first.data() == kRequestBodyName.data() &&
        it->first.size() == kRequestBodyName.size()) {
      return it->second;
    }
  }
  return std::nullopt;
}

std::optional<nlohmann::json> ParseJsonBody(std::string_view body) {
  if (body.empty() || body.size() > kMaxBodyKeyBytes) return std::nullopt;
  if (base::JsonNestingDepth(body) > kMaxBodyDepth) return std::nullopt;
  // No exceptions (allow_exceptions=false): invalid JSON or UTF-8 is discarded.
  nlohmann::json doc = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (doc.is_discarded()) return std::nullopt;
  return doc;
}

std::optional<std::string> JsonPointerValue(const nlohmann::json& doc, const JsonPointer& pointer) {
  const nlohmann::json* at = &doc;
  for (const std::string& token : pointer.tokens) {
    if (at->is_object()) {
      auto it = at->find(token);
      if (it == at->end()) return std::nullopt;
      at = &*it;
    } else if (at->is_array()) {
      if (token.empty() || token.size() > 9 || (token.size() > 1 && token.front() == '0')) {
        return std::nullopt;
      }
      size_t index = 0;
      auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
      if (ec != std::errc() || end != token.data() + token.size() || index >= at->size()) {
        return std::nullopt;
      }
      at = &(*at)[index];
    } else {
      return std::nullopt;
    }
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_number() || at->is_boolean()) return at->dump();
  return std::nullopt;
}

int PathTemplate::Find(std::string_view name) const {
  for (size_t i = 0; i < segments.size(); ++i) {
    if (is_param[i] && segments[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool ParsePathTemplate(std::string_view text, PathTemplate* out, std::string* error) {
  out->text = std::string(text);
  out->segments.clear();
  out->is_param.clear();
  if (text.empty() || text.front() != '/' || text.size() > 1024) {
    *error = "a path template starts with '/' and has at most 1024 characters";
    return false;
  }
  std::string_view rest = text.substr(1);
  for (;;) {
    const size_t slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    if (out->segments.size() == kMaxTemplateSegments) {
      *error = "a path template of at most " + std::to_string(kMaxTemplateSegments) + " segments";
      return false;
    }
    const bool param = seg.size() >= 2 && seg.front() == '{' && seg.back() == '}';
    if (param) {
      const std::string_view name = seg.substr(1, seg.size() - 2);
      bool ok = !name.empty() && name.size() <= 64;
      for (char c : name) ok = ok && IsNameChar(c);
      if (!ok) {
        *error =
            "parameter '" + std::string(seg) + "' must be {name} of 1 to 64 letters, digits or '_'";
        return false;
      }
      if (out->Find(name) >= 0) {
        *error = "parameter {" + std::string(name) + "} appears twice";
        return false;
      }
      out->segments.emplace_back(name);
    } else {
      if (seg.find_first_of("{}") != std::string_view::npos) {
        *error = "segment '" + std::string(seg) +
                 "': a parameter is a whole segment {name}; '{' and '}' appear nowhere else";
        return false;
      }
      if (seg == "." || seg == ".." || seg.find('?') != std::string_view::npos) {
        *error = "segment '" + std::string(seg) + "' never appears in a normalised path";
        return false;
      }
      out->segments.emplace_back(seg);
    }
    out->is_param.push_back(param);
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

bool MatchPathTemplate(const PathTemplate& t, std::string_view path, int param,
                       std::string_view* value) {
  if (path.empty() || path.front() != '/') return false;
  std::string_view rest = path.substr(1);
  for (size_t i = 0; i < t.segments.size(); ++i) {
    const size_t slash = rest.find('/');
    const bool last = i + 1 == t.segments.size();
    // The template's last segment must take the rest; any other one segment.
    if (last != (slash == std::string_view::npos)) return false;
    const std::string_view seg = rest.substr(0, slash);
    if (t.is_param[i]) {
      if (seg.empty()) return false;
      if (static_cast<int>(i) == param && value) *value = seg;
    } else if (seg != t.segments[i]) {
      return false;
    }
    if (!last) rest.remove_prefix(slash + 1);
  }
  return true;
}

}  // namespace tollgate
