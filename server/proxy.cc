#include "server/proxy.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "server/http_util.h"

namespace tollgate::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using net::redirect_error;
using net::use_awaitable;

constexpr size_t kRelayBuffer = 16 * 1024;

// Removes hop-by-hop fields (RFC 9110 7.6.1), including those Connection names.
// Transfer-Encoding stays: the serializer re-frames the body from it.
template <class Fields>
void RemoveHopByHop(Fields& f) {
  std::vector<std::string> named;
  for (auto it = f.find(http::field::connection);
       it != f.end() && it->name() == http::field::connection; ++it) {
    for (auto token : http::token_list(it->value())) {
      std::string name(token.data(), token.size());
      if (!EqualsIgnoreCase(name, "transfer-encoding")) named.push_back(std::move(name));
    }
  }
  for (const auto& n : named) f.erase(n);
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

Response ErrorFor(int status, std::string_view detail) {
  Response r = Problem(status, status == 504 ? "Gateway timeout" : "Bad gateway", detail);
  r.close = true;
  return r;
}

}  // namespace

net::awaitable<ProxyResult> ProxyRequest(Shared& s, Worker& w, Connection& client,
                                         beast::flat_buffer& client_buffer,
                                         http::request_parser<http::empty_body>& header_parser,
                                         std::string_view peer_ip,
                                         const std::vector<HeaderField>& response_headers) {
  const ServerConfig& cfg = s.config;
  ServerMetrics::Shard& shard = s.metrics->shard(w.index);
  beast::error_code ec;

  http::request_parser<http::buffer_body> p(std::move(header_parser));
  p.body_limit(cfg.gateway_max_body_bytes);
  auto& req = p.get();
  if (p.content_length().value_or(0) > cfg.gateway_max_body_bytes) {
    Response r =
        Problem(413, "Content too large",
                "request bodies must fit " + std::to_string(cfg.gateway_max_body_bytes) + " bytes");
    r.close = true;
    std::string out;
    SerializeResponse(r, false, w.Date(), false, &out);
    client.SetDeadline(cfg.write_timeout);
    co_await net::async_write(client.socket, net::buffer(out), redirect_error(use_awaitable, ec));
    co_return ProxyResult{413, false};
  }
  const bool client_keep_alive = req.keep_alive();
  const bool head = req.method() == http::verb::head;
  bool expect_continue = false;
  if (auto e = req.find(http::field::expect); e != req.end()) {
    expect_continue =
        EqualsIgnoreCase(std::string_view(e->value().data(), e->value().size()), "100-continue");
    req.erase(http::field::expect);
  }

  // Rewrite the request header for the upstream.
  RemoveHopByHop(req);
  std::string forwarded_for;
  if (auto x = req.find("X-Forwarded-For"); x != req.end()) {
    forwarded_for.assign(x->value().data(), x->value().size());
    forwarded_for += ", ";
  }
  forwarded_for += peer_ip;
  req.set("X-Forwarded-For", forwarded_for);
  if (req.find("X-Forwarded-Host") == req.end()) {
    if (auto h = req.find(http::field::host); h != req.end()) {
      req.set("X-Forwarded-Host", std::string(h->value().data(), h->value().size()));
    }
  }
  if (req.find("X-Forwarded-Proto") == req.end()) req.set("X-Forwarded-Proto", "http");
  req.set(http::field::host, s.upstream.host_header);
  if (!s.upstream.base_path.empty()) {
    std::string target = s.upstream.base_path;
    target.append(req.target().data(), req.target().size());
    req.target(target);
  }
  const unsigned client_version = req.version();
  req.version(11);
  const bool has_body = !p.is_done();

  // A relay buffer from the worker's spares (returned on every exit path).
  std::unique_ptr<char[]> buf;
  if (!w.relay_buffers.empty()) {
    buf = std::move(w.relay_buffers.back());
    w.relay_buffers.pop_back();
  } else {
    buf.reset(new char[kRelayBuffer]);
  }
  struct ReturnBuffer {
    Worker& w;
    std::unique_ptr<char[]>& b;
    ~ReturnBuffer() {
      if (b && w.relay_buffers.size() < 64) w.relay_buffers.push_back(std::move(b));
    }
  } return_buffer{w, buf};
  auto send_error = [&](int status, std::string_view detail,
                        ServerMetrics::UpstreamError kind) -> net::awaitable<ProxyResult> {
    shard.upstream_errors[kind].fetch_add(1, std::memory_order_relaxed);
    Response r = ErrorFor(status, detail);
    std::string out;
    SerializeResponse(r, false, w.Date(), head, &out);
    client.SetDeadline(cfg.write_timeout);
    beast::error_code wec;
    co_await net::async_write(client.socket, net::buffer(out), redirect_error(use_awaitable, wec));
    co_return ProxyResult{status, false};
  };

  if (expect_continue && has_body) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    client.SetDeadline(cfg.write_timeout);
    co_await net::async_write(client.socket, net::buffer(kContinue.data(), kContinue.size()),
                              redirect_error(use_awaitable, ec));
    if (ec) co_return ProxyResult{0, false};
  }

  std::optional<http::serializer<true, http::buffer_body>> sr;
  std::optional<UpstreamLease> up;
  beast::flat_buffer ubuf;
  std::optional<http::response_parser<http::buffer_body>> rp;
  for (int attempt = 0;; ++attempt) {
    // 1. A connection: pooled if a fresh one is there, else a new one.
    std::unique_ptr<Connection> c;
    bool reused = false;
    while (!w.idle_upstream.empty() && !c) {
      c = std::move(w.idle_upstream.back());
      w.idle_upstream.pop_back();
      if (Stale(c->socket)) c.reset();
    }
    if (c) {
      reused = true;
    } else {
      c = std::make_unique<Connection>(tcp::socket(w.ioc));
      c->upstream = true;
    }
    up.emplace(w, std::move(c));
    sr.emplace(req);
    shard.upstream_requests.fetch_add(1, std::memory_order_relaxed);
    if (!reused) {
      (*up)->SetDeadline(cfg.upstream_connect_timeout);
      co_await net::async_connect((*up)->socket, s.upstream_endpoints,
                                  redirect_error(use_awaitable, ec));
      if (ec) {
        bool timeout = (*up)->timed_out;
        co_return co_await send_error(
            timeout ? 504 : 502,
            timeout ? "upstream connect timed out" : "upstream refused the connection",
            timeout ? ServerMetrics::kTimeout : ServerMetrics::kConnect);
      }
      beast::error_code ignored;
      (*up)->socket.set_option(tcp::no_delay(true), ignored);
    }

    // 2. The request: the header goes out with the first piece of the body (one
    //    write), then the rest of the body streamed piece by piece.
    (*up)->SetDeadline(cfg.upstream_timeout);
    do {
      if (!p.is_done()) {
        req.body().data = buf.get();
        req.body().size = kRelayBuffer;
        client.SetDeadline(cfg.read_timeout);
        co_await http::async_read(client.socket, client_buffer, p,
                                  redirect_error(use_awaitable, ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec) {
          if (ec == http::error::body_limit) {
            Response r = Problem(
                413, "Content too large",
                "request bodies must fit " + std::to_string(cfg.gateway_max_body_bytes) + " bytes");
            r.close = true;
            std::string out;
            SerializeResponse(r, false, w.Date(), head, &out);
            client.SetDeadline(cfg.write_timeout);
            co_await net::async_write(client.socket, net::buffer(out),
                                      redirect_error(use_awaitable, ec));
            co_return ProxyResult{413, false};
          }
          co_return ProxyResult{0, false};  // the client went away or timed out
        }
        req.body().size = kRelayBuffer - req.body().size;
        req.body().data = buf.get();
        req.body().more = !p.is_done();
      } else {
        req.body().data = nullptr;
        req.body().size = 0;
        req.body().more = false;
      }
      (*up)->SetDeadline(cfg.upstream_timeout);
      co_await http::async_write((*up)->socket, *sr, redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec && reused && attempt == 0 && !has_body) break;  // stale pooled connection: retry
      if (ec) {
        co_return co_await send_error(
            (*up)->timed_out ? 504 : 502,
            (*up)->timed_out ? "upstream timed out reading the request"
                             : "upstream connection broke",
            (*up)->timed_out ? ServerMetrics::kTimeout : ServerMetrics::kBroken);
      }
    } while (!p.is_done() && !sr->is_done());
    if (ec) continue;

    // 3. The response header (1xx interim responses are skipped).
    ubuf.clear();
    (*up)->SetDeadline(cfg.upstream_timeout);
    for (;;) {
      rp.emplace();
      rp->body_limit(std::numeric_limits<std::uint64_t>::max());
      if (head) rp->skip(true);
      co_await http::async_read_header((*up)->socket, ubuf, *rp, redirect_error(use_awaitable, ec));
      if (ec) break;
      int code = rp->get().result_int();
      if (code < 100 || code >= 200 || code == 101) break;
    }
    if (ec) {
      bool retryable = reused && attempt == 0 && !has_body && !(*up)->timed_out &&
                       (ec == http::error::end_of_stream || ec == net::error::connection_reset ||
                        ec == net::error::eof);
      if (retryable) {
        continue;
      }
      bool timeout = (*up)->timed_out;
      co_return co_await send_error(
          timeout ? 504 : 502,
          timeout ? "upstream did not answer in time" : "upstream sent no valid response",
          timeout ? ServerMetrics::kTimeout : ServerMetrics::kBroken);
    }
    break;
  }

  // 4. The response: rewrite the header, add the rate-limit headers, stream the body.
  auto& res = rp->get();
  const int status = res.result_int();
  const bool upstream_keep_alive = rp->keep_alive();
  RemoveHopByHop(res);
  for (const HeaderField& h : response_headers) res.set(h.name, h.value);
  bool keep_alive = client_keep_alive && !s.draining.load(std::memory_order_relaxed);
  if (rp->need_eof() && !head) {
    if (client_version == 11 && keep_alive) {
      res.chunked(true);
    } else {
      keep_alive = false;
    }
  }
  res.version(11);
  res.keep_alive(keep_alive);
  // The header goes out with the first piece of the body (one write).
  http::serializer<false, http::buffer_body> rs{res};
  do {
    if (!rp->is_done()) {
      res.body().data = buf.get();
      res.body().size = kRelayBuffer;
      (*up)->SetDeadline(cfg.upstream_timeout);
      co_await http::async_read((*up)->socket, ubuf, *rp, redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec == http::error::end_of_stream && rp->is_done()) ec = {};
      if (ec) {
        shard.upstream_errors[(*up)->timed_out ? ServerMetrics::kTimeout : ServerMetrics::kBroken]
            .fetch_add(1, std::memory_order_relaxed);
        co_return ProxyResult{status, false};  // half-sent: only closing can tell the client
      }
      res.body().size = kRelayBuffer - res.body().size;
      res.body().data = buf.get();
      res.body().more = !rp->is_done();
    } else {
      res.body().data = nullptr;
      res.body().size = 0;
      res.body().more = false;
    }
    client.SetDeadline(cfg.write_timeout);
    co_await http::async_write(client.socket, rs, redirect_error(use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return ProxyResult{status, false};
  } while (!rp->is_done() && !rs.is_done());

  if (upstream_keep_alive && rp->is_done() && ubuf.size() == 0 &&
      !s.draining.load(std::memory_order_relaxed)) {
    up->Release(cfg.upstream_max_idle);
  }
  co_return ProxyResult{status, keep_alive};
}

}  // namespace tollgate::server
