// Value helpers shared by parsing and deciding: sources, costs, key
// normalisation, bucket keys and the stable hash behind rollout and jitter.
#include <openssl/sha.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "policy/policy_impl.h"
#include "policy/request_fields.h"
#include "tollgate/http_text.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

constexpr char kHex[] = "0123456789abcdef";

bool IsTokenChar(char c) {
  // RFC 9110 tchar: the characters a header field name may hold.
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

namespace {

// The request field sources (policy/request_fields.h): host, cookie:<name>,
// path_param:<name>, body:<JSON pointer>. False with *error empty when `spec`
// is none of them; false with *error set when it is a bad one.
bool ParseRequestFieldSource(std::string_view spec, Source* out, std::string* error) {
  if (spec == "host") {
    out->kind = Source::Kind::kHost;
    return true;
  }
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view arg = spec.substr(colon + 1);
  if (kind == "cookie") {
    if (!ValidCookieName(arg)) {
      *error = "cookie:<name> needs a cookie name of 1 to 128 token characters (RFC 6265)";
      return false;
    }
    out->kind = Source::Kind::kCookie;
    out->arg = std::string(arg);
    return true;
  }
  if (kind == "body") {
    auto pointer = std::make_shared<JsonPointer>();
    if (!ParseJsonPointer(arg, pointer.get(), error)) {
      *error = "body:<JSON pointer>: " + *error;
      return false;
    }
    if (pointer->tokens.empty()) {
      *error = "body:<JSON pointer> needs a pointer to a member, e.g. body:/username";
      return false;
    }
    out->kind = Source::Kind::kBody;
    out->arg = std::string(arg);
    out->pointer = std::move(pointer);
    return true;
  }
  if (kind == "path_param") {
    bool ok = !arg.empty() && arg.size() <= 64;
    for (char c : arg) {
      ok = ok &&
           ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) {
      *error = "path_param:<name> needs a parameter name of 1 to 64 letters, digits or '_'";
      return false;
    }
    out->kind = Source::Kind::kPathParam;
    out->arg = std::string(arg);
    return true;
  }
  return false;
}

}  // namespace

bool ParseSource(std::string_view spec, Source* out, std::string* error) {
  out->spec = std::string(spec);
  out->arg.clear();
  out->ip_prefix_bits = 0;
  out->pointer.reset();
  out->path_template.reset();
  out->path_param = -1;
  error->clear();
  if (spec == "ip:address" || spec == "ip") {
    out->kind = Source::Kind::kIp;
    return true;
  }
  if (spec == "path") {
    out->kind = Source::Kind::kPath;
    return true;
  }
  if (spec == "method") {
    out->kind = Source::Kind::kMethod;
    return true;
  }
  if (ParseRequestFieldSource(spec, out, error)) return true;
  if (!error->empty()) return false;
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) {
    *error = "unknown source '" + std::string(spec) +
             "' (use ip:address, header:<name>, query:<name>, jwt:<claim>, path, method, "
             "host, cookie:<name>, path_param:<name>, body:<JSON pointer> or const:<text>)";
    return false;
  }
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view arg = spec.substr(colon + 1);
  if (kind == "const") {
    if (arg.empty() || arg.size() > 128) {
      *error = "const:<text> needs 1 to 128 characters";
      return false;
    }
    out->kind = Source::Kind::kConst;
    out->arg = std::string(arg);
    return true;
  }
  if (kind == "ip") {
    // "ip:address/64": IPv6 clients grouped by prefix (one bucket per /64).
    constexpr std::string_view kPrefixed = "address/";
    if (arg.starts_with(kPrefixed) && arg.size() > kPrefixed.size() &&
        arg.size() <= kPrefixed.size() + 3) {
      int bits = 0;
      bool digits = true;
      for (char c : arg.substr(kPrefixed.size())) {
        digits = digits && c >= '0' && c <= '9';
        bits = bits * 10 + (c - '0');
      }
      if (digits && bits >= 1 && bits <= 128) {
        out->kind = Source::Kind::kIp;
        out->ip_prefix_bits = bits;
        return true;
      }
    }
    *error = "unknown ip source '" + std::string(spec) +
             "' (use ip:address, or ip:address/<1-128> to group IPv6 clients by prefix)";
    return false;
  }
  if (arg.empty() || arg.size() > 128) {
    *error = std::string(kind) + ":<name> needs a name of 1 to 128 characters";
    return false;
  }
  if (kind == "header") {
    for (char c : arg) {
      if (!IsTokenChar(c)) {
        *error = "header name '" + std::string(arg) + "' is not a valid field name";
        return false;
      }
    }
    out->kind = Source::Kind::kHeader;
    out->arg = AsciiLowered(arg);
    return true;
  }
  if (kind == "query" || kind == "jwt") {
    for (unsigned char c : arg) {
      if (c < 0x21 || c > 0x7e) {
        *error = std::string(kind) + " name must be printable ASCII without spaces";
        return false;
      }
    }
    out->kind = kind == "query" ? Source::Kind::kQuery : Source::Kind::kJwt;
    out->arg = std::string(arg);
    return true;
  }
  *error = "unknown source kind '" + std::string(kind) +
           "' (use ip:address, header:<name>, query:<name>, jwt:<claim>, path, method, "
           "host, cookie:<name>, path_param:<name>, body:<JSON pointer> or const:<text>)";
  return false;
}

