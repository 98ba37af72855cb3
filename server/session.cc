#include "server/session.h"

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <optional>

#include "server/chunk_limits.h"
#include "server/endpoints.h"
#include "server/frame_pool.h"
#include "server/handlers.h"
#include "server/http_util.h"
#include "server/proxy.h"
#include "server/tls_listener.h"
#include "server/write_now.h"
#include "tollgate/http_framing.h"
#include "tollgate/request_body.h"

namespace tollgate::server {

net::awaitable<boost::system::error_code> WriteContinue(Connection& conn) {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  boost::system::error_code ec;
  const auto buffer = net::buffer(kContinue.data(), kContinue.size());
  co_await OnClientStream(conn, [&](auto& stream) {
    return net::async_write(stream, buffer, net::redirect_error(net::use_awaitable, ec));
  });
  co_return ec;
}

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using net::redirect_error;
using net::use_awaitable;
using HeadParser = http::request_parser<http::empty_body>;
using BodyParser = http::request_parser<http::string_body>;

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

// Counts the connection as active for its lifetime.
struct ActiveConnection {
  explicit ActiveConnection(ServerMetrics& m) : m_(m) {
    m_.connections_active.fetch_add(1, std::memory_order_relaxed);
  }
  ~ActiveConnection() { m_.connections_active.fetch_sub(1, std::memory_order_relaxed); }
  ServerMetrics& m_;
};

// The peer's address as rules and logs see it (a v4-mapped v6 address unmapped).
std::string PeerAddress(const tcp::endpoint& remote) {
  net::ip::address addr = remote.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    addr = net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6());
  }
  return addr.to_string();
}

// The request's traceparent, when it sent exactly one.
std::optional<std::string_view> Traceparent(const http::request_header<>& req) {
  auto [first, end] = req.equal_range("traceparent");
  if (first == end || std::next(first) != end) return std::nullopt;
  return View(first->value());
}

// One request and what is sent back for it.
struct Exchange {
  Response resp;
  Endpoint endpoint = Endpoint::kInvalid;
  bool keep_alive = false;
  bool head = false;  // a HEAD request: the response has no body
  RequestTrace trace;
};

// What the session does after a request was handled.
enum class Next {
  kRespond,   // write Exchange::resp
  kContinue,  // answered already (proxied): the next request
  kClose,     // end the connection (Session::linger_ says how)
};

Response MethodNotAllowed(std::string_view allow) {
  Response r = Problem(405, "", "use " + std::string(allow));
  r.headers.push_back({"Allow", std::string(allow)});
  return r;
}

// RFC 9112 3.2: an HTTP/1.1 request without Host, any request with more than
// one Host field line or with an invalid Host value is answered 400. Returns
// why, or "" when the Host field is fine.
std::string_view HostProblem(const http::request_header<>& req) {
  auto [first, end] = req.equal_range(http::field::host);
  if (first == end) return req.version() >= 11 ? "an HTTP/1.1 request needs a Host field" : "";
  if (std::next(first) != end) return "more than one Host field";
  // uri-host [ ":" port ]: reg-name, IPv4 or IP-literal characters only.
  for (char c : first->value()) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("-._~!$&'()*+,;=:[]%").find(c) != std::string_view::npos;
    if (!ok) return "the Host field is not a valid host[:port]";
  }
  return "";
}

// Whether a failed read is a client error to answer, rather than the
// connection ending (closed, reset, timed out).
bool Answerable(beast::error_code ec, const Connection& conn) {
  return !conn.timed_out && ec != http::error::end_of_stream && ec != net::error::eof &&
         ec != net::error::operation_aborted && ec != net::error::bad_descriptor &&
         (ec.category() == http::make_error_code(http::error::header_limit).category() ||
          ec.category() == HttpFramingCategory());
}

// The answer to a request head that could not be read, or nullopt to just close.
std::optional<Response> HeadFailure(beast::error_code ec, const Connection& conn,
                                    const ServerConfig& cfg) {
  if (!Answerable(ec, conn)) return std::nullopt;
  Response r = ec == http::error::header_limit || ec == http::error::buffer_overflow
                   ? Problem(431, "",
                             "request line and headers must fit " +
                                 std::to_string(cfg.max_header_bytes) + " bytes")
                   : Problem(400, "", "malformed HTTP request: " + ec.message());
  r.close = true;
  return r;
}

