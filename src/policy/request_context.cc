#include "policy/request_context.h"

#include <re2/re2.h>

#include <algorithm>

#include "policy/value_sets.h"
#include "tollgate/http_text.h"
#include "tollgate/request_body.h"

namespace tollgate {
namespace {

std::optional<std::string> NonEmpty(std::string_view v) {
  v = TrimOws(v);
  if (v.empty()) return std::nullopt;
  // Not cut: distinct long values must keep distinct keys (NormalizeKeyValue
  // hashes them); front ends bound header sizes.
  return std::string(v);
}

// "2001:db8:1:2:3::4" with 64 -> "2001:db8:1:2::/64"; IPv4 stays as is.
std::optional<std::string> IpPrefix(const std::string& ip_text, int bits) {
  auto ip = IpAddress::Parse(ip_text);
  if (!ip) return std::nullopt;
  if (!ip->v6) return ip->ToString();
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(bits - i * 8, 0, 8);
    ip->bytes[static_cast<size_t>(i)] &= static_cast<uint8_t>(0xff00 >> keep);
  }
  return ip->ToString() + "/" + std::to_string(bits);
}

}  // namespace

const std::string& RequestContext::Path() {
  if (!path_) path_ = NormalizePath(request_.path);
  return *path_;
}

const std::string& RequestContext::ClientIp() {
  if (!client_ip_) client_ip_ = ip_.Resolve(request_);
  return *client_ip_;
}

const JwtClaims& RequestContext::Claims() {
  if (!claims_) {
    auto auth = request_.Header("authorization");
    claims_ = auth ? jwt_.Verify(JwtVerifier::BearerToken(*auth), wall_now_s_) : JwtClaims{};
  }
  return *claims_;
}

const nlohmann::json* RequestContext::Body() {
  if (!body_parsed_) {
    body_parsed_ = true;
    const std::optional<std::string_view> body = RequestBodyOf(request_);
    const std::optional<std::string_view> type = request_.Header("content-type");
    if (body && !body->empty() && type && IsJsonContentType(*type)) body_ = ParseJsonBody(*body);
  }
  return body_ ? &*body_ : nullptr;
}

std::optional<std::string> RequestContext::Value(const Source& source) {
  switch (source.kind) {
    case Source::Kind::kIp:
      if (source.ip_prefix_bits > 0) return IpPrefix(ClientIp(), source.ip_prefix_bits);
      return NonEmpty(ClientIp());
    case Source::Kind::kHeader:
      if (auto v = request_.Header(source.arg)) return NonEmpty(*v);
      return std::nullopt;
    case Source::Kind::kQuery:
      if (auto v = request_.QueryParam(source.arg)) return NonEmpty(*v);
      return std::nullopt;
    case Source::Kind::kJwt: {
      const JwtClaims& claims = Claims();
      if (!claims.usable()) return std::nullopt;
      if (auto v = claims.Claim(source.arg)) return NonEmpty(*v);
      return std::nullopt;
    }
    case Source::Kind::kPath:
      return NonEmpty(Path());
    case Source::Kind::kMethod: {
      auto v = NonEmpty(request_.method);
      if (v) {
        for (char& c : *v) {
          if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
        }
      }
      return v;
    }
    case Source::Kind::kConst:
      return source.arg;
    case Source::Kind::kCookie: {
      const std::vector<std::string_view> fields = request_.Headers("cookie");
      if (auto v = CookieValue(fields, source.arg)) return NonEmpty(*v);
      return std::nullopt;
    }
    case Source::Kind::kHost: {
      // HTTP/1.1's Host, else HTTP/2's :authority; two of either: absent.
      std::vector<std::string_view> hosts = request_.Headers("host");
      if (hosts.empty()) hosts = request_.Headers(":authority");
      if (hosts.size() != 1) return std::nullopt;
      return NormalizeHost(TrimOws(hosts.front()));
    }
    case Source::Kind::kPathParam: {
      std::string_view v;
      if (!source.path_template ||
          !MatchPathTemplate(*source.path_template, Path(), source.path_param, &v)) {
        return std::nullopt;
      }
      return NonEmpty(v);
    }
    case Source::Kind::kBody: {
      // A string as is (only an empty one is absent: a body value is not
      // trimmed), a number or a boolean as JSON writes it; anything else absent.
      const nlohmann::json* doc = Body();
      if (doc == nullptr || !source.pointer) return std::nullopt;
      std::optional<std::string> v = JsonPointerValue(*doc, *source.pointer);
      if (v && v->empty()) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

bool RequestContext::Matches(const Condition& c) {
  switch (c.op) {
    case Condition::Op::kAll:
      for (const Condition& child : c.children) {
        if (!Matches(child)) return false;
      }
      return true;
    case Condition::Op::kAny:
      for (const Condition& child : c.children) {
        if (Matches(child)) return true;
      }
      return false;
    case Condition::Op::kNot:
      return !Matches(c.children.front());
    case Condition::Op::kTemplate:
      return MatchPathTemplate(*c.path_template, Path());
    case Condition::Op::kCidr:
      // The client address as resolved (trusted proxies respected); another
      // source's value is read as an address.
      if (c.source.kind == Source::Kind::kIp) return c.cidrs->Contains(ClientIp());
      if (auto v = Value(c.source)) return c.cidrs->Contains(*v);
      return false;
    default:
      break;
  }
  const std::optional<std::string> v = Value(c.source);
  switch (c.op) {
    case Condition::Op::kPresent:
      return v.has_value();
    case Condition::Op::kAbsent:
      return !v.has_value();
    default:
      break;
  }
  if (!v) return false;
  switch (c.op) {
    case Condition::Op::kEquals:
      return *v == c.values.front();
    case Condition::Op::kOneOf:
      for (const std::string& x : c.values) {
        if (*v == x) return true;
      }
      return false;
    case Condition::Op::kPrefix:
      return std::string_view(*v).starts_with(c.values.front());
    case Condition::Op::kSuffix:
      return std::string_view(*v).ends_with(c.values.front());
    case Condition::Op::kRegex:
      return RE2::PartialMatch(*v, *c.regex);
    case Condition::Op::kInSet:
      return c.set->Contains(*v);
    default:
      return false;
  }
}

bool PolicyReadsBody(const Policy& policy) { return policy.reads_body; }

std::optional<std::string> RepeatedKeyHeader(const Policy& policy,
                                             std::span<const HeaderPair> headers) {
  for (const Rule& rule : policy.rules) {
    for (const Source& key : rule.keys) {
      if (key.kind != Source::Kind::kHeader) continue;
      int copies = 0;
      for (const auto& [name, value] : headers) {
        if (EqualsIgnoreCase(name, key.arg) && ++copies > 1) return key.arg;
      }
    }
  }
  return std::nullopt;
}

}  // namespace tollgate
