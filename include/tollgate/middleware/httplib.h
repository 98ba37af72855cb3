// Rate limiting for cpp-httplib servers (header-only adapter).
//
//   auto enforcer = tollgate::Enforcer::Create(policies, store.get(), &clock);
//   httplib::Server server;
//   tollgate::middleware::InstallHttplib(server, **enforcer, {}, authenticate);
//
// The adapter holds no rate-limit logic: it turns the httplib::Request into a
// tollgate::RequestView, asks Enforcer::Check, and either answers the request
// itself (429, or 503 when a fail-closed store cannot decide) with the policy's
// headers and problem+json body, or adds the rate-limit headers to the response
// the route handler will fill, and lets routing continue.
//
// Ordering: InstallHttplib registers the limiter as the pre-routing handler, so it
// runs before every route; pass your authentication as `next` and it runs only
// for allowed requests (a throttled client costs no credential check, as the
// seeds advise). httplib has one pre-routing slot: InstallHttplib takes it.
//
// Concurrency rules: an allowed request's leases are held until FinishHttplib
// (post-routing, after the handler returned); compose by hand, and call it.
// Header ownership: the fields tollgate renders (RateLimit, RateLimit-Policy, ...)
// appear once on every response. httplib's Response::set_header appends, so a
// handler that sets one of them too would duplicate it; InstallHttplib also takes
// the post-routing slot and there FinishHttplib erases those names and sets
// tollgate's values again (tollgate's values win, as in the Beast adapter; a name
// the policy renders more than once keeps all of its lines). Composing by hand:
// call HandleHttplib in your pre-routing handler and FinishHttplib in your
// post-routing handler (on the same thread: httplib runs both on the request's).
//
// Rollback guard: when a rule's guard watches the upstream (rollback
// max_upstream_error_increase or max_upstream_p99_ms), FinishHttplib reports
// the handler's status and the time from HandleHttplib's return to
// FinishHttplib (Enforcer::RecordUpstream), so a handler answering 5xx or
// slowly trips the rule like a gateway's upstream. Without FinishHttplib (a
// hand-made composition that skips it) nothing is reported.
//
// Requests: the path is the raw request-target path (not percent-decoded, the
// same bytes tollgated sees), the query is the raw query string, the peer is
// Request::remote_addr; trusted proxies are configured on the Enforcer.
// body:<JSON pointer> sources are absent under InstallHttplib: httplib reads
// the body after pre-routing. A HandleHttplib called where Request::body is
// read (inside a route) hands a JSON body of at most kBodyKeyBytes to them.
// Rejections of requests that carry a body close the connection: the body was
// not read (httplib reads it after pre-routing), so the connection cannot be reused.
// Shaping: a leaky-bucket shaper's delay is waited out on the connection's
// thread (httplib is thread-per-connection) unless `apply_delay` is false.
// Cost after the response and refunds: FinishHttplib settles an allowed
// request (Enforcer::SettleAsync, never blocking) with the handler's status
// and the response fields the rules read (cost_source
// "response_header:<name>": the handler sets that header); a rule with
// cost_source "handler" is charged what the handler passed to
// ReportHttplibCost on the request's thread.
//
// Build: include after compiling with cpp-httplib's own flags (pkg-config
// cpp-httplib: Debian's library is built with OpenSSL, zlib and brotli support,
// and Request's layout depends on those macros) and link tollgate::tollgate.
// Thread safety: the installed handler runs on httplib's worker threads; the
// Enforcer is thread-safe. Ownership: `enforcer` is borrowed and must outlive the
// server. Errors: never throws; store failures arrive as the Enforcer's outcome.
#ifndef TOLLGATE_MIDDLEWARE_HTTPLIB_H_
#define TOLLGATE_MIDDLEWARE_HTTPLIB_H_

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tollgate/http_text.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"
#include "tollgate/request_body.h"

