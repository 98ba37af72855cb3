#include "server/endpoints.h"

#include <array>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

#include "server/admin_guard.h"
#include "server/handlers.h"
#include "server/key_admin.h"
#include "server/rollback_admin.h"
#include "server/secrets.h"
#include "server/status_page.h"
#include "tollgate/http_framing.h"

namespace tollgate::server {
namespace {

namespace net = boost::asio;

// Awaits Enforcer::CheckAsync; the completion is posted back to `ex`.
template <typename Token>
auto AsyncCheck(Enforcer& enforcer, const RequestView& view, net::any_io_executor ex,
                Token&& token) {
  return net::async_initiate<Token, void(CheckOutcome)>(
      [&enforcer, &view, ex](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        enforcer.CheckAsync(view, [h, ex](CheckOutcome outcome) {
          net::post(ex, [h, o = std::move(outcome)]() mutable { (*h)(std::move(o)); });
        });
      },
      token);
}

// A sampled span's start, or an unsampled one when tracing is off.
DecisionTracer::Active BeginSpan(const Runtime& rt, const RequestTrace* trace) {
  if (!rt.tracer) return {};
  if (!trace) return rt.tracer->Begin(nullptr, false);
  return rt.tracer->Begin(trace->parent(), trace->parent_trusted());
}

// A reload or a policy write may wait on etcd: on the state's source
// executor, so a slow or frozen etcd member never holds up the worker.
net::awaitable<Response> Reload(const Request&, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->source_executor, [&rt] { return HandleReload(rt); });
}

// The main listener says whether it is ready, nothing more; the admin
// listener adds what an operator needs (policy, store, rolled-back rules).
net::awaitable<Response> Readyz(const Request& request, const Runtime& rt) {
  co_return HandleReadyz(rt, request.listener == ListenerKind::kAdmin);
}

// Handlers that need neither the request nor a suspension point.
template <Response (*F)(const Runtime&)>
net::awaitable<Response> Plain(const Request&, const Runtime& rt) {
  co_return F(rt);
}

net::awaitable<Response> Top(const Request& request, const Runtime& rt) {
  co_return HandleTop(rt, request.view.query, MayShowRaw(request.view, rt));
}

net::awaitable<Response> Explain(const Request& request, const Runtime& rt) {
  const std::string_view query = request.view.query;
  const bool raw = RawRequested(query);
  if (raw && !MayShowRaw(request.view, rt)) co_return RawNeedsToken();
  DescribedRequest d;
  std::vector<ConfigError> errors = ParseExplainQuery(query, &d);
  if (!errors.empty()) co_return Problem(400, "Invalid explain query", "see errors", errors);
  RequestView view = d.View();
  CheckOutcome outcome = rt.enforcer->Explain(view);
  co_return RenderExplain(outcome, d, rt.enforcer->ClientIp(view), rt.identities, raw);
}

net::awaitable<Response> Auth(const Request& request, const Runtime& rt) {
  std::string target;
  RequestView view;
  if (std::string why = AuthSubject(request.view, &target, &view); !why.empty()) {
    co_return Problem(400, "Bad request", why);
  }
  // Decided inline when the store answers inline: no coroutine frame. (An
  // if, not ?: around the co_await: GCC 12 destroys such a temporary twice.)
  CheckOutcome outcome;
  if (rt.async_decisions) {
    outcome = co_await DecideAndRecord(rt, *request.shard, view, request.trace);
  } else {
    outcome = DecideAndRecordNow(rt, *request.shard, view, request.trace);
  }
  Response resp;
  resp.headers = std::move(outcome.headers);  // the outcome's vector, not a copy
  // A 403/204 carries no body: the problem body's type would mislead.
  std::erase_if(resp.headers,
                [](const HeaderField& h) { return EqualsIgnoreCase(h.name, "content-type"); });
  if (outcome.allowed()) {
    resp.status = 204;
    resp.delay = outcome.delay;  // the shaper's: waited out before the answer
  } else {
    resp.status = 403;
    resp.headers.push_back(
        {"X-RateLimit-Decision",
         outcome.verdict == CheckOutcome::Verdict::kReject ? "reject" : "unavailable"});
    // The status the gateway would answer (429, 503, or a rule's "response"
    // status): nginx only passes 401/403 from auth_request, its config maps this one.
    resp.headers.push_back({"X-RateLimit-Status", std::to_string(outcome.http_status)});
  }
  co_return resp;
}

net::awaitable<Response> DecideBody(const Request& request, const Runtime& rt) {
  DecideInput input;
  std::vector<ConfigError> errors = ParseDecideBody(request.body, &input);
  if (!errors.empty()) co_return Problem(400, "Invalid decision request", "see errors", errors);
  if (input.request) {
    RequestView view = input.request->View();
    CheckOutcome outcome = co_await DecideAndRecord(rt, *request.shard, view, request.trace);
    co_return RenderDecision(outcome);
  }
  if (input.has_limits) {
    // A per-item limit replaces the policy's: only a caller holding a
    // write-scoped admin token may set one (without a token configured, nobody may).
    const AdminToken* caller = CallerToken(request.view, rt);
    if (caller == nullptr || caller->scope != AdminScope::kWrite) {
      co_return Problem(403, "Per-item limits need a write-scoped admin token",
                        rt.admin_tokens->empty()
                            ? "no admin token is configured (admin.token_file, admin.tokens)"
                        : caller == nullptr ? "send Authorization: Bearer <admin token>"
                                            : "the token \"" + caller->name + "\" has scope read");
    }
  }
  const int64_t t0 = rt.clock->Now();
  DecisionTracer::Active span = BeginSpan(rt, request.trace);
  Result<CheckOutcome> outcome = rt.enforcer->CheckItems(input.items);
  if (!outcome.ok()) {
    co_return Problem(400, "Invalid decision request", outcome.status().message(),
                      ItemErrors(outcome.status().message()));
  }
  RecordOutcome(rt, *request.shard, *outcome, rt.clock->Now() - t0, nullptr, request.trace_id);
  if (span.sampled) rt.tracer->End(span, *outcome);
  co_return RenderDecision(*outcome);
}

net::awaitable<Response> PolicyApi(const Request& request, const Runtime& rt) {
  if (request.view.method != "PUT") co_return HandlePolicy(rt);
  co_return co_await OffWorker(rt.state->source_executor, [&] {
    return HandlePolicyPut(rt, request.body, request.view.query, AdminActor(request.view, rt));
  });
}

// On a fleet the action is sent to Redis at once: off the worker.
template <bool kTrip>
net::awaitable<Response> RollbackAction(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor, [&] {
    const AdminToken* caller = CallerToken(request.view, rt);
    return HandleRollbackAction(rt, kTrip, request.view.query, request.view.peer_address,
                                caller ? std::string_view(caller->name) : "", request.trace_id);
  });
}

