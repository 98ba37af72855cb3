// Fuzz target: the gateway's hand-written HTTP/1.1 rewriting (server/
// proxy_wire.cc), both directions, as proxy.cc's fast path uses it.
//
// Input: the client's request head, a NUL byte, then the upstream's response
// (head and body).
// Properties (round trip through Beast's strict parser):
//   - a bodyless client request that the session accepts (AcceptRequestHead,
//     tollgate/http_framing.h: unambiguous framing, target brought to a
//     normalised origin-form) and that AppendUpstreamRequestHead rewrites is
//     exactly one bodyless request upstream, consuming every byte, with the
//     same method, the base path + the accepted target (a normalised path
//     under the base path, or "*"), one Host (the upstream's), no
//     Transfer-Encoding, at most "Content-Length: 0", and the peer last in
//     X-Forwarded-For (the only entry when the peer is not trusted), and, when
//     the gateway names its decision span, exactly one traceparent: that one;
//   - an upstream response with unambiguous framing (CheckFraming) that
//     UpstreamResponseHead calls Relayable, rewritten by
//     AppendClientResponseHead and followed by its body, is exactly one
//     response to the client, with the same status and body, framed by the
//     same Content-Length, carrying tollgate's rate-limit fields once after
//     the upstream's own RateLimit/RateLimit-Policy lines;
//   - the client's bytes read as a target: when IsPlainOriginForm says it needs
//     no rewriting, NormalizePath (the independent reference) leaves its path
//     as it is and ToOriginForm returns it unchanged.
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <boost/beast/http.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/config.h"
#include "server/proxy_wire.h"
#include "tollgate/http_framing.h"
#include "tollgate/request.h"