namespace tollgate::middleware {

struct HttplibOptions {
  // Exact paths that are never rate-limited (health checks, metrics).
  std::vector<std::string> skip_paths = {};
  // Wait out leaky-bucket shaping delays before the handler runs.
  bool apply_delay = true;
  // How to wait (tests inject one); default: std::this_thread::sleep_for.
  std::function<void(Nanos)> wait = nullptr;
  // Called with every outcome (logging, metrics); must be thread-safe.
  std::function<void(const httplib::Request&, const CheckOutcome&)> observe = nullptr;
};

namespace detail {
// The headers HandleHttplib set on the response being served on this thread,
// for FinishHttplib (httplib serves a request's pre- and post-routing on one thread).
struct HttplibPending {
  const httplib::Response* res = nullptr;
  std::vector<std::pair<std::string, std::string>> headers;
  LeaseRelease leases;           // the allowed request's concurrency leases, until FinishHttplib
  Enforcer* enforcer = nullptr;  // set for an allowed request
  std::shared_ptr<Settlement> settlement;  // the allowed request's, if its rules settle
  std::optional<int64_t> handler_cost;     // ReportHttplibCost
  // Set when a rule watches the upstream: the outcome to report and when the handler started.
  bool watches_upstream = false;
  CheckOutcome outcome;
  std::chrono::steady_clock::time_point started;
};
inline HttplibPending& PendingHttplib() {
  thread_local HttplibPending pending;
  return pending;
}
}  // namespace detail

// Decides one request. Returns Handled when `res` now holds the rejection (the
// route must not run); otherwise the rate-limit headers were added to `res` and
// it returns Unhandled.
inline httplib::Server::HandlerResponse HandleHttplib(Enforcer& enforcer,
                                                      const httplib::Request& req,
                                                      httplib::Response& res,
                                                      const HttplibOptions& options = {}) {
  using HandlerResponse = httplib::Server::HandlerResponse;
  detail::HttplibPending& pending = detail::PendingHttplib();
  pending.res = nullptr;
  pending.headers.clear();
  pending.leases = LeaseRelease();  // a previous request's, if its post-routing never ran
  pending.enforcer = nullptr;
  pending.settlement.reset();
  pending.handler_cost.reset();
  pending.watches_upstream = false;
  auto [path, query] =
      SplitTarget(req.target.empty() ? std::string_view(req.path) : std::string_view(req.target));
  for (const auto& skip : options.skip_paths) {
    if (path == skip) return HandlerResponse::Unhandled;
  }
  std::vector<HeaderPair> headers;
  headers.reserve(req.headers.size());
  for (const auto& [name, value] : req.headers) headers.emplace_back(name, value);
  RequestView view;
  view.method = req.method;
  view.path = path;
  view.query = query;
  view.peer_address = req.remote_addr;
  // body: sources: a JSON body already read (not at pre-routing, see above).
  if (!req.body.empty() && req.body.size() <= kBodyKeyBytes &&
      IsJsonContentType(req.get_header_value("Content-Type"))) {
    headers.push_back(RequestBodyField(req.body));
  }
  view.headers = headers;

  CheckOutcome outcome = enforcer.Check(view);
  if (options.observe) options.observe(req, outcome);

  if (!outcome.allowed()) {
    res.status = outcome.http_status;
    std::string content_type = "application/problem+json";
    for (const auto& h : outcome.headers) {
      if (EqualsIgnoreCase(h.name, "Content-Type")) {
        content_type = h.value;
      } else {
        res.set_header(h.name, h.value);
      }
    }
    const bool has_body = req.has_header("Content-Length")
                              ? req.get_header_value("Content-Length") != "0"
                              : req.has_header("Transfer-Encoding");
    if (has_body) res.set_header("Connection", "close");
    res.set_content(outcome.body, content_type);
    return HandlerResponse::Handled;
  }
  for (const auto& h : outcome.headers) {
    res.set_header(h.name, h.value);
    pending.headers.emplace_back(h.name, h.value);
  }
  pending.res = &res;
  pending.leases = LeaseRelease(enforcer, std::move(outcome.leases));
  pending.enforcer = &enforcer;
  pending.settlement = std::move(outcome.settlement);
  if (options.apply_delay && outcome.delay > Nanos(0)) {
    if (options.wait) {
      options.wait(outcome.delay);
    } else {
      std::this_thread::sleep_for(outcome.delay);
    }
  }
  for (const RuleOutcome& r : outcome.rules) {
    if (!r.watches_upstream) continue;
    pending.watches_upstream = true;
    pending.outcome = outcome;
    pending.started = std::chrono::steady_clock::now();
    break;
  }
  return HandlerResponse::Unhandled;
}

// After the handler (post-routing): replaces whatever the handler set under the
// names HandleHttplib set on this response with tollgate's values, settles the
// request's charges (cost after the response, refunds), reports the handler's
// status and time to the rollback guards that watch the upstream, and gives
// the request's concurrency leases back.
// No-op for a response HandleHttplib did not decorate (skipped paths, rejections).
inline void FinishHttplib(const httplib::Request&, httplib::Response& res) {
  detail::HttplibPending& pending = detail::PendingHttplib();
  if (pending.res != &res) return;
  if (pending.settlement) {
    ResponseOutcome done;
    done.status = res.status;
    done.handler_cost = pending.handler_cost;
    for (const std::string& name : pending.settlement->response_fields()) {
      if (res.has_header(name)) done.fields.push_back({name, res.get_header_value(name)});
    }
    pending.enforcer->SettleAsync(std::move(pending.settlement), std::move(done));
  }
  for (const auto& [name, value] : pending.headers) res.headers.erase(name);
  for (const auto& [name, value] : pending.headers) res.set_header(name, value);
  if (pending.watches_upstream) {
    pending.enforcer->RecordUpstream(pending.outcome, res.status,
                                     std::chrono::steady_clock::now() - pending.started);
    pending.watches_upstream = false;
    pending.outcome = CheckOutcome{};
  }
  pending.enforcer = nullptr;
  pending.res = nullptr;
  pending.headers.clear();
  pending.leases = LeaseRelease();  // the handler returned: give the leases back
}

// Reports the cost of the request being handled on this thread, for rules
// with cost_source "handler" (settled by FinishHttplib). Call from the route
// handler; the last call wins.
inline void ReportHttplibCost(int64_t cost) { detail::PendingHttplib().handler_cost = cost; }

// Installs the limiter as `server`'s pre-routing handler and FinishHttplib as its
// post-routing handler; `next` (e.g. authentication), if given, runs after the
// limiter for allowed requests only.
inline void InstallHttplib(httplib::Server& server, Enforcer& enforcer, HttplibOptions options = {},
                           httplib::Server::HandlerWithResponse next = nullptr) {
  server.set_pre_routing_handler([&enforcer, options = std::move(options), next = std::move(next)](
                                     const httplib::Request& req, httplib::Response& res) {
    const auto r = HandleHttplib(enforcer, req, res, options);
    if (r == httplib::Server::HandlerResponse::Handled || !next) return r;
    return next(req, res);
  });
  server.set_post_routing_handler(FinishHttplib);
}

}  // namespace tollgate::middleware

#endif  // TOLLGATE_MIDDLEWARE_HTTPLIB_H_
