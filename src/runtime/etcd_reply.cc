#include "runtime/etcd_reply.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"

namespace tollgate::etcd {
namespace {

using json = nlohmann::json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Fields are read through Reader, which remembers the first error with its path.
class Reader {
 public:
  explicit Reader(std::string what) : what_(std::move(what)) {}

  bool Fail(const std::string& path, const std::string& why) {
    if (error_.empty()) error_ = what_ + ": " + path + ": " + why;
    return false;
  }
  bool failed() const { return !error_.empty(); }
  Status status() const { return InvalidArgument(error_); }

  // An optional object member: null when absent; a failure when not an object.
  const json* Object(const json& parent, const char* name, const std::string& path) {
    auto it = parent.find(name);
    if (it == parent.end()) return nullptr;
    if (!it->is_object()) return Fail(path + name, "must be an object"), nullptr;
    return &*it;
  }

  // An int64 as the gateway writes it: a decimal string, or a number. Absent: 0.
  int64_t Int(const json& parent, const char* name, const std::string& path) {
    auto it = parent.find(name);
    if (it == parent.end()) return 0;
    if (it->is_number_integer()) {
      const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)
                            ? -1
                            : it->get<int64_t>();
      if (v < 0) Fail(path + name, "must be a non-negative int64");
      return v < 0 ? 0 : v;
    }
    if (!it->is_string()) return Fail(path + name, "must be a decimal string"), 0;
    const std::string& s = it->get_ref<const std::string&>();
    if (s.empty() || s.size() > 18) return Fail(path + name, "must be 1 to 18 digits"), 0;
    int64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return Fail(path + name, "must be decimal digits"), 0;
      v = v * 10 + (c - '0');
    }
    return v;
  }

  bool Bool(const json& parent, const char* name, const std::string& path) {
    auto it = parent.find(name);
    if (it == parent.end()) return false;
    if (!it->is_boolean()) return Fail(path + name, "must be a boolean");
    return it->get<bool>();
  }

  std::string String(const json& parent, const char* name, const std::string& path) {
    auto it = parent.find(name);
    if (it == parent.end()) return "";
    if (!it->is_string()) return Fail(path + name, "must be a string"), "";
    return it->get<std::string>();
  }

  // A base64 member (key, value); absent: "".
  std::string Bytes(const json& parent, const char* name, const std::string& path) {
    std::string out;
    const std::string text = String(parent, name, path);
    if (!Base64Decode(text, &out)) Fail(path + name, "not base64");
    return out;
  }

  KeyValue Kv(const json& kv, const std::string& path) {
    KeyValue out;
    out.key = Bytes(kv, "key", path);
    out.value = Bytes(kv, "value", path);
    out.mod_revision = Int(kv, "mod_revision", path);
    return out;
  }

 private:
  std::string what_;
  std::string error_;
};

// The document, bounded in size and depth, as an object.
Result<json> ParseObject(std::string_view text, std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  if (text.size() > kMaxReplyBytes) {
    return InvalidArgument(prefix + "larger than " + std::to_string(kMaxReplyBytes) + " bytes");
  }
  if (base::JsonNestingDepth(text) > kMaxReplyDepth) {
    return InvalidArgument(prefix + "nested deeper than " + std::to_string(kMaxReplyDepth));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(prefix + "not JSON");
  if (!j.is_object()) return InvalidArgument(prefix + "not a JSON object");
  return j;
}

}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n =
        uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i < in.size()) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  static constexpr std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    for (int i = 0; i < 64; ++i) v[uint8_t(kAlphabet[i])] = int8_t(i);
    return v;
  }();
  out->clear();
  if (in.size() % 4 != 0) return false;
  out->reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int pad = 0;
    uint32_t n = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && last && k >= 2) {
        ++pad;
        n <<= 6;
        continue;
      }
      const int8_t v = kValue[uint8_t(c)];
      if (v < 0 || pad > 0) return false;
      n = n << 6 | uint32_t(v);
    }
    out->push_back(char(n >> 16));
    if (pad < 2) out->push_back(char(n >> 8 & 255));
    if (pad < 1) out->push_back(char(n & 255));
  }
  return true;
}

Result<RangeReply> ParseRangeReply(std::string_view body) {
  auto parsed = ParseObject(body, "etcd range reply");
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r("etcd range reply");
  RangeReply out;
  if (const json* header = r.Object(j, "header", ""))
    out.revision = r.Int(*header, "revision", "header.");
  auto kvs = j.find("kvs");
  if (kvs != j.end()) {
    if (!kvs->is_array()) {
      r.Fail("kvs", "must be an array");
    } else if (kvs->size() > 1) {
      r.Fail("kvs", "one key was asked for, " + std::to_string(kvs->size()) + " came back");
    } else if (kvs->size() == 1) {
      if (!(*kvs)[0].is_object()) {
        r.Fail("kvs[0]", "must be an object");
      } else {
        out.kv = r.Kv((*kvs)[0], "kvs[0].");
      }
    }
  }
  if (r.failed()) return r.status();
  return out;
}

Result<TxnReply> ParseTxnReply(std::string_view body) {
  auto parsed = ParseObject(body, "etcd txn reply");
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r("etcd txn reply");
  TxnReply out;
  if (const json* header = r.Object(j, "header", ""))
    out.revision = r.Int(*header, "revision", "header.");
  out.succeeded = r.Bool(j, "succeeded", "");
  if (r.failed()) return r.status();
  return out;
}

