#include "testing/otlp_collector.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

namespace tollgate::testing {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;

bool IsLowerHex(const std::string& s, size_t size) {
  if (s.size() != size) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return s.find_first_not_of('0') != std::string::npos;  // all-zero ids are invalid
}

bool DecimalString(const json& j, uint64_t* out) {
  if (!j.is_string()) return false;
  const std::string& s = j.get_ref<const std::string&>();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// Throws std::string with the path of the first violation.
const json& Field(const json& obj, const char* key, const std::string& path) {
  if (!obj.is_object()) throw path + ": not an object";
  auto it = obj.find(key);
  if (it == obj.end()) throw path + "." + key + ": missing";
  return *it;
}

const json& Array(const json& obj, const char* key, const std::string& path) {
  const json& a = Field(obj, key, path);
  if (!a.is_array()) throw path + "." + key + ": not an array";
  return a;
}

std::map<std::string, std::string> Attributes(const json& list, const std::string& path) {
  std::map<std::string, std::string> out;
  if (!list.is_array()) throw path + ": not an array";
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const json& key = Field(list[i], "key", p);
    const json& value = Field(list[i], "value", p);
    if (!key.is_string() || !value.is_object() || value.size() != 1) throw p + ": bad key/value";
    std::string text;
    if (auto s = value.find("stringValue"); s != value.end() && s->is_string()) {
      text = *s;
    } else if (auto n = value.find("intValue"); n != value.end()) {
      uint64_t v = 0;
      // Negative values are not used by tollgated; decimal strings only.
      if (!DecimalString(*n, &v)) throw p + ".value.intValue: not a decimal string";
      text = std::to_string(v);
    } else if (auto b = value.find("boolValue"); b != value.end() && b->is_boolean()) {
      text = b->get<bool>() ? "true" : "false";
    } else {
      throw p + ".value: not a string, int or bool value";
    }
    if (!out.emplace(key.get<std::string>(), text).second) throw p + ": duplicate key";
  }
  return out;
}

ReceivedSpan DecodeSpan(const json& s, const std::string& p, const std::string& service) {
  ReceivedSpan r;
  r.service_name = service;
  r.trace_id = Field(s, "traceId", p).is_string() ? s["traceId"].get<std::string>() : "";
  r.span_id = Field(s, "spanId", p).is_string() ? s["spanId"].get<std::string>() : "";
  if (!IsLowerHex(r.trace_id, 32)) throw p + ".traceId: not 32 lowercase hex digits";
  if (!IsLowerHex(r.span_id, 16)) throw p + ".spanId: not 16 lowercase hex digits";
  if (auto parent = s.find("parentSpanId"); parent != s.end()) {
    if (!parent->is_string() || !IsLowerHex(*parent, 16)) throw p + ".parentSpanId: bad";
    r.parent_span_id = *parent;
  }
  const json& name = Field(s, "name", p);
  if (!name.is_string() || name.get_ref<const std::string&>().empty()) throw p + ".name: bad";
  r.name = name;
  const json& kind = Field(s, "kind", p);
  if (!kind.is_number_integer() || kind.get<int>() < 0 || kind.get<int>() > 5) {
    throw p + ".kind: not a SpanKind";
  }
  r.kind = kind;
  if (!DecimalString(Field(s, "startTimeUnixNano", p), &r.start_ns) ||
      !DecimalString(Field(s, "endTimeUnixNano", p), &r.end_ns) || r.start_ns == 0 ||
      r.end_ns < r.start_ns) {
    throw p + ": start/end times not decimal strings with start <= end";
  }
  r.attributes = Attributes(Field(s, "attributes", p), p + ".attributes");
  if (auto status = s.find("status"); status != s.end()) {
    const json& code = Field(*status, "code", p + ".status");
    if (!code.is_number_integer() || code.get<int>() < 0 || code.get<int>() > 2) {
      throw p + ".status.code: not a StatusCode";
    }
    r.status_code = code;
  }
  return r;
}

}  // namespace

std::string DecodeOtlpJson(std::string_view body, std::vector<ReceivedSpan>* out) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return "not JSON";
  std::vector<ReceivedSpan> spans;
  try {
    const json& rs = Array(doc, "resourceSpans", "$");
    for (size_t i = 0; i < rs.size(); ++i) {
      const std::string p = "$.resourceSpans[" + std::to_string(i) + "]";
      auto resource = Attributes(Array(Field(rs[i], "resource", p), "attributes", p + ".resource"),
                                 p + ".resource.attributes");
      const std::string service = resource.count("service.name") ? resource["service.name"] : "";
      if (service.empty()) throw p + ".resource: no service.name";
      const json& scopes = Array(rs[i], "scopeSpans", p);
      for (size_t j = 0; j < scopes.size(); ++j) {
        const std::string sp = p + ".scopeSpans[" + std::to_string(j) + "]";
        const json& list = Array(scopes[j], "spans", sp);
        for (size_t k = 0; k < list.size(); ++k) {
          spans.push_back(DecodeSpan(list[k], sp + ".spans[" + std::to_string(k) + "]", service));
        }
      }
    }
  } catch (const std::string& why) {
    return why;
  }
  out->insert(out->end(), spans.begin(), spans.end());
  return "";
}

