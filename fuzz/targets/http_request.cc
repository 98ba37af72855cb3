// Fuzz target: an HTTP/1.1 request head as tollgated's session reads it
// (server/session.cc), and everything the session derives from it without
// I/O: Beast's header parser under max_header_bytes, the target split, the
// traceparent, the routing inputs of /v1/auth (X-Original-Method and
// X-Original-URI, held to the gateway's origin-form: a path /v1/auth decides on
// is normal, visible ASCII, without an encoded separator), the /v1/explain query, the decision of
// the gateway and of /v1/auth against fuzz/policies/request.json, and the serialized response.
//
// The routing (server/route.h) runs for both listeners under every exposure:
// /v1/decide and /v1/auth are reached only on a main listener that exposes
// decisions, /metrics only on the admin listener or a main one that exposes
// it, the admin endpoints only on the admin listener, the gateway only on a
// gateway's main listener. Then every endpoint's pure part runs for every
// request.
//
// Input: the bytes a client sends first (request line, fields, maybe body).
// Properties: every response tollgated would write (the 400/431 for a bad
// head, a rejection, an explain answer) is one well-framed message; decisions
// hold CheckOutcome's invariants (no CR/LF from request data in a field).
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <boost/beast/http.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_enforcer.h"
#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/endpoints.h"
#include "server/handlers.h"
#include "server/http_util.h"
#include "server/log.h"
#include "server/route.h"
#include "tollgate/request.h"

namespace {

namespace http = boost::beast::http;
using tollgate::HeaderPair;
using tollgate::RequestView;
using tollgate::fuzz::CheckOutcome;
using tollgate::fuzz::CheckSerialized;
using tollgate::fuzz::Quote;
using tollgate::server::Response;

constexpr size_t kMaxHeaderBytes = 16 * 1024;  // ServerConfig's default

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

// Route() under every listener and exposure: each endpoint only where exposed.
void CheckRouting(std::string_view method, std::string_view path) {
  using tollgate::server::Endpoint;
  using tollgate::server::ListenerKind;
  for (int bits = 0; bits < 8; ++bits) {
    tollgate::server::Exposure e;
    e.gateway = bits & 1;
    e.decision = bits & 2;
    e.metrics = bits & 4;
    for (ListenerKind kind : {ListenerKind::kMain, ListenerKind::kAdmin}) {
      const bool main = kind == ListenerKind::kMain;
      const auto r = tollgate::server::Route(kind, method, path, e);
      const std::string where = std::string(main ? "main" : "admin") + " listener, exposure " +
                                std::to_string(bits) + ", " + Quote(method) + " " + Quote(path);
      switch (r.endpoint) {
        case Endpoint::kDecide:
        case Endpoint::kAuth:
          FUZZ_CHECK(main && e.decision, "decision endpoint reached on " + where);
          FUZZ_CHECK(path == (r.endpoint == Endpoint::kDecide ? "/v1/decide" : "/v1/auth"),
                     "decision endpoint for another path on " + where);
          break;
        case Endpoint::kMetrics:
          FUZZ_CHECK(!main || e.metrics, "/metrics reached on " + where);
          FUZZ_CHECK(path == "/metrics", "metrics for another path on " + where);
          break;
        case Endpoint::kAdmin:
          FUZZ_CHECK(!main, "admin endpoint reached on " + where);
          break;
        case Endpoint::kGateway:
          FUZZ_CHECK(main && e.gateway, "gateway reached on " + where);
          break;
        case Endpoint::kHealth:
          FUZZ_CHECK(path == "/healthz" || path == "/readyz", "health for " + where);
          break;
        case Endpoint::kNotFound:
          FUZZ_CHECK(main && !e.gateway, "404 on " + where);
          break;
        default:
          FUZZ_CHECK(false, "unexpected endpoint on " + where);
      }
      FUZZ_CHECK(r.allow.empty() || r.allow == "GET" || r.allow == "POST",
                 "Allow " + Quote(r.allow) + " on " + where);
    }
  }
}

void Decide(tollgate::Enforcer& enforcer, const RequestView& view, bool keep_alive, bool head) {
  const tollgate::CheckOutcome outcome = enforcer.Check(view);
  CheckOutcome(outcome);
  if (!outcome.allowed()) {
    CheckSerialized(tollgate::server::RejectionResponse(outcome), keep_alive, head);
  }
  CheckSerialized(tollgate::server::RenderDecision(outcome), keep_alive, head);
}

// A path /v1/auth decides on is what the gateway would forward: normalised
// (normalising again changes nothing), only visible ASCII, no encoded '/' or '\\'.
void CheckOriginalPath(std::string_view path) {
  const std::string again = tollgate::NormalizePath(path);
  FUZZ_CHECK(again == path,
             "X-Original-URI path not normal: " + Quote(path) + " -> " + Quote(again));
  for (char c : path) {
    const auto b = static_cast<unsigned char>(c);
    FUZZ_CHECK(b > 0x20 && b < 0x7f,
               "X-Original-URI path byte " + std::to_string(b) + " in " + Quote(path));
  }
  FUZZ_CHECK(
      path.find("%2F") == std::string_view::npos && path.find("%5C") == std::string_view::npos,
      "an encoded separator in " + Quote(path));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  http::request_parser<http::empty_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
  boost::beast::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(data, size), ec);
  FUZZ_CHECK(used <= size, "parser consumed more than it was given");
  if (ec == http::error::need_more) return 0;  // the session would read on
  if (ec) {
    // The session's answer to a malformed or oversized head.
    const Response r = ec == http::error::header_limit || ec == http::error::buffer_overflow
                           ? tollgate::server::Problem(431, "Request header fields too large", "")
                           : tollgate::server::Problem(400, "Bad request",
                                                       "malformed HTTP request: " + ec.message());
    CheckSerialized(r, false, false);
    return 0;
  }
  FUZZ_CHECK(parser.is_header_done(), "no error and no header");
  const auto& req = parser.get();
  const bool keep_alive = req.keep_alive();
  const bool head = req.method() == http::verb::head;
  const std::string_view target = View(req.target());
  const tollgate::RequestTarget t = tollgate::SplitTarget(target);
  FUZZ_CHECK(t.path.size() + (t.query.empty() ? 0 : t.query.size() + 1) <= target.size(),
             "split target longer than the target");
  if (auto it = req.find("traceparent"); it != req.end()) {
    const auto trace = tollgate::server::ParseTraceparent(View(it->value()));
    FUZZ_CHECK(trace.trace_id.empty() || trace.trace_id.size() == 32,
               "trace id of " + std::to_string(trace.trace_id.size()) + " characters");
  }
  CheckRouting(View(req.method_string()), t.path);
  std::vector<HeaderPair> headers;
  for (const auto& f : req) headers.emplace_back(View(f.name_string()), View(f.value()));

