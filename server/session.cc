#include "server/session.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <optional>

#include "server/chunk_limits.h"
#include "server/handlers.h"
#include "server/http_framing.h"
#include "server/http_util.h"
#include "server/proxy.h"
#include "server/secrets.h"
#include "server/write_now.h"

namespace tollgate::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using net::redirect_error;
using net::use_awaitable;

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

// Counts the connection as active for its lifetime.
struct ActiveConnection {
  explicit ActiveConnection(ServerMetrics& m) : m_(m) {
    m_.connections_active.fetch_add(1, std::memory_order_relaxed);
  }
  ~ActiveConnection() { m_.connections_active.fetch_sub(1, std::memory_order_relaxed); }
  ServerMetrics& m_;
};

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

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

}  // namespace

net::awaitable<CheckOutcome> Decide(Shared& s, const RequestView& request) {
  if (!s.async_store) co_return s.enforcer->Check(request);
  auto ex = co_await net::this_coro::executor;
  co_return co_await AsyncCheck(*s.enforcer, request, ex, use_awaitable);
}

net::awaitable<void> RunSession(Shared& s, Worker& w, ListenerKind kind, tcp::socket socket,
                                ConnectionLimits::Slot slot) {
  Connection conn(std::move(socket));
  ConnectionGuard guard(w, conn);
  ActiveConnection active(*s.metrics);
  ServerMetrics::Shard& shard = s.metrics->shard(w.index);
  const ServerConfig& cfg = s.config;

  beast::error_code ec;
  conn.socket.non_blocking(true, ec);  // for WriteNow
  std::string peer;
  {
    tcp::endpoint remote = conn.socket.remote_endpoint(ec);
    if (ec) co_return;
    net::ip::address addr = remote.address();
    if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
      addr = net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6());
    }
    peer = addr.to_string();
  }
  // Bounded: a request head, chunk line or trailer section that does not fit
  // fails the read (431 or 400) instead of growing the buffer.
  beast::flat_buffer buffer(ReadBufferLimit(cfg));
  bool linger = false;  // closing after our answer: drain the client first
  std::string out;
  out.reserve(1024);
  std::vector<HeaderPair> headers;
  headers.reserve(32);

  for (;;) {
    if (buffer.size() == 0) {
      if (s.draining.load(std::memory_order_relaxed)) break;
      // A read rather than async_wait: asio re-arms epoll (an epoll_ctl) for
      // every async_wait, while a read op just queues on the registered socket.
      conn.idle = true;
      conn.SetDeadline(cfg.idle_timeout);
      size_t n = co_await conn.socket.async_read_some(
          buffer.prepare(beast::read_size(buffer, 65536)), redirect_error(use_awaitable, ec));
      buffer.commit(n);
      conn.idle = false;
      if (ec) break;
    }
    conn.SetDeadline(cfg.read_timeout);
    http::request_parser<http::empty_body> hp;
    hp.header_limit(static_cast<std::uint32_t>(cfg.max_header_bytes));
    // The body's limit depends on the endpoint (max_body_bytes or the gateway's):
    // checked once routed, not with Beast's default of 1 MB here (a 400). Not
    // boost::none: Beast 1.74 compares a Content-Length against it as "over".
    hp.body_limit(std::numeric_limits<std::uint64_t>::max());
    // The whole header is nearly always buffered already: parse it here, not
    // through async_read_header (a composed operation and a scheduler trip). Its
    // raw bytes are checked for ambiguous framing before they are consumed.
    for (;;) {
      const size_t used = hp.put(buffer.data(), ec);
      if (!ec && hp.is_header_done()) {
        ec = AcceptRequestHead({static_cast<const char*>(buffer.data().data()), used}, hp.get());
      }
      buffer.consume(used);
      if (ec != http::error::need_more) break;
      const size_t n = co_await conn.socket.async_read_some(
          buffer.prepare(beast::read_size(buffer, 65536)), redirect_error(use_awaitable, ec));
      buffer.commit(n);
      if (ec) break;
    }

    Response resp;
    Endpoint ep = Endpoint::kInvalid;
    bool keep_alive = false;
    bool head = false;
    std::string_view trace_id;
    if (ec) {
      if (conn.timed_out || ec == http::error::end_of_stream || ec == net::error::eof ||
          ec == net::error::operation_aborted || ec == net::error::bad_descriptor ||
          (ec.category() != http::make_error_code(http::error::header_limit).category() &&
           ec.category() != HttpFramingCategory())) {
        if (conn.timed_out && buffer.size() > 0) {
          // A partial request timed out: say so if the socket still works.
        }
        break;
      }
      resp = ec == http::error::header_limit || ec == http::error::buffer_overflow
                 ? Problem(431, "",
                           "request line and headers must fit " +
                               std::to_string(cfg.max_header_bytes) + " bytes")
                 : Problem(400, "", "malformed HTTP request: " + ec.message());
      resp.close = true;
    } else {
      auto& req = hp.get();
      keep_alive = req.keep_alive();
      head = req.method() == http::verb::head;
      std::string_view target(req.target().data(), req.target().size());
      Target t = SplitTarget(target);
      TraceContext trace;
      if (auto it = req.find("traceparent"); it != req.end()) {
        trace = ParseTraceparent(std::string_view(it->value().data(), it->value().size()));
        trace_id = trace.trace_id;
      }
      headers.clear();
      for (const auto& f : req) {
        headers.emplace_back(std::string_view(f.name_string().data(), f.name_string().size()),
                             std::string_view(f.value().data(), f.value().size()));
      }

      RouteResult route = Route(kind, View(req.method_string()), t.path, s.exposure);
      ep = route.endpoint;
      if (std::string_view why = HostProblem(req); !why.empty()) {
        resp = Problem(400, "Bad request", why);
        resp.close = true;
        ep = Endpoint::kInvalid;
      } else if (!route.allow.empty()) {
        resp = MethodNotAllowed(route.allow);
        if (!hp.is_done()) resp.close = true;  // the body is not read
      }
      // A header a rule keys on, sent twice: refused, never a copy picked (issue 14).
      if (ep == Endpoint::kGateway) {
        if (std::optional<std::string> repeated =
                RepeatedKeyHeader(*s.enforcer->policies().Current(), headers)) {
          resp =
              Problem(400, "Bad request", "the limit key header " + *repeated + " was sent twice");
          resp.close = true;
          ep = Endpoint::kInvalid;
        }
      }
      if (ep == Endpoint::kInvalid || !route.allow.empty()) {
        // Answered above.
      } else if (ep == Endpoint::kGateway) {
        RequestView view;
        view.method = std::string_view(req.method_string().data(), req.method_string().size());
        view.path = t.path;
        view.query = t.query;
        view.peer_address = peer;
        view.headers = std::span<const HeaderPair>(headers.data(), headers.size());
        int64_t t0 = SteadyNowNs();
        CheckOutcome outcome;
        if (s.async_store) {
          outcome = co_await Decide(s, view);  // not in ?: (GCC 12 coroutine bug)
        } else {
          outcome = s.enforcer->Check(view);
        }
        RecordOutcome(s, shard, outcome, SteadyNowNs() - t0, &view, trace_id);
        if (outcome.allowed()) {
          if (outcome.delay.count() > 0) {
            net::steady_timer timer(w.ioc, outcome.delay);
            conn.SetDeadline(outcome.delay + cfg.read_timeout);
            co_await timer.async_wait(redirect_error(use_awaitable, ec));
          }
          ProxyResult pr =
              co_await ProxyRequest(s, w, conn, buffer, hp, peer, outcome.headers, trace_id);
          if (pr.status) shard.CountRequest(ep, pr.status);
          if (!pr.keep_alive || s.draining.load(std::memory_order_relaxed)) {
            linger = pr.status != 0;
            break;
          }
          continue;
        }
        resp = RejectionResponse(outcome);
        // The request body (if any) was not read: the connection cannot be reused.
        if (hp.content_length().value_or(0) > 0 || hp.chunked()) resp.close = true;
      } else {
        // Our own endpoints read the whole (bounded) body first. Bodyless requests
        // (the common case: GET /v1/auth) keep the header parser's message.
        std::optional<http::request_parser<http::string_body>> bp;
        ChunkLimits chunk_limits(cfg, buffer);
        if (!hp.is_done()) {
          bp.emplace(std::move(hp));
          auto& p = *bp;
          p.body_limit(cfg.max_body_bytes);
          p.on_chunk_header(chunk_limits);
          // The header was parsed under the first parser's limit: check the length here.
          if (p.content_length().value_or(0) > cfg.max_body_bytes) ec = http::error::body_limit;
          auto expect = p.get().find(http::field::expect);
          if (!ec && expect != p.get().end() &&
              EqualsIgnoreCase(std::string_view(expect->value().data(), expect->value().size()),
                               "100-continue")) {
            static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            co_await net::async_write(conn.socket, net::buffer(kContinue.data(), kContinue.size()),
                                      redirect_error(use_awaitable, ec));
            if (ec) break;
          }
          if (!ec) {
            co_await http::async_read(conn.socket, buffer, p, redirect_error(use_awaitable, ec));
          }
          // Headers point into the parser's message: rebuild after the move.
          headers.clear();
          for (const auto& f : p.get()) {
            headers.emplace_back(std::string_view(f.name_string().data(), f.name_string().size()),
                                 std::string_view(f.value().data(), f.value().size()));
          }
          target = std::string_view(p.get().target().data(), p.get().target().size());
          t = SplitTarget(target);
          if (auto it = p.get().find("traceparent"); it != p.get().end()) {
            trace = ParseTraceparent(std::string_view(it->value().data(), it->value().size()));
            trace_id = trace.trace_id;
          }
        }
        const http::request_header<>& rq =
            bp ? static_cast<const http::request_header<>&>(bp->get())
               : static_cast<const http::request_header<>&>(hp.get());
        std::string_view body = bp ? std::string_view(bp->get().body()) : std::string_view();
        if (ec) {
          if (conn.timed_out ||
              ec.category() != http::make_error_code(http::error::body_limit).category()) {
            break;
          }
          resp = ec == http::error::body_limit
                     ? Problem(413, "",
                               "request bodies must fit " + std::to_string(cfg.max_body_bytes) +
                                   " bytes")
                 : ec == http::error::header_limit
                     ? Problem(431, "",
                               "the trailer section must fit " +
                                   std::to_string(cfg.max_trailer_bytes) + " bytes")
                     : Problem(400, "", "malformed HTTP request body: " + ec.message());
          resp.close = true;
          ep = Endpoint::kInvalid;
        } else if (ep == Endpoint::kAuth) {
          RequestView view;
          view.method = std::string_view(rq.method_string().data(), rq.method_string().size());
          view.path = "/";
          view.peer_address = peer;
          view.headers = std::span<const HeaderPair>(headers.data(), headers.size());
          RequestView probe = view;
          if (auto m = probe.Header("x-original-method")) view.method = *m;
          if (auto u = probe.Header("x-original-uri")) {
            Target ot = SplitTarget(*u);
            view.path = ot.path;
            view.query = ot.query;
          }
          int64_t t0 = SteadyNowNs();
          CheckOutcome outcome;
          if (s.async_store) {
            outcome = co_await Decide(s, view);  // not in ?: (GCC 12 coroutine bug)
          } else {
            outcome = s.enforcer->Check(view);
          }
          RecordOutcome(s, shard, outcome, SteadyNowNs() - t0, &view, trace_id);
          resp.headers.reserve(outcome.headers.size() + 1);
          for (HeaderField& h : outcome.headers) {
            // A 403/204 carries no body: the problem body's type would mislead.
            if (!EqualsIgnoreCase(h.name, "content-type")) resp.headers.push_back(std::move(h));
          }
          if (outcome.allowed()) {
            resp.status = 204;
            if (outcome.delay.count() > 0) {
              net::steady_timer timer(w.ioc, outcome.delay);
              conn.SetDeadline(outcome.delay + cfg.read_timeout);
              co_await timer.async_wait(redirect_error(use_awaitable, ec));
            }
          } else {
            resp.status = 403;
            resp.headers.push_back(
                {"X-RateLimit-Decision",
                 outcome.verdict == CheckOutcome::Verdict::kReject ? "reject" : "unavailable"});
          }
        } else if (ep == Endpoint::kDecide) {
          {
            DecideInput input;
            std::vector<ConfigError> errors = ParseDecideBody(body, &input);
            if (!errors.empty()) {
              resp = Problem(400, "Invalid decision request", "see errors", errors);
            } else if (input.request) {
              RequestView view = input.request->View();
              int64_t t0 = SteadyNowNs();
              CheckOutcome outcome;
              if (s.async_store) {
                outcome = co_await Decide(s, view);  // not in ?: (GCC 12 coroutine bug)
              } else {
                outcome = s.enforcer->Check(view);
              }
              RecordOutcome(s, shard, outcome, SteadyNowNs() - t0, &view, trace_id);
              resp = RenderDecision(outcome);
            } else {
              int64_t t0 = SteadyNowNs();
              Result<CheckOutcome> outcome = s.enforcer->CheckItems(input.items);
              if (!outcome.ok()) {
                resp = Problem(400, "Invalid decision request", outcome.status().message());
              } else {
                RecordOutcome(s, shard, *outcome, SteadyNowNs() - t0, nullptr, trace_id);
                resp = RenderDecision(*outcome);
              }
            }
          }
        } else if (ep == Endpoint::kHealth) {
          resp = t.path == "/healthz" ? HandleHealthz(s) : HandleReadyz(s);
        } else if (ep == Endpoint::kMetrics || ep == Endpoint::kAdmin) {
          // With an admin token, /metrics needs it too (on either listener; Prometheus
          // sends it via `authorization: {credentials: ...}`): only the probes are exempt.
          RequestView probe;
          probe.headers = std::span<const HeaderPair>(headers.data(), headers.size());
          auto authz = probe.Header("authorization");
          if (!s.bearer.empty() && (!authz || !SecretEquals(*authz, s.bearer))) {
            resp = Problem(401, "", "admin endpoints need the bearer token");
            resp.headers.push_back({"WWW-Authenticate", "Bearer realm=\"tollgated-admin\""});
          } else if (ep == Endpoint::kMetrics) {
            resp = HandleMetrics(s);
          } else if (t.path == "/v1/reload") {
            resp = HandleReload(s);
          } else if (t.path == "/v1/policy") {
            resp = HandlePolicy(s);
          } else if (t.path == "/v1/top") {
            resp = HandleTop(s, t.query);
          } else if (t.path == "/v1/explain" && RawRequested(t.query) && s.bearer.empty() &&
                     !s.identities.raw()) {
            resp = RawNeedsToken();
          } else if (t.path == "/v1/explain") {
            {
              DescribedRequest d;
              std::vector<ConfigError> errors = ParseExplainQuery(t.query, &d);
              if (!errors.empty()) {
                resp = Problem(400, "Invalid explain query", "see errors", errors);
              } else {
                RequestView view = d.View();
                CheckOutcome outcome = s.enforcer->Explain(view);
                resp = RenderExplain(outcome, d, s.enforcer->ClientIp(view), s.identities,
                                     RawRequested(t.query));
              }
            }
          } else {
            resp = Problem(404, "",
                           "admin endpoints: /v1/reload /v1/policy /v1/top "
                           "/v1/explain /metrics /healthz /readyz");
          }
        } else {
          resp = Problem(404, "", "no such endpoint");
        }
      }
    }

    bool draining = s.draining.load(std::memory_order_relaxed);
    bool reuse = keep_alive && !resp.close && !draining;
    out.clear();
    SerializeResponse(resp, reuse, w.Date(), head, &out);
    conn.SetDeadline(cfg.write_timeout);
    size_t sent = WriteNow(conn.socket, net::buffer(out), ec);
    if (!ec && sent < out.size()) {
      co_await net::async_write(conn.socket, net::buffer(out.data() + sent, out.size() - sent),
                                redirect_error(use_awaitable, ec));
    }
    shard.CountRequest(ep, resp.status);
    if (cfg.access_log) {
      s.log->Info("request", {{"status", resp.status},
                              {"endpoint", EndpointName(ep)},
                              {"peer", s.identities.ShowInLog(peer)},
                              {"trace_id", std::string(trace_id)}});
    }
    if (ec || !reuse) {
      linger = !ec;
      break;
    }
  }
  if (conn.timed_out) s.metrics->timeouts.fetch_add(1, std::memory_order_relaxed);
  if (linger && !conn.timed_out) co_await LingeringClose(conn, cfg.lingering_close);
  beast::error_code ignored;
  conn.socket.shutdown(tcp::socket::shutdown_send, ignored);
  conn.socket.close(ignored);
}

}  // namespace tollgate::server