// Awaits Enforcer::ReleaseAsync (never blocks the loop); the count of leases
// that were still live is posted back to `ex`.
template <typename Token>
auto AsyncRelease(Enforcer& enforcer, std::vector<HeldLease> leases, net::any_io_executor ex,
                  Token&& token) {
  return net::async_initiate<Token, void(int64_t)>(
      [&enforcer, ex](auto handler, std::vector<HeldLease> leases) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        enforcer.ReleaseAsync(std::move(leases), [h, ex](int64_t released) {
          net::post(ex, [h, released]() mutable { (*h)(released); });
        });
      },
      token, std::move(leases));
}

// POST /v1/release: gives back leases a /v1/decide answer handed out. Unknown,
// expired or already released leases are not errors ("not_held").
net::awaitable<Response> Release(const Request& request, const Runtime& rt) {
  std::vector<HeldLease> leases;
  std::vector<ConfigError> errors = ParseReleaseBody(request.body, *rt.enforcer, &leases);
  if (!errors.empty()) co_return Problem(400, "Invalid release request", "see errors", errors);
  const int64_t asked = static_cast<int64_t>(leases.size());
  auto ex = co_await net::this_coro::executor;
  const int64_t released =
      co_await AsyncRelease(*rt.enforcer, std::move(leases), ex, net::use_awaitable);
  co_return RenderRelease(released, asked - released);
}