  auto env = tollgate::fuzz::FreshEnforcer();
  tollgate::Enforcer& enforcer = *env->enforcer;
  constexpr std::string_view kPeers[] = {"203.0.113.9", "10.1.2.3", "::1", "2001:db8::7"};
  const std::string_view peer = kPeers[size % 4];

  // The gateway's decision.
  RequestView gateway;
  gateway.method = View(req.method_string());
  gateway.path = t.path;
  gateway.query = t.query;
  gateway.peer_address = peer;
  gateway.headers = headers;
  Decide(enforcer, gateway, keep_alive, head);

  // /v1/auth: the original request comes in X-Original-Method / X-Original-URI,
  // brought to the gateway's origin-form or refused (400).
  std::string original_target;
  RequestView auth;
  const std::string refused = tollgate::server::AuthSubject(gateway, &original_target, &auth);
  if (!refused.empty()) {
    CheckSerialized(tollgate::server::Problem(400, "Bad request", refused), keep_alive, head);
  } else {
    CheckOriginalPath(auth.path);
    Decide(enforcer, auth, keep_alive, head);
  }

  // /v1/explain?method=&path=&header=&ip=: the query describes a request.
  tollgate::server::DescribedRequest described;
  const auto errors = tollgate::server::ParseExplainQuery(t.query, &described);
  if (!errors.empty()) {
    CheckSerialized(tollgate::server::Problem(400, "Invalid explain query", "see errors", errors),
                    keep_alive, head);
  } else {
    const RequestView view = described.View();
    const tollgate::CheckOutcome outcome = enforcer.Explain(view);
    CheckOutcome(outcome);
    CheckSerialized(tollgate::server::RenderExplain(outcome, described, enforcer.ClientIp(view),
                                                    tollgate::IdentityRedactor(), size % 2 == 0),
                    keep_alive, head);
  }
  return 0;
}
