// Rate limiting for Boost.Beast request handlers (header-only adapter).
//
// Two ways to use it:
//
//  1. Around a handler that returns a string_body response:
//       auto limited = tollgate::middleware::BeastRateLimited(enforcer, handle_request);
//       http::response<http::string_body> res = limited(req, peer_ip);
//     The 429 (or 503) is produced without calling `handle_request`; allowed
//     responses get the rate-limit headers added.
//
//  2. Step by step, for any body type or an asynchronous session:
//       auto check = tollgate::middleware::CheckBeastRequest(enforcer, req, peer_ip);
//       if (!check.allowed()) return send(check.Rejection(req.version(), req.keep_alive()));
//       // check.delay() > 0: a leaky-bucket shaper asks to wait (e.g. a steady_timer)
//       auto res = handle_request(std::move(req));
//       check.Decorate(res);
//       check.ReportUpstream(enforcer, res.result_int(), handler_time);  // rollback guards
//       check.Settle(enforcer, res);  // cost after the response, refunds (if any)
//     CheckBeastRequestAsync() does the same through Enforcer::CheckAsync, so a
//     Redis-backed decision never blocks the session's executor.
//
// Cost after the response and refunds: Settle() hands the response's status
// and the fields the rules read (cost_source "response_header:<name>") to
// Enforcer::SettleAsync, with the cost the handler reports for cost_source
// "handler"; BeastRateLimited does it after the handler. An allowed check
// never settled keeps its up-front charges.
//
// Call it before authentication, so a throttled client costs no credential check.
// The adapter holds no rate-limit logic: it fills a tollgate::RequestView (raw
// request-target path and query, the peer address you pass: Beast requests do
// not carry it; for body:<JSON pointer> sources, a string_body's JSON body of
// at most kBodyKeyBytes, read whole by you before the check) and renders the
// Enforcer's CheckOutcome.
//
// Concurrency rules: a BeastCheck holds the request's leases until it is
// destroyed (BeastRateLimited: when the handler returns).
// Thread safety: the Enforcer is thread-safe; BeastCheck is a move-only value.
// Ownership: `enforcer` is borrowed and must outlive every call and wrapper. The
// request is only read during CheckBeastRequest / before CheckBeastRequestAsync
// returns. Errors: never throws; store failures arrive as the Enforcer's outcome
// (503 when fail-closed).
#ifndef TOLLGATE_MIDDLEWARE_BEAST_H_
#define TOLLGATE_MIDDLEWARE_BEAST_H_

#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "tollgate/http_text.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"
#include "tollgate/request_body.h"

namespace tollgate::middleware {

namespace beast_http = boost::beast::http;

// The outcome of checking one Beast request. It holds the concurrency leases
// of an allowed request and gives them back when it is destroyed (RAII): keep
// it alive until the handler has returned. Move-only.
class BeastCheck {
 public:
  explicit BeastCheck(CheckOutcome outcome) : outcome_(std::move(outcome)) {}
  BeastCheck(CheckOutcome outcome, Enforcer& enforcer)
      : outcome_(std::move(outcome)), leases_(enforcer, std::move(outcome_.leases)) {}

  bool allowed() const { return outcome_.allowed(); }
  const CheckOutcome& outcome() const { return outcome_; }
  // Leaky-bucket shaping: run the handler only after this delay (zero otherwise).
  Nanos delay() const { return outcome_.delay; }

  // The response to send instead of calling the handler (meaningful when !allowed()):
  // 429 or 503, the policy's headers (RateLimit, Retry-After, Cache-Control:
  // no-store, Content-Type) and its problem+json body.
  beast_http::response<beast_http::string_body> Rejection(unsigned version, bool keep_alive) const {
    beast_http::response<beast_http::string_body> res{
        static_cast<beast_http::status>(outcome_.http_status), version};
    for (const auto& h : outcome_.headers) res.insert(h.name, h.value);
    res.keep_alive(keep_alive);
    res.body() = outcome_.body;
    res.prepare_payload();
    return res;
  }

  // Sets the rate-limit headers on the handler's response (the allowed path).
  // The fields tollgate renders replace any the handler set under the same
  // names (no duplicated RateLimit lines); a name the policy renders more than
  // once keeps all of its lines.
  template <class Body, class Fields>
  void Decorate(beast_http::response<Body, Fields>& res) const {
    for (const auto& h : outcome_.headers) res.erase(h.name);
    for (const auto& h : outcome_.headers) res.insert(h.name, h.value);
  }

  // Reports the handler's answer to the rollback guards that watch the
  // upstream (Enforcer::RecordUpstream): its status and how long the handler
  // took (negative: unknown). BeastRateLimited calls it; a step-by-step
  // session calls it once it has the response. No-op unless a rule watches.
  void ReportUpstream(Enforcer& enforcer, unsigned status, Nanos handler_time) const {
    for (const RuleOutcome& r : outcome_.rules) {
      if (!r.watches_upstream) continue;
      enforcer.RecordUpstream(outcome_, static_cast<int>(status), handler_time);
      return;
    }
  }