Result<WatchReply> ParseWatchLine(std::string_view line) {
  auto parsed = ParseObject(line, "etcd watch reply");
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r("etcd watch reply");
  if (const json* error = r.Object(j, "error", "")) {
    std::string message = r.String(*error, "message", "error.");
    if (r.failed()) return r.status();
    return UnavailableError("etcd watch: " + message.substr(0, 200));
  }
  const json* result = r.Object(j, "result", "");
  if (r.failed()) return r.status();
  if (!result) return InvalidArgument("etcd watch reply: neither result nor error");
  WatchReply out;
  if (const json* header = r.Object(*result, "header", "result.")) {
    out.revision = r.Int(*header, "revision", "result.header.");
  }
  out.created = r.Bool(*result, "created", "result.");
  out.canceled = r.Bool(*result, "canceled", "result.");
  out.compact_revision = r.Int(*result, "compact_revision", "result.");
  out.cancel_reason = r.String(*result, "cancel_reason", "result.").substr(0, 200);
  auto events = result->find("events");
  if (events != result->end()) {
    if (!events->is_array()) {
      r.Fail("result.events", "must be an array");
    } else if (events->size() > kMaxEvents) {
      r.Fail("result.events", "more than " + std::to_string(kMaxEvents) + " events");
    } else {
      for (size_t i = 0; i < events->size() && !r.failed(); ++i) {
        const std::string path = "result.events[" + std::to_string(i) + "].";
        const json& e = (*events)[i];
        if (!e.is_object()) {
          r.Fail(path.substr(0, path.size() - 1), "must be an object");
          break;
        }
        WatchEvent event;
        const std::string type = r.String(e, "type", path);
        if (type == "DELETE") {
          event.deleted = true;
        } else if (!type.empty() && type != "PUT") {
          r.Fail(path + "type", "must be PUT or DELETE");
        }
        if (const json* kv = r.Object(e, "kv", path)) event.kv = r.Kv(*kv, path + "kv.");
        out.events.push_back(std::move(event));
      }
    }
  }
  if (r.failed()) return r.status();
  return out;
}

Result<std::string> ParseAuthReply(std::string_view body) {
  auto parsed = ParseObject(body, "etcd authenticate reply");
  if (!parsed.ok()) return parsed.status();
  Reader r("etcd authenticate reply");
  if (const json* header = r.Object(*parsed, "header", "")) r.Int(*header, "revision", "header.");
  std::string token = r.String(*parsed, "token", "");
  if (r.failed()) return r.status();
  if (token.empty()) return InvalidArgument("etcd authenticate reply: token: missing or empty");
  if (token.size() > kMaxTokenBytes) {
    return InvalidArgument("etcd authenticate reply: token: longer than " +
                           std::to_string(kMaxTokenBytes) + " bytes");
  }
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgument("etcd authenticate reply: token: not visible ASCII");
    }
  }
  return token;
}

Result<ErrorReply> ParseErrorReply(std::string_view body) {
  auto parsed = ParseObject(body, "etcd error reply");
  if (!parsed.ok()) return parsed.status();
  Reader r("etcd error reply");
  ErrorReply out;
  const auto code = parsed->find("code");
  if (code != parsed->end()) {
    if (!code->is_number_integer() || code->get<int64_t>() < 0 || code->get<int64_t>() > 1000) {
      r.Fail("code", "must be an integer from 0 to 1000");
    } else {
      out.code = code->get<int64_t>();
    }
  }
  std::string message = r.String(*parsed, "message", "");
  if (message.empty()) message = r.String(*parsed, "error", "");
  if (r.failed()) return r.status();
  message.resize(std::min(message.size(), kMaxErrorMessage));
  for (char& c : message) {
    if (c < 0x20 || c >= 0x7f) c = '?';
  }
  out.message = std::move(message);
  return out;
}

bool TokenRejected(const ErrorReply& error) {
  return error.code == kGrpcUnauthenticated || TokenRejected(error.message);
}

bool TokenRejected(std::string_view cancel_reason) {
  return cancel_reason.find("invalid auth token") != std::string_view::npos ||
         cancel_reason.find("code = Unauthenticated") != std::string_view::npos;
}

std::string AuthenticateRequest(std::string_view name, std::string_view password) {
  // Bytes JSON cannot carry (invalid UTF-8) are replaced: etcd then refuses
  // the login, and the password still appears nowhere but in this body.
  return json{{"name", std::string(name)}, {"password", std::string(password)}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

std::string RangeRequest(std::string_view key) { return json{{"key", Base64Encode(key)}}.dump(); }

std::string PutRequest(std::string_view key, std::string_view value) {
  return json{{"key", Base64Encode(key)}, {"value", Base64Encode(value)}}.dump();
}

std::string TxnIfRevisionRequest(std::string_view key, int64_t mod_revision,
                                 std::optional<std::string_view> value) {
  const std::string key64 = Base64Encode(key);
  json request = value ? json{{"request_put", {{"key", key64}, {"value", Base64Encode(*value)}}}}
                       : json{{"request_delete_range", {{"key", key64}}}};
  return json{{"compare", json::array({{{"key", key64},
                                        {"target", "MOD"},
                                        {"result", "EQUAL"},
                                        {"mod_revision", std::to_string(mod_revision)}}})},
              {"success", json::array({std::move(request)})}}
      .dump();
}

std::string WatchRequest(std::string_view key, int64_t start_revision) {
  json create = {{"key", Base64Encode(key)}};
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  return json{{"create_request", std::move(create)}}.dump();
}

}  // namespace tollgate::etcd
