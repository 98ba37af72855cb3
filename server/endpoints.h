// Internal: tollgated's own endpoints as handlers, and the decision path they
// share with the gateway.
//
// A handler takes a request and the runtime snapshot (server/runtime.h) and
// returns a response; it touches no socket. The session (server/session.h)
// reads the request, routes it through the route table (server/route.h),
// checks the admin token where the route asks for it (CheckAdminToken, the
// one place), dispatches to HandlerFor(route.op) and writes what comes back.
//
// Every decision a request asks for (the gateway, /v1/auth, /v1/decide) goes
// through DecideAndRecord: the Enforcer (inline, or through CheckAsync when the
// store is natively asynchronous), then the latency histogram, the counters,
// /v1/top and the rejection log line.
//
// Thread safety: handlers run on the session's I/O thread; what they touch
// beyond the request is the snapshot and the thread-safe objects it points to.
#ifndef TOLLGATE_SERVER_ENDPOINTS_H_
#define TOLLGATE_SERVER_ENDPOINTS_H_

#include <boost/asio/awaitable.hpp>
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

// The 401 for a request without the admin token, when one is configured
// (compared in constant time); nullopt when the request may proceed.
std::optional<Response> CheckAdminToken(const Request& request, const Runtime& rt);

// Decides `request` and records the outcome (latency, counters, /v1/top, the
// gated rejection log) and its spans when tracing samples it (`trace`: the
// request's context, may be null). Resumes on the caller's executor.
boost::asio::awaitable<CheckOutcome> DecideAndRecord(const Runtime& rt, ServerMetrics::Shard& shard,
                                                     const RequestView& request,
                                                     RequestTrace* trace);

// The request /v1/auth decides: the method from X-Original-Method (else the
// request's), path and query from X-Original-URI (else "/") brought to the
// origin-form the gateway decides on (OriginalUriToOriginForm: the same
// normalisation and refusals, server/http_framing.h), every header as sent,
// the TCP peer. `*view` holds views into `request` and into `*target` (the
// accepted X-Original-URI), which must outlive it. Returns why the request
// cannot be decided (an answer of 400), or "" when `*view` is set: an
// X-Original-URI the gateway would refuse, or X-Original-URI or
// X-Original-Method sent more than once.
std::string AuthSubject(const RequestView& request, std::string* target, RequestView* view);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_ENDPOINTS_H_