namespace {

namespace http = boost::beast::http;
using tollgate::fuzz::Quote;
using tollgate::server::RelayScratch;

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

const tollgate::server::UpstreamUrl& Upstream(bool with_base) {
  static const auto make = [](const char* url) {
    tollgate::server::UpstreamUrl u;
    std::string why;
    FUZZ_CHECK(tollgate::server::ParseUpstreamUrl(url, &u, &why), why);
    return u;
  };
  static const tollgate::server::UpstreamUrl plain = make("http://127.0.0.1:8081");
  static const tollgate::server::UpstreamUrl based = make("http://backend.internal:9000/app");
  return with_base ? based : plain;
}

// The traceparent of a sampled decision span, as the gateway forwards it.
constexpr std::string_view kDecisionSpan =
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

void CheckRequest(std::string_view client, bool with_base, bool trusted, bool traced) {
  http::request_parser<http::empty_body> parser;
  parser.header_limit(16 * 1024);
  boost::beast::error_code ec;
  const size_t head_size = parser.put(boost::asio::buffer(client.data(), client.size()), ec);
  if (ec || !parser.is_done()) return;  // malformed, incomplete, or with a body (streamed)
  auto& req = parser.get();
  if (tollgate::AcceptRequestHead(client.substr(0, head_size), req)) return;  // 400
  const std::string_view accepted = View(req.target());
  FUZZ_CHECK(accepted == "*" || tollgate::NormalizePath(accepted.substr(0, accepted.find('?'))) ==
                                    accepted.substr(0, accepted.find('?')),
             "accepted target is not normalised: " + Quote(accepted));
  const auto& upstream = Upstream(with_base);
  std::string out;
  if (!tollgate::server::AppendUpstreamRequestHead(req, "203.0.113.9", trusted, upstream, &out,
                                                   traced ? kDecisionSpan : std::string_view())) {
    return;
  }

  http::request_parser<http::empty_body> again;
  again.header_limit(1 << 20);
  const size_t used = again.put(boost::asio::buffer(out.data(), out.size()), ec);
  FUZZ_CHECK(!ec, "upstream request does not parse (" + ec.message() + "): " + Quote(out, 2000));
  FUZZ_CHECK(again.is_done(), "upstream request has a body: " + Quote(out, 2000));
  FUZZ_CHECK(used == out.size(), "bytes after the upstream request: " + Quote(out.substr(used)));
  const auto& fwd = again.get();
  FUZZ_CHECK(fwd.method_string() == req.method_string(), "method changed");
  FUZZ_CHECK(View(fwd.target()) ==
                 (accepted == "*" ? std::string("*") : upstream.base_path + std::string(accepted)),
             "target changed: " + Quote(View(fwd.target())));
  FUZZ_CHECK(fwd.find(http::field::transfer_encoding) == fwd.end(), "Transfer-Encoding upstream");
  size_t lengths = 0;
  for (const auto& f : fwd) {
    if (f.name() != http::field::content_length) continue;
    ++lengths;
    FUZZ_CHECK(View(f.value()) == "0", "Content-Length upstream is not 0");
  }
  FUZZ_CHECK(lengths <= 1, "Content-Length sent twice upstream");
  size_t hosts = 0;
  for (const auto& f : fwd) {
    if (f.name() == http::field::host) {
      ++hosts;
      FUZZ_CHECK(View(f.value()) == upstream.host_header, "Host is not the upstream's");
    }
  }
  FUZZ_CHECK(hosts == 1, std::to_string(hosts) + " Host fields upstream");
  auto xff = fwd.find("X-Forwarded-For");
  FUZZ_CHECK(xff != fwd.end(), "no X-Forwarded-For");
  std::string_view last = View(xff->value());
  for (auto it = xff; it != fwd.end(); ++it) {
    if (it->name_string() == xff->name_string()) last = View(it->value());
  }
  FUZZ_CHECK(last.ends_with("203.0.113.9"), "peer not last in X-Forwarded-For");
  if (!trusted) FUZZ_CHECK(last == "203.0.113.9", "an untrusted peer's X-Forwarded-For kept");
  if (traced) {
    size_t parents = 0;
    for (const auto& f : fwd) {
      if (!boost::beast::iequals(f.name_string(), "traceparent")) continue;
      ++parents;
      FUZZ_CHECK(View(f.value()) == kDecisionSpan,
                 "a request's traceparent forwarded: " + Quote(View(f.value())));
    }
    FUZZ_CHECK(parents == 1, std::to_string(parents) + " traceparent fields upstream");
  }
}

void CheckResponse(std::string_view upstream, bool keep_alive, unsigned version) {
  if (upstream.size() > RelayScratch::kBufferSize)
    upstream = upstream.substr(0, RelayScratch::kBufferSize);
  std::vector<tollgate::server::FieldView> fields;
  tollgate::server::UpstreamResponseHead head(&fields);
  if (head.Parse(upstream) != tollgate::server::UpstreamResponseHead::State::kComplete) return;
  FUZZ_CHECK(head.header_size() <= upstream.size(), "header larger than the input");
  if (tollgate::CheckFraming(upstream.substr(0, head.header_size()),
                             tollgate::MessageKind::kResponse) != tollgate::HttpFramingError::kOk) {
    return;  // 502
  }
  if (!head.Relayable()) return;
  const size_t whole = head.header_size() + head.body_size();
  if (whole > upstream.size()) return;  // the proxy would read on (or stream it)
  const std::string_view body = upstream.substr(head.header_size(), head.body_size());
  const std::vector<tollgate::HeaderField> added = {
      {"RateLimit-Policy", "\"free\";q=20;w=1"},
      {"RateLimit", "\"free\";r=19;t=1"},
  };
  std::string out;
  tollgate::server::AppendClientResponseHead(head, added, keep_alive, version, &out);
  out.append(body);
  tollgate::fuzz::CheckOneResponse(out, head.status(), body, /*head=*/false);
  // tollgate's fields once each, last, after the upstream's own lines (kept).
  http::response_parser<http::string_body> p;
  p.header_limit(1 << 20);
  boost::beast::error_code ec;
  p.put(boost::asio::buffer(out.data(), out.size()), ec);
  for (const auto& a : added) {
    size_t theirs = 0;
    for (const auto& f : head.fields()) theirs += boost::beast::iequals(f.name, a.name) ? 1 : 0;
    size_t n = 0;
    std::string_view last;
    for (const auto& f : p.get()) {
      if (!boost::beast::iequals(f.name_string(), a.name)) continue;
      ++n;
      last = View(f.value());
    }
    FUZZ_CHECK(n == theirs + 1, a.name + " sent " + std::to_string(n) + " times");
    FUZZ_CHECK(last == a.value, a.name + ": tollgate's item is not last");
  }
}

}  // namespace

void CheckPlainTarget(std::string_view target) {
  if (!tollgate::IsPlainOriginForm(target)) return;
  const std::string_view path = target.substr(0, target.find('?'));
  FUZZ_CHECK(tollgate::NormalizePath(path) == path,
             "a plain target's path is not normal: " + Quote(target));
  std::string out;
  FUZZ_CHECK(tollgate::ToOriginForm("GET", target, "h", &out) == tollgate::HttpFramingError::kOk &&
                 out == target,
             "a plain target is rewritten: " + Quote(target) + " -> " + Quote(out));
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const std::string_view client = in.Until('\0');
  const std::string_view upstream = in.Rest();
  CheckRequest(client, mode & 1, mode & 8, mode & 16);
  CheckPlainTarget(client);
  CheckResponse(upstream, mode & 2, mode & 4 ? 10 : 11);
  return 0;
}
