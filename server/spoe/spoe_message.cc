#include "server/spoe/spoe_message.h"

#include <chrono>

#include "tollgate/http_text.h"

namespace tollgate::spop {
namespace {

constexpr size_t kMaxMethodBytes = 64;
constexpr size_t kMaxPathBytes = 8192;

// Visible ASCII only: a method HAProxy parsed never has anything else.
bool IsToken(std::string_view s) {
  for (char c : s) {
    if (c <= ' ' || c >= 0x7f) return false;
  }
  return true;
}

// No control byte (a path or query HAProxy accepted has none).
bool IsPlainText(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

RequestView SpoeRequest::View() const {
  RequestView v;
  v.method = method;
  v.path = path;
  v.query = query;
  v.peer_address = peer;
  v.headers = headers;
  return v;
}

std::string RequestFromMessage(const Message& message, SpoeRequest* out) {
  bool have_method = false, have_path = false, have_block = false;
  std::string_view host;
  std::vector<HeaderPair> singles;
  out->headers.clear();
  for (const Argument& a : message.args) {
    const Value& v = a.value;
    if (v.type == DataType::kNull || a.name.empty()) continue;
    if (a.name == "src") {
      if (v.type == DataType::kIpv4 || v.type == DataType::kIpv6) {
        out->peer = AddressText(v);
      } else if (v.is_text() && v.bytes.size() <= 64 && IsToken(v.bytes)) {
        out->peer = std::string(v.bytes);
      } else {
        return "src: must be an address";
      }
      continue;
    }
    if (!v.is_text()) return std::string(a.name) + ": must be a string";
    if (a.name == "method") {
      if (v.bytes.empty() || v.bytes.size() > kMaxMethodBytes || !IsToken(v.bytes)) {
        return "method: must be 1 to 64 visible ASCII bytes";
      }
      out->method = v.bytes;
      have_method = true;
    } else if (a.name == "path") {
      if (v.bytes.empty() || v.bytes.size() > kMaxPathBytes || !IsPlainText(v.bytes)) {
        return "path: must be 1 to 8192 bytes without control bytes";
      }
      out->path = NormalizePath(v.bytes);
      // "?x" or "#x": nothing is left of a path cut at its query or fragment.
      if (out->path.empty()) return "path: empty once its query and fragment are cut";
      have_path = true;
    } else if (a.name == "query") {
      if (!IsPlainText(v.bytes)) return "query: must have no control bytes";
      out->query = v.bytes;
    } else if (a.name == "headers") {
      if (have_block) return "headers: sent twice";
      have_block = true;
      const Error e = ParseHeaderBlock(v.bytes, &out->headers, kMaxRequestHeaders);
      if (e == Error::kResource) return "headers: more than 128 fields";
      if (e != Error::kNone) return "headers: malformed header block (req.hdrs_bin)";
    } else if (a.name == "host") {
      host = v.bytes;
    } else if (a.name.size() > 4 && a.name.substr(0, 4) == "hdr_") {
      singles.emplace_back(a.name.substr(4), v.bytes);
    }
  }
  if (!have_method) return "method: missing";
  if (!have_path) return "path: missing";
  if (out->headers.size() + singles.size() + 1 > kMaxRequestHeaders) {
    return "headers: more than 128 fields";
  }
  for (const HeaderPair& h : singles) out->headers.push_back(h);
  if (!host.empty() && !out->View().Header("host")) out->headers.emplace_back("host", host);
  return "";
}

std::string HeaderVariable(std::string_view name) {
  std::string var = "h_";
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') {
      var.push_back(char(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
      var.push_back(c);
    } else if (c == '-') {
      var.push_back('_');
    } else {
      return "";
    }
  }
  return name.empty() ? "" : var;
}

void ActionsFromOutcome(const CheckOutcome& outcome, size_t budget, ActionList* out) {
  const Scope txn = Scope::kTransaction;
  out->SetBool(txn, "deny", !outcome.allowed());
  out->SetInt(txn, "status", outcome.http_status);
  if (outcome.retry_after_seconds > 0) {
    out->SetInt(txn, "retry_after", outcome.retry_after_seconds);
  }
  if (outcome.denied_rule >= 0 && size_t(outcome.denied_rule) < outcome.rules.size()) {
    const std::string& rule = outcome.rules[size_t(outcome.denied_rule)].rule;
    out->SetString(txn, "rule", std::string_view(rule).substr(0, 128));
  }
  if (outcome.delay.count() > 0) {
    out->SetInt(txn, "delay_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(outcome.delay).count());
  }
  for (const HeaderField& h : outcome.headers) {
    // The problem body is not sent through HAProxy: its type would mislead.
    if (EqualsIgnoreCase(h.name, "content-type")) continue;
    const std::string var = HeaderVariable(h.name);
    if (var.empty()) continue;
    ActionList one;
    one.SetString(txn, var, h.value);
    if (out->size() + one.size() > budget) continue;
    out->SetString(txn, var, h.value);
  }
}

}  // namespace tollgate::spop
