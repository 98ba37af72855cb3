#include "tollgate/http_framing.h"

#include <algorithm>
#include <cstring>

#include "tollgate/http_text.h"
#include "tollgate/request.h"

namespace tollgate {
namespace {

class Category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "tollgate.http_framing"; }
  std::string message(int e) const override {
    switch (static_cast<HttpFramingError>(e)) {
      case HttpFramingError::kOk:
        return "ok";
      case HttpFramingError::kIncompleteHeader:
        return "the header does not end with an empty line";
      case HttpFramingError::kBareCrOrLf:
        return "a CR or LF outside a CRLF line ending";
      case HttpFramingError::kObsFold:
        return "a folded field line (obs-fold)";
      case HttpFramingError::kBadFieldLine:
        return "a field line without a name and ':' (or with whitespace before the ':')";
      case HttpFramingError::kBadContentLength:
        return "Content-Length is not one decimal number";
      case HttpFramingError::kDuplicateContentLength:
        return "Content-Length sent more than once";
      case HttpFramingError::kDuplicateTransferEncoding:
        return "Transfer-Encoding sent more than once";
      case HttpFramingError::kUnsupportedTransferEncoding:
        return "Transfer-Encoding other than exactly \"chunked\"";
      case HttpFramingError::kTransferEncodingWithContentLength:
        return "both Transfer-Encoding and Content-Length";
      case HttpFramingError::kTransferEncodingInHttp10:
        return "Transfer-Encoding in an HTTP/1.0 message";
      case HttpFramingError::kMissingHost:
        return "no Host field in an HTTP/1.1 request";
      case HttpFramingError::kDuplicateHost:
        return "Host sent more than once";
      case HttpFramingError::kAsteriskForm:
        return "the target \"*\" is only for OPTIONS";
      case HttpFramingError::kAuthorityForm:
        return "the target is neither a path nor an http(s) URL";
      case HttpFramingError::kAuthorityNotHost:
        return "the target URL's authority is not the Host field";
      case HttpFramingError::kFragment:
        return "a '#' in the target";
      case HttpFramingError::kBackslash:
        return "a backslash in the path";
      case HttpFramingError::kPathParameter:
        return "a ';' (path parameter) in the path";
      case HttpFramingError::kEncodedSlash:
        return "an encoded '/' or '\\' (%2F, %5C) in the path";
      case HttpFramingError::kEncodedNul:
        return "an encoded NUL (%00) in the path";
      case HttpFramingError::kBadTargetByte:
        return "a space, control byte or DEL in the target";
    }
    return "unknown framing error";
  }
};

bool AllDigits(std::string_view s) {
  if (s.empty() || s.size() > 19) return false;  // 19 digits always fit a uint64
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// What Beast refuses in a request line's target: a space, controls, DEL.
bool BadTargetByte(char c) {
  const auto b = static_cast<unsigned char>(c);
  return b <= 0x20 || b == 0x7f;
}

// `path` with every byte outside ASCII written as an escape (upper-case hex),
// which NormalizePath then keeps: raw and encoded UTF-8 are one spelling.
std::string EncodeNonAscii(std::string_view path) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size() * 3);
  for (char c : path) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x80) {
      out.push_back(c);
      continue;
    }
    out.push_back('%');
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

}  // namespace

const boost::system::error_category& HttpFramingCategory() {
  static const Category category;
  return category;
}

boost::system::error_code make_error_code(HttpFramingError e) {
  return {static_cast<int>(e), HttpFramingCategory()};
}

HttpFramingError CheckFraming(std::string_view head, MessageKind kind) {
  using E = HttpFramingError;
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") return E::kIncompleteHeader;
  // Every CR starts a CRLF and every LF ends one; no line is a continuation.
  // Line by line with memchr (the head ends with CRLF, so every byte is in a
  // line): the line's only CR is the one before its LF.
  const char* const end = head.data() + head.size();
  for (const char* line = head.data(); line < end;) {
    const char* lf = static_cast<const char*>(std::memchr(line, '\n', end - line));
    const char* cr = static_cast<const char*>(std::memchr(line, '\r', (lf ? lf : end) - line));
    if (lf == nullptr || cr != lf - 1) return E::kBareCrOrLf;
    if (lf + 1 < end && (lf[1] == ' ' || lf[1] == '\t')) return E::kObsFold;
    line = lf + 1;
  }
  head.remove_suffix(2);  // the empty line; every line below ends with CRLF
  const size_t start_end = head.find("\r\n");
  const std::string_view start = head.substr(0, start_end);
  std::string_view version;
  if (kind == MessageKind::kRequest) {
    const size_t sp = start.rfind(' ');
    version = sp == std::string_view::npos ? start : start.substr(sp + 1);
  } else {
    version = start.substr(0, start.find(' '));
  }
  const bool http10 = version == "HTTP/1.0";

  int content_lengths = 0;
  int transfer_encodings = 0;
  int hosts = 0;
  std::string_view rest = head.substr(start_end + 2);
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (line.empty() || line.front() == ' ' || line.front() == '\t') return E::kObsFold;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || line[colon - 1] == ' ' ||
        line[colon - 1] == '\t') {
      return E::kBadFieldLine;
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = TrimOws(line.substr(colon + 1));
    if (EqualsIgnoreCase(name, "content-length")) {
      if (++content_lengths > 1) return E::kDuplicateContentLength;
      if (!AllDigits(value)) return E::kBadContentLength;
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      if (++transfer_encodings > 1) return E::kDuplicateTransferEncoding;
      if (!EqualsIgnoreCase(value, "chunked")) return E::kUnsupportedTransferEncoding;
    } else if (kind == MessageKind::kRequest && EqualsIgnoreCase(name, "host")) {
      if (++hosts > 1) return E::kDuplicateHost;
    }
  }
  if (transfer_encodings > 0 && content_lengths > 0) return E::kTransferEncodingWithContentLength;
  if (transfer_encodings > 0 && http10) return E::kTransferEncodingInHttp10;
  if (kind == MessageKind::kRequest && hosts == 0 && !http10) return E::kMissingHost;
  return E::kOk;
}