// The answer to a body of our own endpoints that could not be read, or nullopt to just close.
std::optional<Response> BodyFailure(beast::error_code ec, const Connection& conn,
                                    const ServerConfig& cfg) {
  if (conn.timed_out ||
      ec.category() != http::make_error_code(http::error::body_limit).category()) {
    return std::nullopt;
  }
  Response r =
      ec == http::error::body_limit
          ? Problem(413, "",
                    "request bodies must fit " + std::to_string(cfg.max_body_bytes) + " bytes")
      : ec == http::error::header_limit
          ? Problem(
                431, "",
                "the trailer section must fit " + std::to_string(cfg.max_trailer_bytes) + " bytes")
          : Problem(400, "", "malformed HTTP request body: " + ec.message());
  r.close = true;
  return r;
}

// RFC 9112 9.6: after an answer sent with Connection: close the client may
// still be sending its request (a body we refused). Closing with unread data
// makes the kernel send a reset, which can destroy the answer before the
// client reads it; so half-close, then read and discard until the client
// closes, for at most `linger`.
net::awaitable<void> LingeringClose(Connection& conn, Millis linger) {
  beast::error_code ec;
  conn.socket.shutdown(tcp::socket::shutdown_send, ec);
  if (ec || linger.count() == 0) co_return;
  conn.SetDeadline(linger);  // the sweeper closes the socket then
  std::array<char, 4096> sink;
  while (!ec) {
    co_await conn.socket.async_read_some(net::buffer(sink), redirect_error(use_awaitable, ec));
  }
}

template <class Stream>
class Session;

}  // namespace
}  // namespace tollgate::server

// The session's coroutines (its steps, one request after another) take their
// frames from the worker thread's FramePool: none allocated per request.
template <typename T, typename Stream, typename... Args>
struct std::coroutine_traits<boost::asio::awaitable<T>, tollgate::server::Session<Stream>&,
                             Args...> {
  using promise_type = tollgate::server::PooledFrame<T>;
};

namespace tollgate::server {
namespace {

// `Stream` is the connection's socket (tcp::socket&, plain HTTP) or a
// TlsStream over it: a template parameter, so the plain session's reads and
// writes are the socket's own, with no indirection.
template <class Stream>
class Session {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  Session(const RuntimeHolder& runtimes, Worker& w, ListenerKind kind, tcp::socket socket,
          TlsListener* tls)
      : runtimes_(runtimes),
        w_(w),
        kind_(kind),
        conn_(std::move(socket), w.clock),
        guard_(w, conn_),
        rt_(runtimes.Load()),
        active_(*rt_->metrics),
        shard_(rt_->metrics->shard(w.index)),
        // Bounded: a request head, chunk line or trailer section that does not
        // fit fails the read (431 or 400) instead of growing the buffer.
        buffer_(ReadBufferLimit(rt_->cfg())),
        tls_(tls),
        tls_context_(tls ? tls->Current() : nullptr),
        stream_(MakeStream()) {
    out_.reserve(1024);
    headers_.reserve(32);
    if constexpr (kTls) conn_.tls = &stream_;  // the gateway's writes to the client
  }

  net::awaitable<void> Run();

 private:
  const ServerConfig& cfg() const { return rt_->cfg(); }
  Stream MakeStream() {
    if constexpr (kTls) {
      return Stream(conn_.socket, *tls_context_);
    } else {
      return conn_.socket;
    }
  }
  net::awaitable<bool> Handshake();
  net::awaitable<void> CloseNotify();
  net::awaitable<bool> AwaitRequest();
  net::awaitable<beast::error_code> ReadHead(HeadParser& hp);
  net::awaitable<Next> Serve(HeadParser& hp, Exchange& ex);
  bool Screen(const HeadParser& hp, const RouteResult& route, Exchange& ex);
  net::awaitable<Next> Proxy(HeadParser& hp, const RequestView& view, Exchange& ex);
  net::awaitable<Next> ServeOwn(HeadParser& hp, const RouteResult& route, RequestView view,
                                Exchange& ex);
  net::awaitable<beast::error_code> ReadBody(BodyParser& p, ChunkLimits& chunk_limits);
  net::awaitable<bool> ReadBodyAhead(const HeadParser& hp, std::string_view* body);
  net::awaitable<void> Pause(Nanos delay);
  net::awaitable<bool> Respond(Exchange& ex);
  RequestView ViewOf(const http::request_header<>& req);
  void TraceFrom(const http::request_header<>& req, RequestTrace& trace) const;

