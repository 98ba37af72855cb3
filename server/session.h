// Internal: one client connection of tollgated (HTTP/1.1, keep-alive).
//
// The session is the I/O loop only. It reads requests one at a time (no
// pipelining in parallel: a request is answered before the next is parsed),
// screens each head (Host, 405, a repeated key header on the gateway and
// /v1/auth), routes it through the route table (server/route.h), and then either proxies it
// (gateway mode: decide, then server/proxy.h) or reads its bounded body,
// checks the admin token where the route needs it and calls the route's
// handler (server/endpoints.h) with the current Runtime snapshot. It writes the
// response, counts it and writes the access log line, each in one place.
//
// Limits: the request line + headers must fit max_header_bytes (else 431), a
// body for our own endpoints max_body_bytes (else 413), a malformed request
// gets 400; all three close the connection and leave the server untouched.
//
// Timeouts, through the worker's sweeper (Connection::deadline_ns): idle_timeout
// while waiting for the next request, read_timeout from its first byte until
// it is complete, write_timeout per response. A connection past its deadline is
// closed. On drain, idle connections are closed at once and busy ones after
// their current response (sent with Connection: close).
//
// TLS (`tls` not null, server/tls_listener.h): the session first completes the
// handshake (within the listener's handshake slots and handshake_timeout), then
// serves HTTP over the TLS stream exactly as over a plain socket, and ends with
// a close_notify. The plain session is a separate instantiation: TLS costs it
// nothing.
//
// Lifetime: the coroutine owns the socket; it runs on `worker`'s thread only.
#ifndef TOLLGATE_SERVER_SESSION_H_
#define TOLLGATE_SERVER_SESSION_H_

#include <boost/asio/awaitable.hpp>

#include "server/connection_limits.h"
#include "server/context.h"
#include "server/route.h"
#include "server/runtime.h"

namespace tollgate::server {

class TlsListener;

// `slot` is the connection's place under the listener's caps, given back
// when the session ends. `tls` (borrowed, outlives the server's sessions):
// the listener's TLS, or null for plain HTTP.
net::awaitable<void> RunSession(const RuntimeHolder& runtimes, Worker& worker, ListenerKind kind,
                                tcp::socket socket, ConnectionLimits::Slot slot,
                                TlsListener* tls = nullptr);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SESSION_H_
