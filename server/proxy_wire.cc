#include "server/proxy_wire.h"

#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/status.hpp>
#include <charconv>

#include "server/http_util.h"

namespace tollgate::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

void AppendField(std::string_view name, std::string_view value, std::string* out) {
  out->append(name);
  out->append(": ");
  out->append(value);
  out->append("\r\n");
}

bool IsFramingField(std::string_view name) {
  return EqualsIgnoreCase(name, "content-length") || EqualsIgnoreCase(name, "transfer-encoding");
}

// Connection may name the framing fields, but they are not the sender's to
// drop: without its Content-Length a relayed response would end only when the
// connection closes, and the next one would be read as its body (issue 14).
bool DroppedByConnection(std::string_view name, std::span<const std::string_view> connection) {
  if (KeptDespiteConnection(name)) return false;
  for (std::string_view value : connection) {
    if (NamedByConnection(name, value)) return true;
  }
  return false;
}

// Whether a Connection value names any field (tokens other than the options
// keep-alive and close): the common "keep-alive" alone needs no per-field check.
bool NamesFields(std::string_view connection_value) {
  for (auto token : http::token_list(connection_value)) {
    std::string_view t(token.data(), token.size());
    if (!EqualsIgnoreCase(t, "keep-alive") && !EqualsIgnoreCase(t, "close")) return true;
  }
  return false;
}

}  // namespace

bool IsHopByHop(std::string_view name) {
  switch (name.size()) {
    case 2:
      return EqualsIgnoreCase(name, "te");
    case 7:
      return EqualsIgnoreCase(name, "trailer") || EqualsIgnoreCase(name, "upgrade");
    case 10:
      return EqualsIgnoreCase(name, "connection") || EqualsIgnoreCase(name, "keep-alive");
    case 16:
      return EqualsIgnoreCase(name, "proxy-connection");
    case 18:
      return EqualsIgnoreCase(name, "proxy-authenticate");
    case 19:
      return EqualsIgnoreCase(name, "proxy-authorization");
    default:
      return false;
  }
}

bool KeptDespiteConnection(std::string_view name) {
  return IsFramingField(name) || EqualsIgnoreCase(name, "host") || IsForwardingField(name);
}

bool IsForwardingField(std::string_view name) {
  return EqualsIgnoreCase(name, "x-forwarded-for") || EqualsIgnoreCase(name, "x-forwarded-host") ||
         EqualsIgnoreCase(name, "x-forwarded-proto") || EqualsIgnoreCase(name, "x-real-ip") ||
         EqualsIgnoreCase(name, "forwarded");
}

bool IsAppendableRateLimitField(std::string_view name) {
  return EqualsIgnoreCase(name, "ratelimit") || EqualsIgnoreCase(name, "ratelimit-policy");
}

void AppendUpstreamTarget(std::string_view target, const UpstreamUrl& upstream, std::string* out) {
  if (target != "*") out->append(upstream.base_path);
  out->append(target);
}

bool NamedByConnection(std::string_view field_name, std::string_view connection_value) {
  for (auto token : http::token_list(connection_value)) {
    if (EqualsIgnoreCase(std::string_view(token.data(), token.size()), field_name)) return true;
  }
  return false;
}

UpstreamResponseHead::UpstreamResponseHead(std::vector<FieldView>* fields) : fields_(fields) {
  fields_->clear();
  eager(false);  // stop after the header: the body is relayed, not parsed
  body_limit(std::numeric_limits<std::uint64_t>::max());
}

UpstreamResponseHead::State UpstreamResponseHead::Parse(std::string_view bytes) {
  // basic_parser only starts once the whole header is there, so a kNeedMore
  // call has recorded nothing; clear anyway so a retry starts clean.
  fields_->clear();
  connection_count_ = 0;
  copied_value_ = false;
  input_ = bytes;
  beast::error_code ec;
  size_t used = put(boost::asio::const_buffer(bytes.data(), bytes.size()), ec);
  if (ec == http::error::need_more) return State::kNeedMore;
  if (ec || !is_header_done()) return State::kInvalid;
  header_size_ = used;
  return State::kComplete;
}

bool UpstreamResponseHead::Relayable() const {
  if (copied_value_ || connection_count_ > kMaxConnectionFields) return false;
  if (status_ < 200 || status_ == 101 || chunked()) return false;
  return is_done() || content_length().has_value();
}

uint64_t UpstreamResponseHead::body_size() const {
  return is_done() ? 0 : content_length().value_or(0);
}

void UpstreamResponseHead::on_response_impl(int code, std::string_view reason, int,
                                            beast::error_code&) {
  status_ = code;
  reason_ = reason;
}

void UpstreamResponseHead::on_field_impl(http::field id, std::string_view name,
                                         std::string_view value, beast::error_code&) {
  const char* begin = input_.data();
  const char* end = begin + input_.size();
  if (value.data() < begin || value.data() + value.size() > end) copied_value_ = true;
  if (id == http::field::connection && NamesFields(value)) {
    if (connection_count_ < kMaxConnectionFields) connection_[connection_count_] = value;
    ++connection_count_;
  }
  fields_->push_back({name, value});
}