net::awaitable<Response> Ui(const Request& request, const Runtime&) {
  co_return HandleUiAsset(request.view.path);
}

net::awaitable<Response> Status(const Request& request, const Runtime& rt) {
  co_return HandleStatus(rt, request.view.query, CallerToken(request.view, rt),
                         MayShowRaw(request.view, rt));
}

net::awaitable<Response> AdminNotFound(const Request&, const Runtime&) {
  co_return Problem(404, "",
                    "admin endpoints: /v1/reload /v1/policy /v1/top /v1/explain "
                    "/v1/rollback /v1/rollback/clear /v1/rollback/trip /v1/keys/{get,reset,set} "
                    "/v1/status /ui /metrics /healthz /readyz");
}

net::awaitable<Response> NotFound(const Request&, const Runtime&) {
  co_return Problem(404, "", "no such endpoint");
}

// Indexed by Op.
constexpr std::array<Handler, size_t(Op::kCount)> kHandlers = [] {
  std::array<Handler, size_t(Op::kCount)> h{};
  h[size_t(Op::kHealthz)] = &Plain<HandleHealthz>;
  h[size_t(Op::kReadyz)] = &Readyz;
  h[size_t(Op::kMetrics)] = &Plain<HandleMetrics>;
  h[size_t(Op::kReload)] = &Reload;
  h[size_t(Op::kPolicy)] = &PolicyApi;
  h[size_t(Op::kTop)] = &Top;
  h[size_t(Op::kExplain)] = &Explain;
  h[size_t(Op::kRollbackView)] = &Plain<HandleRollbackView>;
  h[size_t(Op::kRollbackClear)] = &RollbackAction<false>;
  h[size_t(Op::kRollbackTrip)] = &RollbackAction<true>;
  h[size_t(Op::kKeyGet)] = &KeyGet;
  h[size_t(Op::kKeyReset)] = &KeyReset;
  h[size_t(Op::kKeySet)] = &KeySet;
  h[size_t(Op::kAuth)] = &Auth;
  h[size_t(Op::kDecide)] = &DecideBody;
  h[size_t(Op::kRelease)] = &Release;
  h[size_t(Op::kUi)] = &Ui;
  h[size_t(Op::kStatus)] = &Status;
  h[size_t(Op::kAdminNotFound)] = &AdminNotFound;
  h[size_t(Op::kNotFound)] = &NotFound;
  h[size_t(Op::kGateway)] = nullptr;
  return h;
}();

}  // namespace

Handler HandlerFor(Op op) { return op < Op::kCount ? kHandlers[size_t(op)] : nullptr; }

std::optional<Response> CheckAdminRequest(const Request& request, const RouteResult& route,
                                          const Runtime& rt) {
  const bool admin = request.listener == ListenerKind::kAdmin;
  // Host first, reads included: a rebinding page must not even learn what the listener says.
  std::optional<AdminRefusal> refused =
      admin ? ScreenAdminHost(request.view, rt.admin_hosts) : std::nullopt;
  const bool tokens = !rt.admin_tokens->empty();
  if (!refused && route.needs_token && tokens) {
    const AdminToken* caller = CallerToken(request.view, rt);
    if (caller == nullptr) {
      Response r = Problem(401, "", "admin endpoints need the bearer token");
      r.headers.push_back({"WWW-Authenticate", "Bearer realm=\"tollgated-admin\""});
      return r;
    }
    if (route.changes_state && caller->scope != AdminScope::kWrite) {
      refused = AdminRefusal{403, "the token \"" + caller->name +
                                      "\" has scope read; this request changes state and needs "
                                      "a token of scope write"};
    }
  }
  if (!refused && admin) {
    refused = ScreenAdminChange(request.view, route, tokens);
  }
  if (!refused) return std::nullopt;
  return Problem(refused->status, "Admin request refused", refused->detail);
}

