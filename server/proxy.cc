#include "server/proxy.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "server/chunk_limits.h"
#include "server/frame_pool.h"
#include "server/http_util.h"
#include "server/proxy_wire.h"
#include "server/relay_body.h"
#include "server/response_capture.h"
#include "server/tls_listener.h"
#include "server/upstream_tls.h"
#include "server/write_now.h"
#include "tollgate/http_framing.h"
#include "tollgate/ip_address.h"

namespace tollgate::server {

size_t UpstreamBufferLimit(const ServerConfig& cfg) {
  return std::max(ReadBufferLimit(cfg), 2 * RelayScratch::kBufferSize);
}

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using net::redirect_error;
using net::use_awaitable;

constexpr size_t kRelayBuffer = RelayScratch::kBufferSize;

using ResponseParser = http::response_parser<http::buffer_body>;

// Removes hop-by-hop fields (RFC 9110 7.6.1), including those Connection names
// except the ones it may not remove (KeptDespiteConnection), and the framing
// fields, which the caller sets again from what the parser framed.
template <class Fields>
void RemoveHopByHop(Fields& f) {
  std::vector<std::string> named;
  for (auto it = f.find(http::field::connection);
       it != f.end() && it->name() == http::field::connection; ++it) {
    for (auto token : http::token_list(it->value())) {
      std::string name(token.data(), token.size());
      if (!KeptDespiteConnection(name)) named.push_back(std::move(name));
    }
  }
  for (const auto& n : named) f.erase(n);
  f.erase(http::field::content_length);
  f.erase(http::field::transfer_encoding);
  f.erase(http::field::connection);
  f.erase(http::field::keep_alive);
  f.erase("Proxy-Connection");
  f.erase(http::field::te);
  f.erase(http::field::trailer);
  f.erase(http::field::upgrade);
  f.erase(http::field::proxy_authorization);
  f.erase(http::field::proxy_authenticate);
}

// A pooled connection the upstream has closed (or sent unsolicited bytes on) is stale.
bool Stale(tcp::socket& s) {
  char c;
  ssize_t n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

// A live pooled connection (`*reused` set), else a new unconnected one.
std::unique_ptr<Connection> TakeConnection(Worker& w, bool* reused) {
  std::unique_ptr<Connection> c;
  while (!w.idle_upstream.empty() && !c) {
    c = std::move(w.idle_upstream.back());
    w.idle_upstream.pop_back();
    if (Stale(c->socket)) c.reset();
  }
  *reused = c != nullptr;
  if (!c) {
    c = std::make_unique<Connection>(tcp::socket(w.ioc), w.clock);
    c->upstream = true;
  }
  return c;
}

// Keeps an upstream connection linked into the worker (for its deadlines)
// while in use.
class UpstreamLease {
 public:
  UpstreamLease(Worker& w, std::unique_ptr<Connection> c) : w_(w), c_(std::move(c)) {
    w_.Link(c_.get());
  }
  ~UpstreamLease() {
    if (c_) w_.Unlink(c_.get());
  }
  UpstreamLease(const UpstreamLease&) = delete;
  UpstreamLease& operator=(const UpstreamLease&) = delete;
  Connection& operator*() { return *c_; }
  Connection* operator->() { return c_.get(); }
  // Returns the connection to the worker's idle pool.
  void Release(size_t max_idle) {
    w_.Unlink(c_.get());
    c_->ClearDeadline();
    c_->timed_out = false;
    if (w_.idle_upstream.size() < max_idle) w_.idle_upstream.push_back(std::move(c_));
    c_.reset();
  }

 private:
  Worker& w_;
  std::unique_ptr<Connection> c_;
};

// A RelayScratch from the worker's spares, returned when the request ends.
class ScratchLease {
 public:
  explicit ScratchLease(Worker& w) : w_(w) {
    if (!w_.relay_scratch.empty()) {
      s_ = std::move(w_.relay_scratch.back());
      w_.relay_scratch.pop_back();
    } else {
      s_ = std::make_unique<RelayScratch>();
    }
  }
  ~ScratchLease() {
    if (w_.relay_scratch.size() < 64) w_.relay_scratch.push_back(std::move(s_));
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  RelayScratch& operator*() { return *s_; }
  RelayScratch* operator->() { return s_.get(); }

 private:
  Worker& w_;
  std::unique_ptr<RelayScratch> s_;
};

struct ProxyCall;

}  // namespace
}  // namespace tollgate::server

// The steps of a proxied request take their frames from the worker thread's
// FramePool: none allocated per exchange (issue 32).
template <typename T, typename... Args>
struct std::coroutine_traits<boost::asio::awaitable<T>, tollgate::server::ProxyCall&, Args...> {
  using promise_type = tollgate::server::PooledFrame<T>;
};

namespace tollgate::server {
namespace {

// What every step of one proxied request needs.
struct ProxyCall {
  const Runtime& s;
  Worker& w;
  Connection& client;
  ServerMetrics::Shard& shard;
  const std::vector<HeaderField>& response_headers;
  bool client_keep_alive;
  unsigned client_version;
  bool head;  // a HEAD request: the response has no body
  std::string_view peer_ip;
  bool peer_trusted;                      // a trusted proxy: its forwarding fields are kept
  std::string_view trace_id;              // "" without a valid traceparent
  std::string_view upstream_traceparent;  // replaces the request's when not empty
  // The request header as it is now (the streamed path moves it into its own
  // parser and may rewrite the target): read only when logging a failure.
  const http::request_header<>* request = nullptr;
  // Response fields to capture, and how the exchange ended (ProxyResult::upstream).
  std::span<const std::string> capture = {};
  ResponseOutcome upstream = {};
};

// One log line per upstream failure (502, 504, a relay broken mid-body), when
// the gate admits it: at most log.reject_per_second a second, like rejections.
void LogUpstreamFailure(ProxyCall& call, int status, ServerMetrics::UpstreamError kind,
                        std::string_view detail) {
  static constexpr const char* kKinds[] = {"connect", "timeout", "broken"};
  const Runtime& s = call.s;
  if (!s.upstream_error_gate->Admit(s.clock->Now() / 1'000'000'000)) return;
  nlohmann::json f = nlohmann::json::object();
  f["status"] = status;
  f["kind"] = kKinds[kind];
  if (!detail.empty()) f["error"] = std::string(detail);
  f["upstream"] = s.gateway->upstream.host_header;
  if (call.request) {
    f["method"] = Logger::Client(std::string_view(call.request->method_string().data(),
                                                  call.request->method_string().size()));
    f["path"] = Logger::Client(
        std::string_view(call.request->target().data(), call.request->target().size()));
  }
  f["peer"] = s.identities.ShowInLog(call.peer_ip);
  if (!call.trace_id.empty()) f["trace_id"] = std::string(call.trace_id);
  f["sampled"] = true;
  s.log->Warn("upstream_failed", std::move(f));
}

// Answers `status` (a problem response) and ends the client connection.
net::awaitable<ProxyResult> SendProblem(ProxyCall& call, Response r) {
  r.close = true;
  std::string out;
  SerializeResponse(r, false, call.w.Date(), call.head, &out);
  call.client.SetDeadline(call.s.config->write_timeout);
  beast::error_code ec;
  co_await OnClientStream(call.client, [&](auto& stream) {
    return net::async_write(stream, net::buffer(out), redirect_error(use_awaitable, ec));
  });
  co_return ProxyResult{r.status, false, {}};
}

// `log_detail`, when not empty, is logged instead of the detail the client is
// shown (an upstream TLS failure's reason: the client sees that it failed).
net::awaitable<ProxyResult> SendUpstreamError(ProxyCall& call, bool timeout,
                                              std::string_view timeout_detail,
                                              std::string_view error_detail,
                                              ServerMetrics::UpstreamError kind,
                                              std::string_view log_detail = {}) {
  if (timeout) kind = ServerMetrics::kTimeout;
  call.upstream.kind = kind == ServerMetrics::kTimeout   ? ResponseOutcome::Kind::kTimeout
                       : kind == ServerMetrics::kConnect ? ResponseOutcome::Kind::kConnectError
                                                         : ResponseOutcome::Kind::kBroken;
  call.shard.upstream_errors[kind].fetch_add(1, std::memory_order_relaxed);
  int status = timeout ? 504 : 502;
  const std::string_view shown = timeout ? timeout_detail : error_detail;
  LogUpstreamFailure(call, status, kind, log_detail.empty() ? shown : log_detail);
  co_return co_await SendProblem(call, Problem(status, timeout ? "Gateway timeout" : "Bad gateway",
                                               timeout ? timeout_detail : error_detail));
}

net::awaitable<ProxyResult> SendTooLarge(ProxyCall& call) {
  uint64_t max = call.s.config->gateway_max_body_bytes;
  co_return co_await SendProblem(
      call, Problem(413, "Content too large",
                    "request bodies must fit " + std::to_string(max) + " bytes"));
}

// Connects a new upstream connection (no_delay set).
net::awaitable<beast::error_code> Connect(ProxyCall& call, Connection& up) {
  beast::error_code ec;
  up.SetDeadline(call.s.config->upstream_connect_timeout);
  co_await net::async_connect(up.socket, call.s.gateway->endpoints,
                              redirect_error(use_awaitable, ec));
  if (!ec) {
    beast::error_code ignored;
    up.socket.set_option(tcp::no_delay(true), ignored);
    up.socket.non_blocking(true, ignored);  // for WriteNow
  }
  co_return ec;
}

// An https:// upstream: the client handshake on a connected `up`, within the
// connect timeout (the sweeper closes the socket after it). Its TLS stream
// stays with the connection, pooled with it. False with the reason.
net::awaitable<bool> Handshake(ProxyCall& call, Connection& up, std::string* reason) {
  UpstreamTls& tls = *call.s.gateway->tls;
  up.upstream_tls = tls.NewStream(up.socket, call.w.index);
  up.tls = up.upstream_tls.get();
  up.SetDeadline(call.s.config->upstream_connect_timeout);
  beast::error_code ec;
  co_await up.tls->async_handshake(net::ssl::stream_base::client,
                                   redirect_error(use_awaitable, ec));
  co_return tls.Finish(*up.tls, ec, up.timed_out, reason) == UpstreamTlsResult::kOk;
}

// A new upstream connection made ready: connected and, for an https://
// upstream, through its TLS handshake. Nothing when it is; else the failure
// answered to the client (502, or 504 for a timeout).
net::awaitable<std::optional<ProxyResult>> Open(ProxyCall& call, Connection& up) {
  beast::error_code ec = co_await Connect(call, up);
  if (ec) {
    ProxyResult failed =
        co_await SendUpstreamError(call, up.timed_out, "upstream connect timed out",
                                   "upstream refused the connection", ServerMetrics::kConnect);
    co_return failed;
  }
  if (!call.s.gateway->tls) co_return std::nullopt;
  std::string reason;
  if (co_await Handshake(call, up, &reason)) co_return std::nullopt;
  const std::string logged = "upstream TLS handshake failed: " + reason;
  ProxyResult failed =
      co_await SendUpstreamError(call, up.timed_out, "upstream TLS handshake timed out",
                                 "upstream TLS handshake failed", ServerMetrics::kConnect, logged);
  co_return failed;
}

// What the log says of an upstream read or write that failed on a TLS
// connection (an alert the upstream sent after the handshake: a TLS 1.3
// upstream refuses a missing client certificate so); "" for a plain one.
std::string TlsFailure(const Connection& up, const beast::error_code& ec) {
  if (up.tls == nullptr || ec.category() != net::error::get_ssl_category()) return {};
  return "upstream TLS: " + ec.message();
}

// While tollgated waits for the upstream, the client connection's deadline
// must not run out first: the upstream's timeout answers 504 (issue 14).
void HoldClientFor(ProxyCall& call) {
  call.client.SetDeadline(call.s.config->upstream_timeout + call.s.config->write_timeout);
}

// Reads the upstream's final response header into `rp` (1xx interim responses
// are skipped), starting with what `ubuf` holds. A header with ambiguous
// framing (tollgate/http_framing.h) is an HttpFramingError. A head that
// arrives in parts stays whole in `ubuf` until it is done (the parser takes
// the status line first; the check needs the head from its first byte).
net::awaitable<beast::error_code> ReadFinalHeader(ProxyCall& call, Connection& up,
                                                  beast::flat_buffer& ubuf,
                                                  std::optional<ResponseParser>& rp) {
  beast::error_code ec;
  up.SetDeadline(call.s.config->upstream_timeout);
  HoldClientFor(call);
  for (;;) {
    rp.emplace();
    rp->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (call.head) rp->skip(true);
    size_t parsed = 0;  // bytes of this head the parser has taken so far
    for (;;) {
      const auto* head = static_cast<const char*>(ubuf.data().data());
      const size_t used = parsed + rp->put(net::buffer(head + parsed, ubuf.size() - parsed), ec);
      if (!ec && rp->is_header_done()) ec = CheckFraming({head, used}, MessageKind::kResponse);
      if (ec != http::error::need_more) {
        ubuf.consume(used);
        break;
      }
      parsed = used;
      if (ubuf.size() >= ubuf.max_size()) {
        ec = http::error::buffer_overflow;  // a head that never ends
        break;
      }
      const size_t n = co_await OnStream(up, [&](auto& stream) {
        return stream.async_read_some(ubuf.prepare(beast::read_size(ubuf, 65536)),
                                      redirect_error(use_awaitable, ec));
      });
      ubuf.commit(n);
      if (ec == net::error::eof || ec == net::ssl::error::stream_truncated) {
        ec = ubuf.size() == 0 ? http::error::end_of_stream : http::error::partial_message;
      }
      if (ec) break;
    }
    if (ec) break;
    int code = rp->get().result_int();
    if (code < 100 || code >= 200 || code == 101) break;
  }
  co_return ec;
}

// A client that went away mid-response (a write to it failed) while a
// settlement wants response fields: the upstream is read on and discarded, so
// that its trailer (or the rest of a body framed by length) still settles the
// request, within gateway.abort_drain_bytes of body and gateway.abort_drain_ms.
// An upstream that does not finish within them ends the exchange as
// ResponseOutcome::client_aborted (docs/gateway.md).
struct AbortDrain {
  bool active = false;
  int64_t deadline_ns = 0;
  uint64_t bytes_left = 0;

  void Start(const ServerConfig& cfg, const Clock& clock) {
    active = true;
    deadline_ns = clock.Now() + Nanos(cfg.abort_drain_timeout).count();
    bytes_left = cfg.abort_drain_bytes;
  }
  // Counts `n` discarded body bytes; false past the bound.
  bool Take(uint64_t n) {
    if (n > bytes_left) return false;
    bytes_left -= n;
    return true;
  }
};

// Ends an exchange whose client left and whose upstream did not finish
// within the drain: the settlement charges the rules' abort_cost.
ProxyResult ClientAborted(ProxyCall& call, int status) {
  call.upstream.client_aborted = true;
  call.shard.client_aborts[ServerMetrics::kAbortCut].fetch_add(1, std::memory_order_relaxed);
  return ProxyResult{status, false, {}};
}

// The rewritten response head of a streamed response: hop-by-hop fields out,
// the rate-limit headers in, the framing re-derived. Returns whether the
// client connection may be kept.
bool RewriteStreamedResponseHead(ProxyCall& call, ResponseParser& rp) {
  auto& res = rp.get();
  const int status = res.result_int();
  const boost::optional<std::uint64_t> length = rp.content_length();
  RemoveHopByHop(res);
  for (const HeaderField& h : call.response_headers) {
    if (IsAppendableRateLimitField(h.name)) {
      res.insert(h.name, h.value);  // after the upstream's own lines
    } else {
      res.set(h.name, h.value);
    }
  }
  bool keep_alive = call.client_keep_alive && !call.s.state->Draining();
  // The framing is re-derived from what the parser framed, never copied.
  const bool bodyless = call.head || status < 200 || status == 204 || status == 304;
  if (bodyless || length) {
    if (length && (!bodyless || call.head || status == 304)) res.content_length(*length);
  } else if (call.client_version == 11) {
    res.chunked(true);  // chunked or close-delimited upstream: re-chunked
  } else {
    keep_alive = false;  // HTTP/1.0 never gets chunked: the body ends with the connection
  }
  res.version(11);
  res.keep_alive(keep_alive);
  return keep_alive;
}

// The streaming path for a response whose header is in `rp`: rewrite the
// header, add the rate-limit headers, relay the body through `buf` piece by
// piece as it arrives. The header goes out with the first piece of the body
// (one write). The fields the settlement wants are captured from the head and,
// once the upstream finished, from the trailer, whatever the client did.
net::awaitable<ProxyResult> RelayStreamedResponse(ProxyCall& call, UpstreamLease& up,
                                                  beast::flat_buffer& ubuf, ResponseParser& rp,
                                                  char* buf) {
  const ServerConfig& cfg = *call.s.config;
  beast::error_code ec;
  auto& res = rp.get();
  const int status = res.result_int();
  // A 101's connection speaks another protocol now: never pooled.
  const bool upstream_keep_alive = rp.keep_alive() && status != 101;
  call.upstream.status = status;
  ResponseCapture capture(call.capture, &call.upstream.fields);
  capture.Head(res);
  const bool keep_alive = RewriteStreamedResponseHead(call, rp);
  http::serializer<false, http::buffer_body> rs{res};
  AbortDrain drain;
  // A chunked body may end in a trailer, whose fields Beast's parser adds to `res`: the head goes
  // to the client before the body is read, so a trailer parsed in the same read as the body is
  // never written as head fields (tollgated relays no trailer).
  if (rp.chunked() && !rp.is_done()) {
    call.client.SetDeadline(cfg.write_timeout);
    co_await OnClientStream(call.client, [&](auto& stream) {
      return http::async_write_header(stream, rs, redirect_error(use_awaitable, ec));
    });
    if (ec && capture.empty()) co_return ProxyResult{status, false, {}};  // nothing to settle
    if (ec) drain.Start(cfg, call.w.clock);
  }
  do {
    if (!rp.is_done()) {
      if (drain.active && call.w.clock.Now() >= drain.deadline_ns) {
        co_return ClientAborted(call, status);
      }
      OpenRelayPiece(res.body(), buf, kRelayBuffer);
      up->SetDeadline(cfg.upstream_timeout);
      if (drain.active) {
        up->deadline_ns = std::min(up->deadline_ns, drain.deadline_ns);
      } else {
        HoldClientFor(call);
      }
      // read_some: forward what has arrived, do not wait for a full buffer.
      co_await OnStream(*up, [&](auto& stream) {
        return http::async_read_some(stream, ubuf, rp, redirect_error(use_awaitable, ec));
      });
      if (ec == http::error::need_buffer) ec = {};
      if (ec == http::error::end_of_stream && rp.is_done()) ec = {};
      CloseRelayPiece(res.body(), buf, kRelayBuffer, !rp.is_done());
      if (drain.active) {
        if (ec || !drain.Take(res.body().size)) co_return ClientAborted(call, status);
        continue;  // discarded: nobody to send it to
      }
      if (ec) {
        const auto kind = up->timed_out ? ServerMetrics::kTimeout : ServerMetrics::kBroken;
        call.shard.upstream_errors[kind].fetch_add(1, std::memory_order_relaxed);
        LogUpstreamFailure(call, status, kind,
                           up->timed_out ? "upstream body read timed out"
                                         : "upstream response body broke off: " + ec.message());
        call.upstream.kind =
            up->timed_out ? ResponseOutcome::Kind::kTimeout : ResponseOutcome::Kind::kBroken;
        co_return ProxyResult{status, false, {}};  // half-sent: only closing can tell the client
      }
    } else {
      EndRelayPieces(res.body());
    }
    call.client.SetDeadline(cfg.write_timeout);
    co_await OnClientStream(call.client, [&](auto& stream) {
      return http::async_write(stream, rs, redirect_error(use_awaitable, ec));
    });
    if (ec == http::error::need_buffer) ec = {};
    if (ec && capture.empty()) co_return ProxyResult{status, false, {}};  // nothing to settle
    if (ec) drain.Start(cfg, call.w.clock);  // the client went away: read the upstream on
  } while (!rp.is_done() && (drain.active || !rs.is_done()));
  // A chunked body's trailer fields are in `res` now (after the head's).
  if (rp.is_done()) capture.Trailer(res);

  if (upstream_keep_alive && rp.is_done() && ubuf.size() == 0 && !call.s.state->Draining()) {
    up.Release(cfg.upstream_max_idle);
  }
  if (drain.active) {
    call.shard.client_aborts[ServerMetrics::kAbortFinished].fetch_add(1, std::memory_order_relaxed);
    co_return ProxyResult{status, false, {}};
  }
  co_return ProxyResult{status, keep_alive, {}};
}

// Rewrites a streamed request's header for the upstream (as the fast path,
// proxy_wire.cc does), the framing from what the parser framed.
void RewriteStreamedHead(const ProxyCall& call, http::request_parser<http::buffer_body>& p,
                         std::string_view peer_ip) {
  const Runtime& s = call.s;
  auto& req = p.get();
  RemoveHopByHop(req);
  if (p.chunked()) {
    req.chunked(true);
  } else if (auto length = p.content_length()) {
    req.content_length(*length);
  }
  // From a trusted proxy every X-Forwarded-For field, in order, then the peer:
  // set() below replaces them all with the one joined line.
  std::string forwarded_for;
  if (call.peer_trusted) {
    auto [xff, xff_end] = req.equal_range("X-Forwarded-For");
    for (auto it = xff; it != xff_end; ++it) {
      forwarded_for.append(it->value().data(), it->value().size());
      forwarded_for += ", ";
    }
  } else {
    for (const char* name : {"X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP", "Forwarded"}) {
      req.erase(name);
    }
    req.set("X-Real-IP", peer_ip);
  }
  forwarded_for += peer_ip;
  req.set("X-Forwarded-For", forwarded_for);
  if (req.find("X-Forwarded-Host") == req.end()) {
    if (auto h = req.find(http::field::host); h != req.end()) {
      req.set("X-Forwarded-Host", std::string(h->value().data(), h->value().size()));
    }
  }
  if (req.find("X-Forwarded-Proto") == req.end()) {
    req.set("X-Forwarded-Proto", call.client.tls ? "https" : "http");
  }
  if (!call.upstream_traceparent.empty()) req.set("traceparent", call.upstream_traceparent);
  req.set(http::field::host, s.gateway->upstream.host_header);
  {
    std::string target;
    AppendUpstreamTarget(std::string_view(req.target().data(), req.target().size()),
                         s.gateway->upstream, &target);
    req.target(target);
  }
  req.version(11);
}

// A streamed request on its way: the client's body parser and the upstream serializer.
struct StreamedRequest {
  http::request_parser<http::buffer_body>& p;
  std::optional<http::serializer<true, http::buffer_body>>& sr;
  beast::flat_buffer& client_buffer;
  char* buf;
  int64_t body_deadline_ns;  // body_timeout bounds the whole body
};

// What sending a streamed request came to.
struct Sent {
  std::optional<ProxyResult>
      ended;           // the exchange is over (an error was answered, or the client left)
  bool retry = false;  // a stale pooled connection: try a fresh one
};

// Sends the request: the header goes out with the first piece of the body (one
// write), then the rest of the body streamed piece by piece. `may_retry`: the
// connection was pooled and nothing of a body would be lost by a retry.
net::awaitable<Sent> SendStreamed(ProxyCall& call, StreamedRequest& r, Connection& up,
                                  bool may_retry) {
  const ServerConfig& cfg = *call.s.config;
  Connection& client = call.client;
  auto& req = r.p.get();
  beast::error_code ec;
  up.SetDeadline(cfg.upstream_timeout);
  do {
    if (!r.p.is_done()) {
      OpenRelayPiece(req.body(), r.buf, kRelayBuffer);
      client.SetDeadline(cfg.read_timeout);
      client.deadline_ns = std::min(client.deadline_ns, r.body_deadline_ns);
      co_await OnClientStream(client, [&](auto& stream) {
        return http::async_read(stream, r.client_buffer, r.p, redirect_error(use_awaitable, ec));
      });
      if (ec == http::error::need_buffer) ec = {};
      if (ec == http::error::body_limit) {
        ProxyResult too_large = co_await SendTooLarge(call);
        co_return Sent{too_large};
      }
      if (ec && !client.timed_out && ec != http::error::end_of_stream &&
          ec != http::error::partial_message &&
          ec.category() == http::make_error_code(http::error::header_limit).category()) {
        // Bad or unbounded chunk framing (server/chunk_limits.h, the read buffer).
        // Built before co_await: no ?: temporaries in a co_await (GCC 12 coroutine bug).
        Response bad = Problem(400, "", "malformed request body: " + ec.message());
        if (ec == http::error::header_limit) {
          bad = Problem(431, "", "the trailer section is too large");
        }
        ProxyResult refused = co_await SendProblem(call, std::move(bad));
        co_return Sent{refused};
      }
      if (ec) co_return Sent{ProxyResult{0, false, {}}};  // the client went away or timed out
      CloseRelayPiece(req.body(), r.buf, kRelayBuffer, !r.p.is_done());
    } else {
      EndRelayPieces(req.body());
    }
    up.SetDeadline(cfg.upstream_timeout);
    co_await OnStream(up, [&](auto& stream) {
      return http::async_write(stream, *r.sr, redirect_error(use_awaitable, ec));
    });
    if (ec == http::error::need_buffer) ec = {};
    if (ec && may_retry) co_return Sent{std::nullopt, true};  // stale pooled connection
    if (ec) {
      ProxyResult failed =
          co_await SendUpstreamError(call, up.timed_out, "upstream timed out reading the request",
                                     "upstream connection broke", ServerMetrics::kBroken);
      co_return Sent{failed};
    }
  } while (!r.p.is_done() && !r.sr->is_done());
  co_return Sent{};
}

// The streaming path for a request (used for requests with a body): the
// header is rewritten in Beast's message and goes out with the first piece of
// the body, the rest of the body is streamed piece by piece, then the response
// is streamed back.
net::awaitable<ProxyResult> ProxyStreamed(ProxyCall& call, beast::flat_buffer& client_buffer,
                                          http::request_parser<http::empty_body>& header_parser,
                                          std::string_view peer_ip, char* buf) {
  const Runtime& s = call.s;
  Worker& w = call.w;
  Connection& client = call.client;
  const ServerConfig& cfg = *s.config;
  beast::error_code ec;

  http::request_parser<http::buffer_body> p(std::move(header_parser));
  p.body_limit(cfg.gateway_max_body_bytes);
  ChunkLimits chunk_limits(cfg, client_buffer);
  p.on_chunk_header(chunk_limits);
  // read_timeout bounds each read of the body, body_timeout the whole body.
  const int64_t body_deadline_ns = w.clock.Now() + Nanos(cfg.body_timeout).count();
  auto& req = p.get();
  call.request = &req;
  if (p.content_length().value_or(0) > cfg.gateway_max_body_bytes) {
    co_return co_await SendTooLarge(call);
  }
  bool expect_continue = false;
  if (auto e = req.find(http::field::expect); e != req.end()) {
    expect_continue =
        EqualsIgnoreCase(std::string_view(e->value().data(), e->value().size()), "100-continue");
    req.erase(http::field::expect);
  }

  RewriteStreamedHead(call, p, peer_ip);
  const bool has_body = !p.is_done();

  if (expect_continue && has_body) {
    client.SetDeadline(cfg.write_timeout);
    if (co_await WriteContinue(client)) co_return ProxyResult{0, false, {}};
  }

  std::optional<http::serializer<true, http::buffer_body>> sr;
  std::optional<UpstreamLease> up;
  beast::flat_buffer ubuf(UpstreamBufferLimit(cfg));
  std::optional<ResponseParser> rp;
  StreamedRequest r{p, sr, client_buffer, buf, body_deadline_ns};
  for (int attempt = 0;; ++attempt) {
    // 1. A connection: pooled if a fresh one is there, else a new one.
    bool reused = false;
    up.emplace(w, TakeConnection(w, &reused));
    sr.emplace(req);
    call.shard.upstream_requests.fetch_add(1, std::memory_order_relaxed);
    if (!reused) {
      std::optional<ProxyResult> failed = co_await Open(call, **up);
      if (failed) co_return std::move(*failed);
    }

    // 2. The request, its body streamed.
    Sent sent = co_await SendStreamed(call, r, **up, reused && attempt == 0 && !has_body);
    if (sent.ended) co_return *sent.ended;
    if (sent.retry) continue;

    // 3. The response header (1xx interim responses are skipped).
    ubuf.clear();
    ec = co_await ReadFinalHeader(call, **up, ubuf, rp);
    if (ec) {
      bool retryable = reused && attempt == 0 && !has_body && !(*up)->timed_out &&
                       (ec == http::error::end_of_stream || ec == net::error::connection_reset ||
                        ec == net::error::eof || ec == net::ssl::error::stream_truncated);
      if (retryable) continue;
      const std::string tls_failure = TlsFailure(**up, ec);
      co_return co_await SendUpstreamError(
          call, (*up)->timed_out, "upstream did not answer in time",
          "upstream sent no valid response", ServerMetrics::kBroken, tls_failure);
    }
    break;
  }

  // 4. The response, streamed.
  co_return co_await RelayStreamedResponse(call, *up, ubuf, *rp, buf);
}

// A response read by the fast path into the relay buffer.
struct FastResponse {
  size_t have = 0;   // response bytes in the buffer
  size_t whole = 0;  // header + body size, when the response is relayed whole; else 0
  UpstreamResponseHead::State state = UpstreamResponseHead::State::kNeedMore;
};

// Reads the response until its header is complete and, when its header and
// Content-Length body fit the buffer `buf`, until the whole body is there.
net::awaitable<beast::error_code> ReadFastResponse(ProxyCall& call, Connection& up, char* buf,
                                                   UpstreamResponseHead& parsed, FastResponse& r) {
  beast::error_code ec;
  r = FastResponse{};
  for (;;) {
    size_t n = co_await OnStream(up, [&](auto& stream) {
      return stream.async_read_some(net::buffer(buf + r.have, kRelayBuffer - r.have),
                                    redirect_error(use_awaitable, ec));
    });
    r.have += n;
    if (ec || call.head) break;  // HEAD: Beast's parser knows its framing rules
    if (r.state != UpstreamResponseHead::State::kComplete) {
      r.state = parsed.Parse(std::string_view(buf, r.have));
      if (r.state == UpstreamResponseHead::State::kComplete &&
          CheckFraming(std::string_view(buf, parsed.header_size()), MessageKind::kResponse) !=
              HttpFramingError::kOk) {
        r.state = UpstreamResponseHead::State::kInvalid;  // ambiguous framing: 502
      }
      if (r.state == UpstreamResponseHead::State::kInvalid) break;
      if (r.state == UpstreamResponseHead::State::kNeedMore) {
        if (r.have == kRelayBuffer) break;  // a huge header: Beast's limits decide
        continue;
      }
      if (!parsed.Relayable() || parsed.header_size() + parsed.body_size() > kRelayBuffer) {
        break;  // streamed
      }
      r.whole = parsed.header_size() + parsed.body_size();
    }
    if (r.have >= r.whole) break;
  }
  co_return ec;
}

// Relays a response read whole (FastResponse::whole): one rewritten header and
// the body, one write.
net::awaitable<ProxyResult> RelayWhole(ProxyCall& call, UpstreamLease& up, RelayScratch& scratch,
                                       const UpstreamResponseHead& parsed, const FastResponse& fr,
                                       char* buf) {
  const Runtime& s = call.s;
  const ServerConfig& cfg = *s.config;
  Connection& client = call.client;
  beast::error_code ec;
  const int status = parsed.status();
  call.upstream.status = status;
  ResponseCapture capture(call.capture, &call.upstream.fields);
  for (const FieldView& f : parsed.fields()) capture.Field(f.name, f.value);
  const bool keep_alive = call.client_keep_alive && !s.state->Draining();
  scratch.head.clear();
  AppendClientResponseHead(parsed, call.response_headers, keep_alive, call.client_version,
                           &scratch.head);
  const std::array<net::const_buffer, 2> out{
      net::buffer(scratch.head), net::buffer(buf + parsed.header_size(), parsed.body_size())};
  // The upstream is done with: pool it first (unless it sent more than one response).
  if (parsed.keep_alive() && fr.have == fr.whole && !s.state->Draining()) {
    up.Release(cfg.upstream_max_idle);
  }
  client.SetDeadline(cfg.write_timeout);
  size_t sent = client.tls ? 0 : WriteNow(client.socket, out, ec);
  if (!ec && sent < net::buffer_size(out)) {
    beast::buffers_suffix<std::array<net::const_buffer, 2>> rest(out);
    rest.consume(sent);
    co_await OnClientStream(client, [&](auto& stream) {
      return net::async_write(stream, rest, redirect_error(use_awaitable, ec));
    });
  }
  if (ec) co_return ProxyResult{status, false, {}};
  co_return ProxyResult{status, keep_alive, {}};
}

// Writes all of `data` to the upstream: at once when a plain socket takes it
// (the common case), the rest (or all of it, through TLS) asynchronously.
net::awaitable<beast::error_code> WriteAll(Connection& up, const std::string& data) {
  beast::error_code ec;
  size_t sent = up.tls ? 0 : WriteNow(up.socket, net::buffer(data), ec);
  if (!ec && sent < data.size()) {
    co_await OnStream(up, [&](auto& stream) {
      return net::async_write(stream, net::buffer(data.data() + sent, data.size() - sent),
                              redirect_error(use_awaitable, ec));
    });
  }
  co_return ec;
}

// A response the fast path did not read whole: Beast's parser takes over from
// the `have` bytes read into `buf` so far, and the response is streamed.
net::awaitable<ProxyResult> RelayFromPartial(ProxyCall& call, UpstreamLease& up, char* buf,
                                             size_t have) {
  const ServerConfig& cfg = *call.s.config;
  beast::error_code ec;
  beast::flat_buffer ubuf(UpstreamBufferLimit(cfg));
  ubuf.commit(net::buffer_copy(ubuf.prepare(have), net::buffer(buf, have)));
  std::optional<ResponseParser> rp;
  ec = co_await ReadFinalHeader(call, *up, ubuf, rp);
  if (ec) {
    co_return co_await SendUpstreamError(call, up->timed_out, "upstream did not answer in time",
                                         "upstream sent no valid response", ServerMetrics::kBroken);
  }
  co_return co_await RelayStreamedResponse(call, up, ubuf, *rp, buf);
}

// ProxyRequest's exchange, `call` made.
net::awaitable<ProxyResult> Forward(ProxyCall& call, beast::flat_buffer& client_buffer,
                                    http::request_parser<http::empty_body>& header_parser,
                                    std::string_view peer_ip) {
  const Runtime& s = call.s;
  Worker& w = call.w;
  const ServerConfig& cfg = *s.config;
  const auto& req = header_parser.get();
  const std::string_view upstream_traceparent = call.upstream_traceparent;
  ScratchLease scratch(w);
  char* buf = scratch->buffer.get();

  // Requests with a body take the streaming path; bodyless ones (most) are
  // written upstream as one hand-rewritten header.
  scratch->head.clear();
  if (!header_parser.is_done() ||
      !AppendUpstreamRequestHead(req, peer_ip, call.peer_trusted, s.gateway->upstream,
                                 &scratch->head, upstream_traceparent,
                                 call.client.tls != nullptr)) {
    co_return co_await ProxyStreamed(call, client_buffer, header_parser, peer_ip, buf);
  }

  beast::error_code ec;
  std::optional<UpstreamLease> up;
  std::optional<UpstreamResponseHead> parsed;
  FastResponse fr;
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    up.emplace(w, TakeConnection(w, &reused));
    call.shard.upstream_requests.fetch_add(1, std::memory_order_relaxed);
    if (!reused) {
      std::optional<ProxyResult> failed = co_await Open(call, **up);
      if (failed) co_return std::move(*failed);
    }
    (*up)->SetDeadline(cfg.upstream_timeout);
    HoldClientFor(call);
    ec = co_await WriteAll(**up, scratch->head);
    if (ec && reused && attempt == 0 && !(*up)->timed_out) continue;  // stale pooled connection
    if (ec) {
      co_return co_await SendUpstreamError(call, (*up)->timed_out,
                                           "upstream timed out reading the request",
                                           "upstream connection broke", ServerMetrics::kBroken);
    }

    // The response: its header, and its body when it fits.
    parsed.emplace(&scratch->fields);
    ec = co_await ReadFastResponse(call, **up, buf, *parsed, fr);
    bool retryable = fr.have == 0 && reused && attempt == 0 && !(*up)->timed_out &&
                     (ec == net::error::eof || ec == net::error::connection_reset ||
                      ec == net::ssl::error::stream_truncated);
    if (retryable) continue;  // the pooled connection was closed under us
    break;
  }
  if (ec) {
    const std::string tls_failure = TlsFailure(**up, ec);
    co_return co_await SendUpstreamError(
        call, (*up)->timed_out, "upstream did not answer in time",
        fr.have == 0 ? "upstream sent no valid response" : "upstream closed the response early",
        ServerMetrics::kBroken, tls_failure);
  }
  if (fr.state == UpstreamResponseHead::State::kInvalid) {
    co_return co_await SendUpstreamError(call, false, "", "upstream sent no valid response",
                                         ServerMetrics::kBroken);
  }

  if (fr.whole == 0) co_return co_await RelayFromPartial(call, *up, buf, fr.have);
  co_return co_await RelayWhole(call, *up, *scratch, *parsed, fr, buf);
}

}  // namespace

bool PeerTrusted(const ServerConfig& cfg, std::string_view peer_ip) {
  if (cfg.trusted_proxies.empty()) return false;
  std::optional<IpAddress> ip = IpAddress::Parse(peer_ip);
  if (!ip) return false;
  for (const std::string& text : cfg.trusted_proxies) {
    if (std::optional<Cidr> cidr = Cidr::Parse(text); cidr && cidr->Contains(*ip)) return true;
  }
  return false;
}

net::awaitable<ProxyResult> ProxyRequest(
    const Runtime& s, Worker& w, Connection& client, beast::flat_buffer& client_buffer,
    http::request_parser<http::empty_body>& header_parser, std::string_view peer_ip,
    const std::vector<HeaderField>& response_headers, std::string_view trace_id,
    std::string_view upstream_traceparent, std::span<const std::string> capture) {
  const ServerConfig& cfg = *s.config;
  const auto& req = header_parser.get();
  ProxyCall call{s,
                 w,
                 client,
                 s.metrics->shard(w.index),
                 response_headers,
                 req.keep_alive(),
                 req.version(),
                 req.method() == http::verb::head,
                 peer_ip,
                 PeerTrusted(cfg, peer_ip),
                 trace_id,
                 upstream_traceparent,
                 &req,
                 capture};
  ProxyResult r = co_await Forward(call, client_buffer, header_parser, peer_ip);
  r.upstream = std::move(call.upstream);
  co_return r;
}

}  // namespace tollgate::server