bool ParseCost(std::string_view text, int64_t* out) {
  text = TrimOws(text);
  if (text.empty() || text.size() > 64) return false;
  // Strict decimal grammar: digits [. digits] [e [+-] digits]. from_chars would
  // also take "inf", "nan" and a leading '-'.
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i > start;
  };
  const bool int_part = digits();
  bool frac_part = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    frac_part = digits();
  }
  if (!int_part && !frac_part) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return false;
  }
  if (i != text.size()) return false;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Overflow (1e309) is not a valid number; underflow (1e-400) is not positive.
    return false;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  if (!std::isfinite(v) || !(v > 0)) return false;
  if (v >= static_cast<double>(kMaxCost)) {
    *out = kMaxCost;
    return true;
  }
  *out = static_cast<int64_t>(std::ceil(v));
  if (*out < 1) *out = 1;
  return true;
}

std::string NormalizeKeyValue(std::string_view raw) {
  raw = TrimOws(raw);
  std::string out;
  out.reserve(raw.size());
  for (unsigned char c : raw) {
    // A leading '~' is escaped too: only the hashed form of a long value
    // starts with '~', so no literal value can name a long value's bucket.
    if (c == '\\' || c == '|' || c < 0x21 || c > 0x7e || (c == '~' && out.empty())) {
      if (c == '\\' || c == '|') {
        out.push_back('\\');
        out.push_back(static_cast<char>(c));
      } else {
        out += "\\x";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
    } else {
      out.push_back(static_cast<char>(c));
    }
    if (out.size() > kMaxKeyValueLength) break;
  }
  if (out.size() <= kMaxKeyValueLength) return out;
  // Too long: a hash keeps distinct values distinct without storing them.
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), digest);
  std::string h = "~";
  for (int i = 0; i < 16; ++i) {
    h.push_back(kHex[digest[i] >> 4]);
    h.push_back(kHex[digest[i] & 15]);
  }
  return h;
}

std::string JoinIdentity(const std::vector<std::string>& normalized_values) {
  std::string out;
  for (size_t i = 0; i < normalized_values.size(); ++i) {
    if (i) out.push_back('|');
    out += normalized_values[i];
  }
  return out;
}

uint64_t StableHash(std::string_view data, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  // SplitMix64 finaliser: FNV's low bits alone are poorly mixed.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

std::string BucketKey(std::string_view rule, Algorithm algorithm, std::string_view identity) {
  static constexpr std::string_view kTags[] = {"tb", "lb", "fw", "sw", "sl"};
  const auto a = static_cast<size_t>(algorithm);
  std::string key;
  key.reserve(rule.size() + identity.size() + 4);
  key.append(rule);
  key.push_back('\x1f');
  key.append(a < 5 ? kTags[a] : std::string_view("xx"));
  key.push_back('\x1f');
  key.append(identity);
  return key;
}

int Policy::Find(std::string_view name) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tollgate