bool IsPlainOriginForm(std::string_view target) {
  if (target.empty() || target.front() != '/') return false;
  bool in_path = true;
  char previous = 0;
  for (const char c : target) {
    const auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b >= 0x7f || c == '#') return false;
    if (in_path) {
      if (c == '?') {
        in_path = false;
      } else if (c == '%' || c == '\\' || c == ';' || (previous == '/' && (c == '/' || c == '.'))) {
        return false;
      }
    }
    previous = c;
  }
  return true;
}

HttpFramingError ToOriginForm(std::string_view method, std::string_view target,
                              std::string_view host, std::string* out) {
  using E = HttpFramingError;
  if (IsPlainOriginForm(target)) {
    out->assign(target);
    return E::kOk;
  }
  if (target == "*") {
    if (method != "OPTIONS") return E::kAsteriskForm;
    *out = "*";
    return E::kOk;
  }
  if (std::any_of(target.begin(), target.end(), BadTargetByte)) return E::kBadTargetByte;
  if (target.find('#') != std::string_view::npos) return E::kFragment;
  if (target.empty() || target.front() != '/') {
    size_t scheme = 0;
    if (StartsWithIgnoreCase(target, "http://")) {
      scheme = 7;
    } else if (StartsWithIgnoreCase(target, "https://")) {
      scheme = 8;
    } else {
      return E::kAuthorityForm;
    }
    std::string_view rest = target.substr(scheme);
    const size_t end = rest.find_first_of("/?");
    const std::string_view authority = rest.substr(0, end);
    if (authority.empty() || authority.find('@') != std::string_view::npos ||
        !EqualsIgnoreCase(authority, TrimOws(host))) {
      return E::kAuthorityNotHost;
    }
    target = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  if (path.find('\\') != std::string_view::npos) return E::kBackslash;
  if (path.find(';') != std::string_view::npos) return E::kPathParameter;
  if (ContainsIgnoreCase(path, "%2f") || ContainsIgnoreCase(path, "%5c")) return E::kEncodedSlash;
  if (path.find("%00") != std::string_view::npos) return E::kEncodedNul;
  if (std::all_of(path.begin(), path.end(), [](char c) { return (c & 0x80) == 0; })) {
    *out = NormalizePath(path.empty() ? std::string_view("/") : path);
  } else {
    *out = NormalizePath(EncodeNonAscii(path));
  }
  if (q != std::string_view::npos) out->append(target.substr(q));
  return E::kOk;
}

HttpFramingError OriginalUriToOriginForm(std::string_view method, std::string_view uri,
                                         std::string* out) {
  return ToOriginForm(method, uri, /*host=*/{}, out);
}

boost::system::error_code AcceptRequestHead(std::string_view raw_head,
                                            boost::beast::http::request_header<>& req) {
  if (HttpFramingError e = CheckFraming(raw_head, MessageKind::kRequest);
      e != HttpFramingError::kOk) {
    return e;
  }
  std::string_view host;
  if (auto it = req.find(boost::beast::http::field::host); it != req.end()) {
    host = std::string_view(it->value().data(), it->value().size());
  }
  const std::string_view target(req.target().data(), req.target().size());
  if (IsPlainOriginForm(target)) return {};  // the common case: nothing to rewrite
  std::string origin;
  if (HttpFramingError e =
          ToOriginForm(std::string_view(req.method_string().data(), req.method_string().size()),
                       target, host, &origin);
      e != HttpFramingError::kOk) {
    return e;
  }
  if (origin != target) req.target(origin);
  return {};
}

}  // namespace tollgate
