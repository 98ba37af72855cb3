// Internal: gateway mode's forwarding of one allowed request to the upstream.
//
// The request header is rewritten (hop-by-hop fields removed, including those
// named by Connection; X-Forwarded-For appended with the peer address;
// X-Forwarded-Host/-Proto set; Host set to the upstream's). A bodyless request
// (the common case) goes out as one hand-written header (server/proxy_wire.h);
// a request body is streamed in pieces of up to 16 KiB (Content-Length or
// chunked, never buffered whole). Upstream connections are kept alive in a
// per-worker pool (no locks: a worker's pool is used by its thread only); a
// pooled connection that turns out to be closed is replaced once, before any
// body byte was sent.
//
// An https:// upstream (server/upstream_tls.h): a new connection does its TLS
// client handshake after the TCP connect (SNI, the certificate verified
// against gateway.upstream_tls), within gateway.connect_timeout_ms; its TLS
// stream stays with it in the pool. A failed handshake is 502 (504 when it
// timed out) with the reason in the log line only. Every read and write goes
// through the connection's stream (OnStream: a plain connection's socket), so
// the plain path allocates nothing more. A TLS connection is closed without a
// close_notify and without waiting for the upstream's: a peer that closes
// without one ends a read with an error (a body framed by length or chunks is
// complete before that; a close-delimited body is then cut short, as a
// truncation attack would be).
//
// The response header is rewritten the same way and the rate-limit headers are
// added. A response whose header and Content-Length body fit the 16 KiB relay
// buffer is read whole and sent as one write; any other (larger, chunked,
// close-delimited, 1xx first, or to HEAD) is streamed back piece by piece as
// it arrives.
//
// Failures before the response header was relayed become 502 (connect refused,
// broken connection, bad response, or a small response cut short) or 504
// (connect or response timeout); after that the client connection is closed,
// because a half-sent response cannot be turned into an error.
//
// A client that goes away mid-response (a write to it fails) does not end the
// upstream exchange: the upstream is read on and discarded, within
// gateway.abort_drain_ms and abort_drain_bytes, so that the fields the
// settlement wants (a trailer) are captured whenever the upstream finishes;
// when it does not finish within them, ProxyResult::upstream.client_aborted.
#ifndef TOLLGATE_SERVER_PROXY_H_
#define TOLLGATE_SERVER_PROXY_H_

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <span>
#include <string>
#include <string_view>

#include "server/config.h"
#include "server/context.h"
#include "server/response_capture.h"
#include "tollgate/policy.h"

namespace tollgate::server {

struct ProxyResult {
  int status = 0;           // status sent to the client (0: nothing sent)
  bool keep_alive = false;  // whether the client connection may be reused
  // How the upstream exchange ended, for the request's settlement
  // (Enforcer::SettleAsync): the upstream's status, or a timeout, connect
  // failure or broken response, and the values of the response fields named
  // by `capture` (header, then trailer: a trailer's value replaces the
  // header's; each value cut to kMaxCapturedValue bytes).
  ResponseOutcome upstream;
};

// The buffer an upstream response is parsed from. Bounded like a client's
// read buffer (ReadBufferLimit): an upstream that streams an endless chunk
// extension or trailer section fills it and the exchange fails
// (http::error::buffer_overflow) instead of growing tollgated's memory. At
// least two relay buffers, so a response read into the relay buffer whole can
// always be handed over to the parser.
size_t UpstreamBufferLimit(const ServerConfig& cfg);

// Whether `peer_ip` is one of `cfg.trusted_proxies`: the list that decides
// whether a peer's forwarding fields are kept (server/proxy_wire.h) and whether
// its traceparent's sampled flag is followed (server/tracing.h). False for an
// address that does not parse; no parsing when the list is empty.
bool PeerTrusted(const ServerConfig& cfg, std::string_view peer_ip);

net::awaitable<ProxyResult> ProxyRequest(
    const Runtime& runtime, Worker& worker, Connection& client,
    boost::beast::flat_buffer& client_buffer,
    boost::beast::http::request_parser<boost::beast::http::empty_body>& header_parser,
    std::string_view peer_ip, const std::vector<HeaderField>& response_headers,
    std::string_view trace_id = {},  // carried into upstream failure log lines
    // Replaces the request's traceparent fields upstream when not empty (the
    // sampled decision span, RequestTrace::upstream_traceparent).
    std::string_view upstream_traceparent = {},
    // Lower-case names of response fields to report in ProxyResult::upstream
    // (Settlement::response_fields): header or trailer fields.
    std::span<const std::string> capture = {});

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_PROXY_H_
