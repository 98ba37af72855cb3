// Internal: one client connection of tollgated (HTTP/1.1, keep-alive).
//
// RunSession reads requests one at a time (no pipelining in parallel: a
// request is answered before the next is parsed), routes them to the
// endpoints of its listener, and writes the responses. Limits: the request
// line + headers must fit max_header_bytes (else 431), a body for our own
// endpoints max_body_bytes (else 413), a malformed request gets 400; all three
// close the connection and leave the server untouched.
//
// Timeouts, through the worker's sweeper (Connection::deadline_ns): idle_timeout
// while waiting for the next request, read_timeout from its first byte until
// it is complete, write_timeout per response. A connection past its deadline is
// closed. On drain, idle connections are closed at once and busy ones after
// their current response (sent with Connection: close).
//
// Lifetime: the coroutine owns the socket; it runs on `worker`'s thread only.
#ifndef TOLLGATE_SERVER_SESSION_H_
#define TOLLGATE_SERVER_SESSION_H_

#include <boost/asio/awaitable.hpp>

#include "server/context.h"

namespace tollgate::server {

// `slot` is the connection's place under the listener's caps, given back
// when the session ends.
net::awaitable<void> RunSession(Shared& shared, Worker& worker, ListenerKind kind,
                                tcp::socket socket, ConnectionLimits::Slot slot);

// Decides `request` with the Enforcer: inline for the local store, through
// CheckAsync (resumed on this worker) for remote stores.
net::awaitable<CheckOutcome> Decide(Shared& shared, const RequestView& request);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SESSION_H_