  const RuntimeHolder& runtimes_;
  Worker& w_;
  const ListenerKind kind_;
  Connection conn_;
  ConnectionGuard guard_;
  std::shared_ptr<const Runtime> rt_;  // refreshed before each request
  uint64_t rt_version_ = 0;
  ActiveConnection active_;
  ServerMetrics::Shard& shard_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::vector<HeaderPair> headers_;  // views into the current parser's message
  std::string out_;
  bool linger_ = false;  // closing after our answer: drain the client first
  TlsListener* tls_;     // null for plain HTTP
  std::shared_ptr<TlsListener::Context> tls_context_;  // kept for the connection's life
  Stream stream_;                                      // conn_.socket, or TLS over it
  bool handshake_done_ = false;
};

template <class Stream>
net::awaitable<void> Session<Stream>::Run() {
  beast::error_code ec;
  conn_.socket.non_blocking(true, ec);  // for WriteNow
  tcp::endpoint remote = conn_.socket.remote_endpoint(ec);
  if (ec) co_return;
  peer_ = PeerAddress(remote);
  if constexpr (kTls) {
    if (!co_await Handshake()) {
      conn_.socket.close(ec);
      co_return;
    }
  }
  while (co_await AwaitRequest()) {
    runtimes_.Refresh(&rt_, &rt_version_);
    // A body read ahead for body: sources raised the buffer's bound for its
    // exchange (ReadBodyAhead): back to the bound of a head.
    if (const size_t limit = ReadBufferLimit(cfg());
        buffer_.max_size() != limit && buffer_.size() <= limit) {
      buffer_.max_size(limit);
      buffer_.shrink_to_fit();
    }
    conn_.SetDeadline(cfg().read_timeout);
    HeadParser hp;
    hp.header_limit(static_cast<std::uint32_t>(cfg().max_header_bytes));
    // The body's limit depends on the endpoint (max_body_bytes or the gateway's):
    // checked once routed, not with Beast's default of 1 MB here (a 400). Not
    // boost::none: Beast 1.74 compares a Content-Length against it as "over".
    hp.body_limit(std::numeric_limits<std::uint64_t>::max());
    Exchange ex;
    Next next = Next::kRespond;
    if (beast::error_code head_ec = co_await ReadHead(hp)) {
      std::optional<Response> failure = HeadFailure(head_ec, conn_, cfg());
      if (!failure) break;
      ex.resp = std::move(*failure);
    } else {
      next = co_await Serve(hp, ex);
    }
    if (next == Next::kContinue) continue;
    if (next == Next::kClose || !co_await Respond(ex)) break;
  }
  if (conn_.timed_out) rt_->metrics->timeouts.fetch_add(1, std::memory_order_relaxed);
  if constexpr (kTls) {
    if (!conn_.timed_out) co_await CloseNotify();
  } else if (linger_ && !conn_.timed_out) {
    co_await LingeringClose(conn_, cfg().lingering_close);
  }
  beast::error_code ignored;
  conn_.socket.shutdown(tcp::socket::shutdown_send, ignored);
  conn_.socket.close(ignored);
}

// The TLS handshake, within one of the listener's handshake slots and its
// handshake_timeout; counted by result. False: the connection is to be closed.
template <class Stream>
net::awaitable<bool> Session<Stream>::Handshake() {
  const bool admin = kind_ == ListenerKind::kAdmin;
  std::optional<TlsListener::HandshakeSlot> slot = tls_->TryHandshake();
  if (!slot) {
    rt_->metrics->CountHandshake(admin, TlsHandshakeResult::kBusy);
    co_return false;
  }
  conn_.SetDeadline(tls_->settings().handshake_timeout);
  beast::error_code ec;
  co_await stream_.async_handshake(net::ssl::stream_base::server,
                                   redirect_error(use_awaitable, ec));
  conn_.ClearDeadline();
  slot->Release();
  if (!ec) {
    handshake_done_ = true;
    rt_->metrics->CountHandshake(admin, TlsHandshakeResult::kOk);
    co_return true;
  }
  const TlsHandshakeResult why =
      conn_.timed_out ? TlsHandshakeResult::kTimeout
                      : ClassifyHandshakeFailure(
                            stream_.native_handle(),
                            ec.category() == net::error::get_ssl_category() ? ec.value() : 0);
  rt_->metrics->CountHandshake(admin, why);
  if (rt_->log->Enabled(LogLevel::kDebug)) {
    rt_->log->Log(LogLevel::kDebug, "tls_handshake_failed",
                  {{"listener", admin ? "admin" : "main"},
                   {"peer", rt_->identities.ShowInLog(peer_)},
                   {"result", TlsHandshakeResultName(why)},
                   {"error", ec.message()}});
  }
  co_return false;
}

// TLS's close_notify, and the client's awaited (it may still be sending the
// request we refused: this drains it), for at most lingering_close and 1 s.
template <class Stream>
net::awaitable<void> Session<Stream>::CloseNotify() {
  const Millis linger = std::min(cfg().lingering_close, Millis(1000));
  if (!handshake_done_ || linger.count() == 0) co_return;
  conn_.SetDeadline(linger);  // the sweeper closes the socket then
  beast::error_code ec;
  co_await stream_.async_shutdown(redirect_error(use_awaitable, ec));
}

// Waits for the first byte of the next request (unless one is buffered).
// False: the connection ends (closed by the client, timed out, or closed by
// the drain: the last answer promised keep-alive, so a request already on
// its way is still answered, with Connection: close).
template <class Stream>
net::awaitable<bool> Session<Stream>::AwaitRequest() {
  if (buffer_.size() > 0) co_return true;
  // A read rather than async_wait: asio re-arms epoll (an epoll_ctl) for
  // every async_wait, while a read op just queues on the registered socket.
  conn_.idle = true;
  conn_.SetDeadline(cfg().idle_timeout);
  beast::error_code ec;
  size_t n = co_await stream_.async_read_some(buffer_.prepare(beast::read_size(buffer_, 65536)),
                                              redirect_error(use_awaitable, ec));
  buffer_.commit(n);
  conn_.idle = false;
  co_return !ec;
}

// The whole header is nearly always buffered already: parse it here, not
// through async_read_header (a composed operation and a scheduler trip). Its
// raw bytes are checked for ambiguous framing before they are consumed.
// A head that arrives in parts (any head past the first read's 512 bytes:
// a browser's) is kept whole in the buffer until it is done: the parser
// takes the request line before the fields are complete, and the check needs
// the whole head from its first byte.
template <class Stream>
net::awaitable<beast::error_code> Session<Stream>::ReadHead(HeadParser& hp) {
  beast::error_code ec;
  size_t parsed = 0;  // bytes of this head the parser has taken so far
  for (;;) {
    const auto* head = static_cast<const char*>(buffer_.data().data());
    const size_t used = parsed + hp.put(net::buffer(head + parsed, buffer_.size() - parsed), ec);
    if (!ec && hp.is_header_done()) {
      ec = AcceptRequestHead({head, used}, hp.get());
    }
    if (ec != http::error::need_more) {
      buffer_.consume(used);
      co_return ec;
    }
    parsed = used;
    const size_t n = co_await stream_.async_read_some(
        buffer_.prepare(beast::read_size(buffer_, 65536)), redirect_error(use_awaitable, ec));
    buffer_.commit(n);
    if (ec) co_return ec;
  }
}

template <class Stream>
RequestView Session<Stream>::ViewOf(const http::request_header<>& req) {
  headers_.clear();
  for (const auto& f : req) headers_.emplace_back(View(f.name_string()), View(f.value()));
  const RequestTarget t = SplitTarget(View(req.target()));
  RequestView view;
  view.method = View(req.method_string());
  view.path = t.path;
  view.query = t.query;
  view.peer_address = peer_;
  view.headers = std::span<const HeaderPair>(headers_.data(), headers_.size());
  return view;
}

// The request's trace context; its sampled flag counts only from a trusted
// proxy (checked only when tracing is on and a traceparent came).
template <class Stream>
void Session<Stream>::TraceFrom(const http::request_header<>& req, RequestTrace& trace) const {
  const std::optional<std::string_view> traceparent = Traceparent(req);
  trace.From(traceparent, traceparent && rt_->tracer && PeerTrusted(cfg(), peer_));
}

template <class Stream>
net::awaitable<Next> Session<Stream>::Serve(HeadParser& hp, Exchange& ex) {
  const auto& req = hp.get();
  ex.keep_alive = req.keep_alive();
  ex.head = req.method() == http::verb::head;
  TraceFrom(req, ex.trace);
  const RequestView view = ViewOf(req);
  const RouteResult route = Route(kind_, view.method, view.path, rt_->exposure);
  ex.endpoint = route.endpoint;
  if (Screen(hp, route, ex)) co_return Next::kRespond;
  if (route.op == Op::kGateway) co_return co_await Proxy(hp, view, ex);
  co_return co_await ServeOwn(hp, route, view, ex);
}

// Refuses what no endpoint may see: a bad Host, a method the route does not
// take, on the gateway and /v1/auth (whose headers are the client's, as nginx
// forwards them) a limit key header sent twice. True when `ex` holds the answer.
template <class Stream>
bool Session<Stream>::Screen(const HeadParser& hp, const RouteResult& route, Exchange& ex) {
  if (std::string_view why = HostProblem(hp.get()); !why.empty()) {
    ex.resp = Problem(400, "Bad request", why);
    ex.resp.close = true;
    ex.endpoint = Endpoint::kInvalid;
    return true;
  }
  if (!route.allow.empty()) {
    ex.resp = MethodNotAllowed(route.allow);
    if (!hp.is_done()) ex.resp.close = true;  // the body is not read
    return true;
  }
  if (route.op != Op::kGateway && route.op != Op::kAuth) return false;
  // A header a rule keys on, sent twice: refused, never a copy picked (issues 14, 29).
  // The live policy, the one the Enforcer decides this request with (the
  // engine's one swap), never a copy of an older generation.
  std::optional<std::string> repeated =
      RepeatedKeyHeader(*rt_->policies->SnapshotOnThisThread().policy, headers_);
  if (!repeated) return false;
  ex.resp = Problem(400, "Bad request", "the limit key header " + *repeated + " was sent twice");
  ex.resp.close = true;
  ex.endpoint = Endpoint::kInvalid;
  return true;
}

// Gateway mode: decide, then forward (server/proxy.h) or answer the rejection.
template <class Stream>
net::awaitable<Next> Session<Stream>::Proxy(HeadParser& hp, const RequestView& view, Exchange& ex) {
  // A JSON body a rule reads (body: sources) is read ahead, within bounds,
  // and handed to the policy as the view's body field.
  RequestView decided = view;
  if (!hp.is_done()) {
    std::string_view body;
    if (!co_await ReadBodyAhead(hp, &body)) co_return Next::kClose;
    if (!body.empty()) {
      headers_.push_back(RequestBodyField(body));
      decided.headers = std::span<const HeaderPair>(headers_.data(), headers_.size());
    }
  }
  // Inline when the store decides inline: no coroutine frame (an if, not ?:
  // around the co_await: GCC 12 destroys such a temporary twice).
  CheckOutcome outcome;
  if (rt_->async_decisions) {
    outcome = co_await DecideAndRecord(*rt_, shard_, decided, &ex.trace);
  } else {
    outcome = DecideAndRecordNow(*rt_, shard_, decided, &ex.trace);
  }
  if (!outcome.allowed()) {
    ex.resp = RejectionResponse(outcome);
    // The request body (if any) was not read: the connection cannot be reused.
    if (hp.content_length().value_or(0) > 0 || hp.chunked()) ex.resp.close = true;
    co_return Next::kRespond;
  }
  // Concurrency leases are held until the upstream exchange ends, however it
  // ends (response relayed, upstream error or timeout, client gone, or this
  // coroutine destroyed at shutdown); the release never blocks the loop.
  const LeaseRelease leases(*rt_->enforcer, std::move(outcome.leases));
  if (outcome.delay.count() > 0) co_await Pause(outcome.delay);
  const int64_t forwarded_ns = rt_->clock->Now();
  // A rule that takes its cost from the response or refunds settles when the
  // exchange ends (however it ends), without blocking the loop; a coroutine
  // destroyed at shutdown never settles (the up-front charge stays).
  std::span<const std::string> capture;
  if (outcome.settlement) capture = outcome.settlement->response_fields();
  ProxyResult pr = co_await ProxyRequest(*rt_, w_, conn_, buffer_, hp, peer_, outcome.headers,
                                         ex.trace.id(), ex.trace.upstream_traceparent(), capture);
  if (outcome.settlement) {
    rt_->enforcer->SettleAsync(std::move(outcome.settlement), std::move(pr.upstream));
  }
  if (pr.status) {
    shard_.CountRequest(Endpoint::kGateway, pr.status);
    // The upstream's answer (or our 502/504 for it) and the time it took, from
    // forwarding to the relayed answer, feed the rollback guards.
    rt_->enforcer->RecordUpstream(outcome, pr.status, Nanos(rt_->clock->Now() - forwarded_ns));
  }
  // pr.keep_alive is what the client was told (Connection: close once draining).
  if (!pr.keep_alive) {
    linger_ = pr.status != 0;
    co_return Next::kClose;
  }
  co_return Next::kContinue;
}

// body:<JSON pointer> sources (docs/configuration.md): the request body read
// ahead of the decision into the read buffer, where the relay (ProxyRequest)
// takes it from as it takes any body bytes already buffered, so it is
// forwarded unchanged. Only when a rule of the live policy reads the body,
// the Content-Type is JSON, the length is known (Content-Length, never
// chunked) and at most kBodyKeyBytes (64 KiB), and no 100-continue is
// awaited (the client would wait for it); otherwise *body stays empty and
// body: sources are absent. The buffer's bound is raised to hold the body
// for this exchange only. Each read is bounded by read_timeout, the whole by
// body_timeout. False: the client went away or was too slow (the connection
// closes).
template <class Stream>
net::awaitable<bool> Session<Stream>::ReadBodyAhead(const HeadParser& hp, std::string_view* body) {
  *body = {};
  const auto length = hp.content_length();  // boost::optional
  if (!length || *length == 0 || *length > kBodyKeyBytes || hp.chunked()) co_return true;
  const auto& req = hp.get();
  const auto type = req.find(http::field::content_type);
  if (type == req.end() || !IsJsonContentType(View(type->value()))) co_return true;
  if (req.find(http::field::expect) != req.end()) co_return true;
  if (!PolicyReadsBody(*rt_->policies->SnapshotOnThisThread().policy)) co_return true;
  const size_t n = static_cast<size_t>(*length);
  const size_t room = n + ReadBufferLimit(cfg());
  if (buffer_.max_size() < room) buffer_.max_size(room);
  const int64_t deadline_ns = rt_->clock->Now() + Nanos(cfg().body_timeout).count();
  while (buffer_.size() < n) {
    if (rt_->clock->Now() >= deadline_ns) co_return false;
    conn_.SetDeadline(cfg().read_timeout);
    beast::error_code ec;
    const size_t got = co_await stream_.async_read_some(
        buffer_.prepare(beast::read_size(buffer_, 65536)), redirect_error(use_awaitable, ec));
    buffer_.commit(got);
    if (ec) co_return false;
  }
  *body = std::string_view(static_cast<const char*>(buffer_.data().data()), n);
  co_return true;
}

// Our own endpoints: the whole (bounded) body first, then CheckAdminRequest
// (the admin listener's Host, the admin token where the route needs it, what
// keeps a web page out), then the route's handler. Bodyless requests (the
// common case: GET /v1/auth) keep the header parser's message.
template <class Stream>
net::awaitable<Next> Session<Stream>::ServeOwn(HeadParser& hp, const RouteResult& route,
                                               RequestView view, Exchange& ex) {
  std::optional<BodyParser> bp;
  ChunkLimits chunk_limits(cfg(), buffer_);  // outlives the body parser's use of it
  if (!hp.is_done()) {
    bp.emplace(std::move(hp));
    if (beast::error_code ec = co_await ReadBody(*bp, chunk_limits)) {
      std::optional<Response> failure = BodyFailure(ec, conn_, cfg());
      if (!failure) co_return Next::kClose;
      ex.resp = std::move(*failure);
      ex.endpoint = Endpoint::kInvalid;
      co_return Next::kRespond;
    }
    // Headers point into the parser's message: rebuilt after the move.
    view = ViewOf(bp->get());
    TraceFrom(bp->get(), ex.trace);
  }
  Request request;
  request.listener = kind_;
  request.view = view;
  request.body = bp ? std::string_view(bp->get().body()) : std::string_view();
  request.trace_id = ex.trace.id();
  request.trace = &ex.trace;
  request.shard = &shard_;
  std::optional<Response> denied = CheckAdminRequest(request, route, *rt_);
  if (denied) {
    ex.resp = std::move(*denied);
  } else {
    ex.resp = co_await HandlerFor(route.op)(request, *rt_);
  }
  co_return Next::kRespond;
}

template <class Stream>
net::awaitable<beast::error_code> Session<Stream>::ReadBody(BodyParser& p,
                                                            ChunkLimits& chunk_limits) {
  p.body_limit(cfg().max_body_bytes);
  p.on_chunk_header(chunk_limits);
  // The header was parsed under the first parser's limit: check the length here.
  if (p.content_length().value_or(0) > cfg().max_body_bytes) co_return http::error::body_limit;
  auto expect = p.get().find(http::field::expect);
  if (expect != p.get().end() && EqualsIgnoreCase(View(expect->value()), "100-continue")) {
    if (beast::error_code ec = co_await WriteContinue(conn_)) co_return ec;
  }
  beast::error_code ec;
  co_await http::async_read(stream_, buffer_, p, redirect_error(use_awaitable, ec));
  co_return ec;
}

// Waits out a leaky-bucket shaper's delay; the connection's deadline is held
// beyond it.
template <class Stream>
net::awaitable<void> Session<Stream>::Pause(Nanos delay) {
  if (delay.count() <= 0) co_return;
  net::steady_timer timer(w_.ioc, delay);
  conn_.SetDeadline(delay + cfg().read_timeout);
  beast::error_code ec;
  co_await timer.async_wait(redirect_error(use_awaitable, ec));
}

// Writes `ex.resp`, counts it and logs it. False: the connection ends.
template <class Stream>
net::awaitable<bool> Session<Stream>::Respond(Exchange& ex) {
  if (ex.resp.delay.count() > 0) co_await Pause(ex.resp.delay);  // no frame without a delay
  const bool reuse = ex.keep_alive && !ex.resp.close && !rt_->state->Draining();
  out_.clear();
  SerializeResponse(ex.resp, reuse, w_.Date(), ex.head, &out_);
  conn_.SetDeadline(cfg().write_timeout);
  beast::error_code ec;
  size_t sent = 0;
  if constexpr (!kTls) sent = WriteNow(conn_.socket, net::buffer(out_), ec);
  if (!ec && sent < out_.size()) {
    co_await net::async_write(stream_, net::buffer(out_.data() + sent, out_.size() - sent),
                              redirect_error(use_awaitable, ec));
  }
  shard_.CountRequest(ex.endpoint, ex.resp.status);
  if (cfg().access_log) {
    rt_->log->Info("request", {{"status", ex.resp.status},
                               {"endpoint", EndpointName(ex.endpoint)},
                               {"peer", rt_->identities.ShowInLog(peer_)},
                               {"trace_id", std::string(ex.trace.id())}});
  }
  if (ec || !reuse) {
    linger_ = !ec;
    co_return false;
  }
  co_return true;
}

}  // namespace

net::awaitable<void> RunSession(const RuntimeHolder& runtimes, Worker& worker, ListenerKind kind,
                                tcp::socket socket, ConnectionLimits::Slot slot, TlsListener* tls) {
  if (tls != nullptr) {
    Session<TlsStream> session(runtimes, worker, kind, std::move(socket), tls);
    co_await session.Run();
  } else {
    Session<tcp::socket&> session(runtimes, worker, kind, std::move(socket), nullptr);
    co_await session.Run();
  }
}

}  // namespace tollgate::server
