#include "trace/exporter.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <functional>

#include "base/redact.h"
#include "trace/otlp_json.h"
#include "trace/otlp_reply.h"

namespace tollgate::trace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

struct OtlpHttpExporter::Endpoint {
  CollectorUrl url;
  std::vector<tcp::endpoint> addresses;
};

Result<CollectorUrl> ParseCollectorUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgument("must start with http:// (OTLP/HTTP without TLS), got \"" +
                           base::RedactUrl(url, 100) + "\"");
  }
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  CollectorUrl out;
  if (slash != std::string_view::npos) out.path = std::string(rest.substr(slash));
  for (char c : out.path) {
    if (c <= ' ' || c == 0x7f || c == '#')
      return InvalidArgument("the path has a byte not allowed");
  }
  std::string_view host = authority, port;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("an IPv6 address lacks its ']'");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') return InvalidArgument("unexpected bytes after ']'");
    if (!after.empty()) port = after.substr(1);
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return InvalidArgument("no host");
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == ':' || c == '_';
    if (!ok) return InvalidArgument("the host has a byte not allowed");
  }
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("the port must be 1-65535");
    }
    out.port = static_cast<uint16_t>(value);
  }
  out.host = std::string(host);
  out.host_header = std::string(authority);
  return out;
}

Result<std::unique_ptr<OtlpHttpExporter>> OtlpHttpExporter::Create(ExporterOptions options) {
  if (options.max_queue == 0 || options.max_batch == 0) {
    return InvalidArgument("max_queue and max_batch must be at least 1");
  }
  if (options.timeout.count() <= 0 || options.flush_interval.count() <= 0) {
    return InvalidArgument("timeout and flush interval must be positive");
  }
  const ReplyLimits& limits = options.reply_limits;
  if (limits.head_bytes < 64 || limits.chunk_line_bytes < 16 || limits.body_bytes < 1) {
    return InvalidArgument("reply limits: head >= 64, chunk line >= 16, body >= 1 bytes");
  }
  auto url = ParseCollectorUrl(options.endpoint);
  if (!url.ok()) return InvalidArgument("endpoint: " + url.status().message());
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->url = std::move(*url);
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto results = resolver.resolve(endpoint->url.host, std::to_string(endpoint->url.port), ec);
  if (ec)
    return InvalidArgument("endpoint: cannot resolve " + endpoint->url.host + ": " + ec.message());
  for (const auto& r : results) endpoint->addresses.push_back(r.endpoint());
  if (endpoint->addresses.empty()) return InvalidArgument("endpoint: no address for the host");
  return std::unique_ptr<OtlpHttpExporter>(
      new OtlpHttpExporter(std::move(options), std::move(endpoint)));
}

OtlpHttpExporter::OtlpHttpExporter(ExporterOptions options, std::unique_ptr<Endpoint> endpoint)
    : options_(std::move(options)), endpoint_(std::move(endpoint)) {
  queue_.reserve(options_.max_queue);
  thread_ = std::thread([this] { Run(); });
}

OtlpHttpExporter::~OtlpHttpExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (active_) static_cast<net::io_context*>(active_)->stop();  // abandons the send in flight
  }
  wake_.notify_one();
  thread_.join();
}

bool OtlpHttpExporter::Enqueue(Span span) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= options_.max_queue) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(span));
    wake = queue_.size() == options_.max_batch;
  }
  if (wake) wake_.notify_one();
  return true;
}

OtlpHttpExporter::Stats OtlpHttpExporter::stats() const {
  Stats s;
  s.exported = exported_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.reply_bytes = reply_bytes_.load(std::memory_order_relaxed);
  s.oversized_replies = oversized_replies_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  s.queued = queue_.size();
  return s;
}

void OtlpHttpExporter::Flush() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flush_ = true;
  }
  wake_.notify_one();
}

void OtlpHttpExporter::Run() {
  std::vector<Span> batch;
  batch.reserve(options_.max_batch);
  for (;;) {
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, options_.flush_interval,
                     [this] { return stopping_ || flush_ || queue_.size() >= options_.max_batch; });
      last = stopping_;
      flush_ = false;
      size_t n = std::min(queue_.size(), options_.max_batch);
      std::move(queue_.begin(), queue_.begin() + n, std::back_inserter(batch));
      queue_.erase(queue_.begin(), queue_.begin() + n);
    }
    if (!batch.empty()) {
      const bool ok = Send(EncodeOtlpJson(batch, options_.service_name), last);
      (ok ? exported_ : failed_).fetch_add(batch.size(), std::memory_order_relaxed);
      batch.clear();
    }
    if (last) return;
  }
}

// One POST, the whole exchange within the timeout: the io_context runs for at
// most that long (less when the destructor stops it), then the socket is
// closed and its handlers drained.
bool OtlpHttpExporter::Send(const std::string& body, bool last) {
  const Millis timeout =
      last ? std::min(options_.timeout, options_.shutdown_timeout) : options_.timeout;
  net::io_context ioc;
  tcp::socket socket(ioc);
  http::request<http::string_body> req(http::verb::post, endpoint_->url.path, 11);
  req.set(http::field::host, endpoint_->url.host_header);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "tollgated-otlp");
  req.keep_alive(false);
  req.body() = body;
  req.prepare_payload();
  // The reply is read a socket read at a time into a bounded reader
  // (trace/otlp_reply.h): past a bound the exchange ends, the reply dropped.
  CollectorReply reply(options_.reply_limits);
  std::array<char, kReplyReadBytes> chunk;
  std::function<void()> read_more = [&] {
    socket.async_read_some(net::buffer(chunk), [&](boost::system::error_code rec, size_t n) {
      if (rec && rec != net::error::eof) return;
      const CollectorReply::State state =
          rec ? reply.Finish() : reply.Feed(std::string_view(chunk.data(), n));
      if (state == CollectorReply::State::kMore) read_more();
    });
  };
  net::async_connect(socket, endpoint_->addresses,
                     [&](boost::system::error_code ec, const tcp::endpoint&) {
                       if (ec) return;
                       http::async_write(socket, req, [&](boost::system::error_code wec, size_t) {
                         if (!wec) read_more();
                       });
                     });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !last) return false;  // the destructor came first: only the last send
    active_ = &ioc;
  }
  ioc.run_for(timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = nullptr;
  }
  boost::system::error_code ignored;
  socket.close(ignored);  // cancels what is pending: its handlers run with an error now
  ioc.restart();
  ioc.run();
  reply_bytes_.fetch_add(reply.bytes_fed(), std::memory_order_relaxed);
  if (reply.overflow()) oversized_replies_.fetch_add(1, std::memory_order_relaxed);
  return reply.success();
}

}  // namespace tollgate::trace