struct OtlpCollector::Impl {
  Mode mode;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)};
  mutable std::mutex mu;
  std::vector<ReceivedSpan> spans;  // guarded by mu
  std::vector<std::string> errors;  // guarded by mu
  uint64_t requests = 0;            // guarded by mu
  std::thread thread;

  struct Connection {
    tcp::socket socket;
    boost::beast::flat_buffer buffer;
    std::optional<http::request_parser<http::string_body>> parser;
    http::response<http::string_body> response;
    std::string hostile, filler;  // a hostile mode's reply start and what follows forever
    explicit Connection(tcp::socket s) : socket(std::move(s)) { Reset(); }
    void Reset() {
      parser.emplace();
      parser->body_limit(16 << 20);
    }
  };

  void Accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      Read(std::make_shared<Connection>(std::move(socket)));
      Accept();
    });
  }

  void Read(std::shared_ptr<Connection> c) {
    http::async_read(c->socket, c->buffer, *c->parser,
                     [this, c](boost::system::error_code ec, size_t) {
                       if (ec) return;
                       std::string why = Check(c->parser->get());
                       {
                         std::lock_guard<std::mutex> lock(mu);
                         ++requests;
                         if (!why.empty()) errors.push_back(why);
                       }
                       if (mode == Mode::kHang) {
                         hung.push_back(c);  // keeps the connection open, unanswered
                         return;
                       }
                       if (mode != Mode::kAnswer) {
                         StreamHostileReply(c);
                         return;
                       }
                       c->response = http::response<http::string_body>(
                           why.empty() ? http::status::ok : http::status::bad_request, 11);
                       c->response.set(http::field::content_type, "application/json");
                       c->response.body() = why.empty() ? "{}" : json{{"message", why}}.dump();
                       c->response.keep_alive(c->parser->get().keep_alive());
                       c->response.prepare_payload();
                       http::async_write(c->socket, c->response,
                                         [this, c](boost::system::error_code wec, size_t) {
                                           if (wec || !c->response.keep_alive()) return;
                                           c->Reset();
                                           Read(c);
                                         });
                     });
  }

  // The start of a reply that never ends, then the same filler again and
  // again until a write fails (the client closed).
  void StreamHostileReply(std::shared_ptr<Connection> c) {
    c->hostile = mode == Mode::kEndlessChunkExtension
                     ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext="
                 : mode == Mode::kEndlessHeader
                     ? "HTTP/1.1 200 OK\r\nX-Endless: "
                     : "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n";
    c->filler.assign(64 * 1024, 'a');
    net::async_write(c->socket, net::buffer(c->hostile),
                     [this, c](boost::system::error_code ec, size_t) {
                       if (!ec) StreamFiller(c);
                     });
  }
  void StreamFiller(std::shared_ptr<Connection> c) {
    net::async_write(c->socket, net::buffer(c->filler),
                     [this, c](boost::system::error_code ec, size_t) {
                       if (!ec) StreamFiller(c);
                     });
  }

  std::string Check(const http::request<http::string_body>& req) {
    if (req.method() != http::verb::post) return "method is not POST";
    if (req.target() != "/v1/traces") return "target is not /v1/traces";
    if (req[http::field::content_type] != "application/json") return "content-type is not JSON";
    std::vector<ReceivedSpan> decoded;
    std::string why = DecodeOtlpJson(req.body(), &decoded);
    if (!why.empty()) return why;
    std::lock_guard<std::mutex> lock(mu);
    spans.insert(spans.end(), decoded.begin(), decoded.end());
    return "";
  }

  std::vector<std::shared_ptr<Connection>> hung;  // the io thread's only
};

OtlpCollector::OtlpCollector(Mode mode) : impl_(std::make_unique<Impl>()) {
  impl_->mode = mode;
  impl_->Accept();
  impl_->thread = std::thread([this] { impl_->ioc.run(); });
}

OtlpCollector::~OtlpCollector() {
  impl_->ioc.stop();
  impl_->thread.join();
}

int OtlpCollector::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string OtlpCollector::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port()) + "/v1/traces";
}

std::vector<ReceivedSpan> OtlpCollector::spans() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->spans;
}

std::vector<std::string> OtlpCollector::errors() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->errors;
}

uint64_t OtlpCollector::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->requests;
}

int ClosedLoopbackPort() {
  net::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();  // closed when `a` goes
}

}  // namespace tollgate::testing