  // Settles an allowed request once its response is known (never blocks; a
  // second call does nothing). `handler_cost`: for cost_source "handler".
  template <class Body, class Fields>
  void Settle(Enforcer& enforcer, const beast_http::response<Body, Fields>& res,
              std::optional<int64_t> handler_cost = std::nullopt) {
    if (!outcome_.settlement) return;
    ResponseOutcome done;
    done.status = res.result_int();
    done.handler_cost = handler_cost;
    for (const std::string& name : outcome_.settlement->response_fields()) {
      auto it = res.find(name);
      if (it != res.end()) done.fields.push_back({name, std::string(it->value())});
    }
    enforcer.SettleAsync(std::move(outcome_.settlement), std::move(done));
  }

 private:
  CheckOutcome outcome_;
  LeaseRelease leases_;  // released when the check goes out of scope
};

namespace internal {

// Owns the header pairs a RequestView points into.
template <class Body, class Fields>
struct BeastRequestView {
  BeastRequestView(const beast_http::request<Body, Fields>& req, std::string_view peer) {
    for (const auto& field : req) {
      const auto name = field.name_string();
      const auto value = field.value();
      headers.emplace_back(std::string_view(name.data(), name.size()),
                           std::string_view(value.data(), value.size()));
    }
    const auto method = req.method_string();
    const auto target = req.target();
    auto [path, query] = SplitTarget(std::string_view(target.data(), target.size()));
    view.method = std::string_view(method.data(), method.size());
    view.path = path;
    view.query = query;
    view.peer_address = peer;
    // body: sources read a string_body's JSON within kBodyKeyBytes; any other
    // body type, Content-Type or size leaves them absent.
    if constexpr (std::is_same_v<Body, beast_http::string_body>) {
      const auto type = req.find(beast_http::field::content_type);
      if (type != req.end() &&
          IsJsonContentType(std::string_view(type->value().data(), type->value().size())) &&
          !req.body().empty() && req.body().size() <= kBodyKeyBytes) {
        headers.push_back(RequestBodyField(req.body()));
      }
    }
    view.headers = headers;
  }
  std::vector<HeaderPair> headers;
  RequestView view;
};

}  // namespace internal

// Decides `req` (blocking on the store: nanoseconds locally, a round trip on Redis).
// `peer_address` is the TCP peer's IP without port (socket.remote_endpoint().address()).
template <class Body, class Fields>
BeastCheck CheckBeastRequest(Enforcer& enforcer, const beast_http::request<Body, Fields>& req,
                             std::string_view peer_address) {
  internal::BeastRequestView<Body, Fields> adapted(req, peer_address);
  return BeastCheck(enforcer.Check(adapted.view), enforcer);
}

// Decides `req` without blocking: `done(BeastCheck)` runs exactly once, inline or
// on a store thread (post back to your executor before touching the socket).
template <class Body, class Fields, class Done>
void CheckBeastRequestAsync(Enforcer& enforcer, const beast_http::request<Body, Fields>& req,
                            std::string_view peer_address, Done done) {
  internal::BeastRequestView<Body, Fields> adapted(req, peer_address);
  enforcer.CheckAsync(adapted.view,
                      [&enforcer, done = std::move(done)](CheckOutcome outcome) mutable {
                        done(BeastCheck(std::move(outcome), enforcer));
                      });
}

struct BeastOptions {
  // Exact paths that are never rate-limited (health checks, metrics).
  std::vector<std::string> skip_paths = {};
  // Wait out leaky-bucket shaping delays before calling the handler.
  bool apply_delay = true;
  // How to wait (tests inject one); default: std::this_thread::sleep_for.
  std::function<void(Nanos)> wait = nullptr;
};

// Wraps `handler`, callable as handler(const request&) -> response<string_body>,
// into a callable (const request&, std::string_view peer) -> response<string_body>
// that rate-limits first. For synchronous (thread-per-connection) servers.
template <class Handler>
auto BeastRateLimited(Enforcer& enforcer, Handler handler, BeastOptions options = {}) {
  return [&enforcer, handler = std::move(handler), options = std::move(options)](
             const auto& req, std::string_view peer_address) {
    const auto target = req.target();
    const auto path = SplitTarget(std::string_view(target.data(), target.size())).path;
    for (const auto& skip : options.skip_paths) {
      if (path == skip) return handler(req);
    }
    BeastCheck check = CheckBeastRequest(enforcer, req, peer_address);
    if (!check.allowed()) return check.Rejection(req.version(), req.keep_alive());
    if (options.apply_delay && check.delay() > Nanos(0)) {
      if (options.wait) {
        options.wait(check.delay());
      } else {
        std::this_thread::sleep_for(check.delay());
      }
    }
    const auto started = std::chrono::steady_clock::now();
    auto res = handler(req);
    check.Decorate(res);
    check.ReportUpstream(enforcer, res.result_int(), std::chrono::steady_clock::now() - started);
    check.Settle(enforcer, res);
    return res;
  };
}

}  // namespace tollgate::middleware

#endif  // TOLLGATE_MIDDLEWARE_BEAST_H_
