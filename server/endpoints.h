// Internal: tollgated's own endpoints as handlers, and the decision path they
// share with the gateway.
//
// A handler takes a request and the runtime snapshot (server/runtime.h) and
// returns a response; it touches no socket. The session (server/session.h)
// reads the request, routes it through the route table (server/route.h),
// checks it in one place (CheckAdminRequest: on the admin listener the Host,
// then the admin token where the route asks for it, then what keeps a web
// page out, server/admin_guard.h), dispatches to HandlerFor(route.op) and
// writes what comes back.
//
// Every decision a request asks for (the gateway, /v1/auth, /v1/decide) goes
// through DecideAndRecord: the Enforcer (inline, or through CheckAsync when the
// store is natively asynchronous), then the latency histogram, the counters,
// /v1/top and the rejection log line.
//
// Thread safety: handlers run on the session's I/O thread; what they touch
// beyond the request is the snapshot and the thread-safe objects it points to.
// A handler that waits on something slow (a reload or policy write on etcd,
// key or rollback administration on Redis) runs that part on an executor of
// its own (OffWorker) and resumes on the worker when it is done, so the
// worker's other connections keep being decided meanwhile.
#ifndef TOLLGATE_SERVER_ENDPOINTS_H_
#define TOLLGATE_SERVER_ENDPOINTS_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_util.h"
#include "server/metrics.h"
#include "server/route.h"
#include "server/runtime.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"

namespace tollgate::server {

// One request as a handler sees it. Views into the session's parser and
// buffers, valid for the handler's call.
struct Request {
  ListenerKind listener = ListenerKind::kMain;
  RequestView view;               // method and target as sent, the TCP peer, the header fields
  std::string_view body;          // the whole (bounded) body; "" for a bodyless request
  std::string_view trace_id;      // from a valid traceparent, else ""
  RequestTrace* trace = nullptr;  // the request's trace context; null: none
  ServerMetrics::Shard* shard = nullptr;  // the worker's metrics shard
};

using Handler = boost::asio::awaitable<Response> (*)(const Request&, const Runtime&);

// The handler of `op`; null for Op::kGateway (the session proxies).
Handler HandlerFor(Op op);

// The answer refusing `request` before its handler runs, or nullopt when it
// may proceed: on the admin listener a Host it does not answer (421, DNS
// rebinding); where the route needs it and one is configured, an admin token
// (401, compared in constant time; 403 when the route changes state and the
// token's scope is read); on the admin listener a state-changing
// request a web page could have sent (403, 415); server/admin_guard.h.
std::optional<Response> CheckAdminRequest(const Request& request, const RouteResult& route,
                                          const Runtime& rt);

// The admin token `request` presents (its Authorization field), or null: none
// sent, no match, or no token configured. Compared with every token.
const AdminToken* CallerToken(const RequestView& request, const Runtime& rt);
// Who sent an admin request, for audit lines: "<token name>@<peer address>",
// or the peer address alone when it presented no token. Never the secret.
std::string AdminActor(const RequestView& request, const Runtime& rt);
// Whether `request` may see identities raw (?raw=1): identities.raw in the
// config, or a write-scoped admin token presented.
bool MayShowRaw(const RequestView& request, const Runtime& rt);

// Runs `f` (returning a Response) on `executor` and resumes on the caller's
// executor when it is done; runs it inline when `executor` is empty. `f` and
// what it refers to must outlive the wait (the session's request does).
template <typename F>
boost::asio::awaitable<Response> OffWorker(
    const std::optional<boost::asio::any_io_executor>& executor, F f) {
  if (!executor) co_return f();
  co_return co_await boost::asio::co_spawn(
      *executor, [&f]() -> boost::asio::awaitable<Response> { co_return f(); },
      boost::asio::use_awaitable);
}

// Decides `request` and records the outcome (latency, counters, /v1/top, the
// gated rejection log) and its spans when tracing samples it (`trace`: the
// request's context, may be null). Resumes on the caller's executor.
boost::asio::awaitable<CheckOutcome> DecideAndRecord(const Runtime& rt, ServerMetrics::Shard& shard,
                                                     const RequestView& request,
                                                     RequestTrace* trace);
// The same without suspending, for a store that decides inline
// (!rt.async_decisions): no coroutine frame on the request path (issue 32).
CheckOutcome DecideAndRecordNow(const Runtime& rt, ServerMetrics::Shard& shard,
                                const RequestView& request, RequestTrace* trace);

// The request /v1/auth decides: the method from X-Original-Method (else the
// request's), path and query from X-Original-URI (else "/") brought to the
// origin-form the gateway decides on (OriginalUriToOriginForm: the same
// normalisation and refusals, tollgate/http_framing.h), every header as sent,
// the TCP peer. `*view` holds views into `request` and into `*target` (the
// accepted X-Original-URI when it had to be rewritten; unused when the header
// is already plain, IsPlainOriginForm), which must outlive it. Returns why the request
// cannot be decided (an answer of 400), or "" when `*view` is set: an
// X-Original-URI the gateway would refuse, or X-Original-URI or
// X-Original-Method sent more than once.
std::string AuthSubject(const RequestView& request, std::string* target, RequestView* view);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_ENDPOINTS_H_