const AdminToken* CallerToken(const RequestView& request, const Runtime& rt) {
  return rt.admin_tokens->Match(request.Header("authorization"));
}

std::string AdminActor(const RequestView& request, const Runtime& rt) {
  const AdminToken* caller = CallerToken(request, rt);
  std::string peer(request.peer_address);
  return caller == nullptr ? peer : caller->name + "@" + peer;
}

bool MayShowRaw(const RequestView& request, const Runtime& rt) {
  if (rt.identities.raw()) return true;
  const AdminToken* caller = CallerToken(request, rt);
  return caller != nullptr && caller->scope == AdminScope::kWrite;
}

CheckOutcome DecideAndRecordNow(const Runtime& rt, ServerMetrics::Shard& shard,
                                const RequestView& request, RequestTrace* trace) {
  const int64_t t0 = rt.clock->Now();
  DecisionTracer::Active span = BeginSpan(rt, trace);
  if (span.sampled && trace) trace->SetDecisionSpan(span.context);
  CheckOutcome outcome = rt.enforcer->Check(request);
  RecordOutcome(rt, shard, outcome, rt.clock->Now() - t0, &request, trace ? trace->id() : "");
  if (span.sampled) rt.tracer->End(span, outcome);
  return outcome;
}

net::awaitable<CheckOutcome> DecideAndRecord(const Runtime& rt, ServerMetrics::Shard& shard,
                                             const RequestView& request, RequestTrace* trace) {
  if (!rt.async_decisions) co_return DecideAndRecordNow(rt, shard, request, trace);
  const int64_t t0 = rt.clock->Now();
  DecisionTracer::Active span = BeginSpan(rt, trace);
  if (span.sampled && trace) trace->SetDecisionSpan(span.context);
  auto ex = co_await net::this_coro::executor;
  CheckOutcome outcome = co_await AsyncCheck(*rt.enforcer, request, ex, net::use_awaitable);
  RecordOutcome(rt, shard, outcome, rt.clock->Now() - t0, &request, trace ? trace->id() : "");
  if (span.sampled) rt.tracer->End(span, outcome);
  co_return outcome;
}

std::string AuthSubject(const RequestView& request, std::string* target, RequestView* view) {
  std::optional<std::string_view> method;
  std::optional<std::string_view> uri;
  for (const auto& [name, value] : request.headers) {
    std::optional<std::string_view>* slot = EqualsIgnoreCase(name, "x-original-method") ? &method
                                            : EqualsIgnoreCase(name, "x-original-uri")  ? &uri
                                                                                        : nullptr;
    if (!slot) continue;
    if (*slot) {
      return slot == &method ? "X-Original-Method sent more than once"
                             : "X-Original-URI sent more than once";
    }
    *slot = value;
  }
  view->method = method.value_or(request.method);
  view->path = "/";
  view->query = {};
  view->peer_address = request.peer_address;
  view->headers = request.headers;
  if (!uri) return {};
  if (IsPlainOriginForm(*uri)) {  // the common case: the header's own bytes, no copy
    const RequestTarget t = SplitTarget(*uri);
    view->path = t.path;
    view->query = t.query;
    return {};
  }
  if (HttpFramingError e = OriginalUriToOriginForm(view->method, *uri, target);
      e != HttpFramingError::kOk) {
    return "X-Original-URI: " + make_error_code(e).message();
  }
  const RequestTarget t = SplitTarget(*target);
  view->path = t.path;
  view->query = t.query;
  return {};
}

}  // namespace tollgate::server