bool AppendUpstreamRequestHead(const http::request_header<>& req, std::string_view peer_ip,
                               bool peer_trusted, const UpstreamUrl& upstream, std::string* out,
                               std::string_view traceparent, bool client_tls) {
  std::array<std::string_view, 4> connection;
  size_t connection_count = 0;
  // equal_range spans, in arrival order, the first to the last match: filter.
  auto [first, last] = req.equal_range(http::field::connection);
  for (auto it = first; it != last; ++it) {
    if (it->name() != http::field::connection) continue;
    if (connection_count == connection.size()) return false;
    connection[connection_count++] = std::string_view(it->value().data(), it->value().size());
  }
  std::span<const std::string_view> named(connection.data(), connection_count);

  auto method = req.method_string();
  out->append(method.data(), method.size());
  out->push_back(' ');
  AppendUpstreamTarget(std::string_view(req.target().data(), req.target().size()), upstream, out);
  out->append(" HTTP/1.1\r\n");
  AppendField("Host", upstream.host_header, out);

  std::string_view host;
  bool has_forwarded_host = false;
  bool has_forwarded_proto = false;
  bool has_length = false;
  for (const auto& f : req) {
    std::string_view name(f.name_string().data(), f.name_string().size());
    std::string_view value(f.value().data(), f.value().size());
    switch (f.name()) {
      case http::field::host:
        if (host.empty()) host = value;
        continue;
      case http::field::expect:  // bodyless: nothing to continue
        continue;
      case http::field::content_length:
        has_length = true;
        continue;
      case http::field::transfer_encoding:  // cannot be: a chunked request has a body
        continue;
      default:
        break;
    }
    if (IsHopByHop(name) || DroppedByConnection(name, named)) continue;
    if (!traceparent.empty() && EqualsIgnoreCase(name, "traceparent")) continue;  // set below
    if (IsForwardingField(name)) {
      if (!peer_trusted || EqualsIgnoreCase(name, "x-forwarded-for")) continue;  // set below
      has_forwarded_host = has_forwarded_host || EqualsIgnoreCase(name, "x-forwarded-host");
      has_forwarded_proto = has_forwarded_proto || EqualsIgnoreCase(name, "x-forwarded-proto");
    }
    AppendField(name, value, out);
  }
  // Bodyless (the parser is done after the header): a Content-Length was 0.
  if (has_length) AppendField("Content-Length", "0", out);

  // From a trusted proxy, every X-Forwarded-For field, in order, then the peer.
  out->append("X-Forwarded-For: ");
  if (peer_trusted) {
    auto [xff, xff_end] = req.equal_range("X-Forwarded-For");
    for (auto it = xff; it != xff_end; ++it) {
      std::string_view name(it->name_string().data(), it->name_string().size());
      if (!EqualsIgnoreCase(name, "x-forwarded-for")) continue;
      out->append(it->value().data(), it->value().size());
      out->append(", ");
    }
  }
  out->append(peer_ip);
  out->append("\r\n");
  if (!has_forwarded_host && !host.empty()) AppendField("X-Forwarded-Host", host, out);
  if (!has_forwarded_proto) AppendField("X-Forwarded-Proto", client_tls ? "https" : "http", out);
  if (!peer_trusted) AppendField("X-Real-IP", peer_ip, out);
  if (!traceparent.empty()) AppendField("traceparent", traceparent, out);
  out->append("\r\n");
  return true;
}

void AppendClientResponseHead(const UpstreamResponseHead& head,
                              const std::vector<HeaderField>& added, bool keep_alive,
                              unsigned client_version, std::string* out) {
  char digits[8];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, head.status());
  std::string_view reason = head.reason();
  if (reason.empty()) reason = http::obsolete_reason(static_cast<http::status>(head.status()));
  out->append("HTTP/1.1 ");
  out->append(digits, end);
  out->push_back(' ');
  out->append(reason);
  out->append("\r\n");
  for (const FieldView& f : head.fields()) {
    if (IsHopByHop(f.name) || IsFramingField(f.name) ||
        DroppedByConnection(f.name, head.connection_values())) {
      continue;
    }
    bool replaced = false;
    if (!IsAppendableRateLimitField(f.name)) {
      for (const HeaderField& a : added) replaced = replaced || EqualsIgnoreCase(a.name, f.name);
    }
    if (!replaced) AppendField(f.name, f.value, out);
  }
  // Relayable: the body is framed by Content-Length or by the status (none).
  if (auto length = head.content_length(); length && head.status() != 204) {
    char length_digits[24];
    auto [length_end, length_ec] =
        std::to_chars(length_digits, length_digits + sizeof length_digits, *length);
    AppendField("Content-Length", std::string_view(length_digits, length_end - length_digits), out);
  }
  for (const HeaderField& a : added) AppendField(a.name, a.value, out);
  if (!keep_alive) {
    out->append("Connection: close\r\n");
  } else if (client_version < 11) {
    out->append("Connection: keep-alive\r\n");
  }
  out->append("\r\n");
}

}  // namespace tollgate::server
