#include "policy/request_context.h"

#include <re2/re2.h>

#include <algorithm>

namespace tollgate {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<std::string> NonEmpty(std::string_view v) {
  v = Trim(v);
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

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

std::string NormalizePath(std::string_view path) {
  path = path.substr(0, path.find_first_of("?#"));
  // 1. Percent-decoding of unreserved characters only (one pass: "%252e" stays
  // "%252e", so nothing is decoded twice); other escapes get upper-case hex.
  std::string decoded;
  decoded.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && HexDigit(path[i + 1]) >= 0 &&
        HexDigit(path[i + 2]) >= 0) {
      const char c = static_cast<char>(HexDigit(path[i + 1]) * 16 + HexDigit(path[i + 2]));
      if (Unreserved(c)) {
        decoded.push_back(c);
      } else {
        constexpr char kHex[] = "0123456789ABCDEF";
        decoded.push_back('%');
        decoded.push_back(kHex[(static_cast<unsigned char>(c) >> 4) & 0xf]);
        decoded.push_back(kHex[static_cast<unsigned char>(c) & 0xf]);
      }
      i += 2;
    } else {
      decoded.push_back(path[i]);
    }
  }
  if (decoded.empty() || decoded.front() != '/') return decoded;
  // 2. Segments: drop empty ones (repeated slashes) and ".", pop on "..".
  std::string out;
  out.reserve(decoded.size());
  std::string_view rest(decoded);
  bool trailing_slash = false;
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the '/'
    const size_t end = rest.find('/');
    const std::string_view seg = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    const bool last = rest.empty();
    if (seg.empty() || seg == ".") {
      trailing_slash = last;
    } else if (seg == "..") {
      const size_t cut = out.rfind('/');
      out.resize(cut == std::string::npos ? 0 : cut);
      trailing_slash = last;
    } else {
      out.push_back('/');
      out.append(seg);
      trailing_slash = false;
    }
  }
  if (out.empty() || trailing_slash) out.push_back('/');
  return out;
}

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

std::optional<std::string> RequestContext::Value(const Source& source) {
  switch (source.kind) {
    case Source::Kind::kIp:
      if (!source.arg.empty()) return IpPrefix(ClientIp(), std::stoi(source.arg));
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
  }
  return std::nullopt;
}

bool RequestContext::Matches(const Condition& c) {
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
    default:
      return false;
  }
}

}  // namespace tollgate
