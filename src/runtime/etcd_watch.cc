#include "runtime/etcd_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "base/redact.h"
#include "runtime/etcd_http.h"

namespace tollgate::etcd {
namespace {

using Clock = std::chrono::steady_clock;

// One blocking HTTP/1.1 connection to an etcd member, every wait bounded:
// connect and send by SO_SNDTIMEO (Linux applies it to connect), each read by
// the caller's deadline (poll).
class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Open(const std::pair<std::string, int>& endpoint, std::chrono::milliseconds timeout) {
    where_ = endpoint.first + ":" + std::to_string(endpoint.second);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(endpoint.second));
    const std::string host = endpoint.first == "localhost" ? "127.0.0.1" : endpoint.first;
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
      return InvalidArgument("etcd " + where_ + ": not an IPv4 address");
    }
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Error("socket");
    timeval tv{};
    tv.tv_sec = timeout.count() / 1000;
    tv.tv_usec = (timeout.count() % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return Error("connect");
    }
    return Status::Ok();
  }

  Status Post(std::string_view path, std::string_view body) {
    std::string request = "POST " + std::string(path) + " HTTP/1.1\r\nHost: " + where_ +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\n" +
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    request.append(body);
    size_t done = 0;
    while (done < request.size()) {
      const ssize_t n = ::send(fd_, request.data() + done, request.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Error("send");
      done += size_t(n);
    }
    return Status::Ok();
  }

  // Appends what arrives before `deadline` to *buf: > 0 bytes, 0 at the end
  // of the stream, -1 when the deadline passed with nothing, -2 on an error.
  ssize_t Read(std::string* buf, Clock::time_point deadline) {
    char tmp[16384];
    while (true) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return -1;
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, int(std::min<int64_t>(left, 60'000)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return -2;
      if (ready == 0) continue;  // re-checks the deadline
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n > 0) buf->append(tmp, size_t(n));
      if (n >= 0) return n;
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return -2;
    }
  }

  Status Error(std::string_view step) const {
    return ConnectionError("etcd " + where_ + ": " + std::string(step) + ": " +
                           std::strerror(errno));
  }
  const std::string& where() const { return where_; }

 private:
  int fd_ = -1;
  std::string where_;
};

// The response head, once it is complete: status 200 and whether the body is
// chunked. `buf` keeps what follows the head.
Status ReadHead(Connection& c, std::string* buf, bool* chunked, Clock::time_point deadline) {
  size_t end;
  while ((end = buf->find("\r\n\r\n")) == std::string::npos) {
    if (buf->size() > kMaxHeadBytes)
      return UnavailableError("etcd " + c.where() + ": head too large");
    const ssize_t n = c.Read(buf, deadline);
    if (n == 0) return UnavailableError("etcd " + c.where() + ": closed before answering");
    if (n == -1) return TimeoutError("etcd " + c.where() + ": no answer in time");
    if (n < 0) return c.Error("read");
  }
  Result<bool> parsed = ParseReplyHead(std::string_view(*buf).substr(0, end));
  buf->erase(0, end + 4);
  if (!parsed.ok()) return UnavailableError("etcd " + c.where() + ": " + parsed.status().message());
  *chunked = *parsed;
  return Status::Ok();
}

}  // namespace

Result<EtcdUrl> ParseEtcdUrl(const std::string_view whole) {
  std::string_view url = whole;
  constexpr std::string_view kScheme = "etcd://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgument(
        "must start with etcd:// (plain HTTP; TLS to etcd is not supported: use a loopback "
        "etcd gateway or proxy that holds the certificates)");
  }
  url.remove_prefix(kScheme.size());
  const size_t slash = url.find('/');
  if (slash == std::string_view::npos || slash + 1 == url.size()) {
    return InvalidArgument("needs a key after the endpoints: etcd://host:port/key");
  }
  EtcdUrl out;
  out.key = std::string(url.substr(slash));
  std::string_view hosts = url.substr(0, slash);
  while (!hosts.empty()) {
    const size_t comma = hosts.find(',');
    const std::string_view one = hosts.substr(0, comma);
    hosts = comma == std::string_view::npos ? std::string_view() : hosts.substr(comma + 1);
    if (one.find('@') != std::string_view::npos) {
      return InvalidArgument("endpoint '" + base::RedactUrlPiece(whole, one) +
                             "': user:password@ is not supported (etcd authentication is not "
                             "implemented; give tollgated an etcd without auth on a trusted "
                             "network, or a local proxy that authenticates)");
    }
    const size_t colon = one.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return InvalidArgument("endpoint '" + base::RedactUrlPiece(whole, one) +
                             "' must be host:port");
    }
    int port = 0;
    const std::string_view digits = one.substr(colon + 1);
    if (digits.empty() || digits.size() > 5)
      return InvalidArgument("bad port in " + base::RedactUrlPiece(whole, one));
    for (char c : digits) {
      if (c < '0' || c > '9')
        return InvalidArgument("bad port in " + base::RedactUrlPiece(whole, one));
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535)
      return InvalidArgument("bad port in " + base::RedactUrlPiece(whole, one));
    const std::string host(one.substr(0, colon));
    in_addr ignored{};
    if (host != "localhost" && inet_pton(AF_INET, host.c_str(), &ignored) != 1) {
      return InvalidArgument("endpoint '" + base::RedactUrlPiece(whole, one) +
                             "': the host must be an IPv4 address or localhost (names are not "
                             "resolved, IPv6 is not supported)");
    }
    out.endpoints.emplace_back(host, port);
    if (out.endpoints.size() > 16) return InvalidArgument("more than 16 endpoints");
  }
  if (out.endpoints.empty()) return InvalidArgument("needs at least one host:port");
  return out;
}

namespace {

// One unary gateway call, trying the endpoints in turn: the reply body.
Result<std::string> Unary(const EtcdOptions& options, std::string_view path,
                          const std::string& request) {
  Status last = UnavailableError("etcd: no endpoints");
  for (const auto& endpoint : options.url.endpoints) {
    Connection c;
    std::string buf;
    bool chunked = false;
    // The whole call, connect to last byte, within io_timeout; then the next member.
    const Clock::time_point deadline = Clock::now() + options.io_timeout;
    Status s = c.Open(endpoint, options.io_timeout);
    if (s.ok()) s = c.Post(path, request);
    if (s.ok()) s = ReadHead(c, &buf, &chunked, deadline);
    std::string body;
    bool done = false;
    while (s.ok() && !done) {
      if (chunked && !Dechunk(&buf, &body, &done)) s = UnavailableError("etcd: malformed chunk");
      if (!s.ok() || done) break;
      if (buf.size() + body.size() > kMaxReplyBytes + kMaxChunkHeader) {
        s = UnavailableError("etcd " + c.where() + ": reply too large");
        break;
      }
      const ssize_t n = c.Read(&buf, deadline);
      if (n == 0) done = true;
      if (n == -1) s = TimeoutError("etcd " + c.where() + ": reply too slow");
      if (n < -1) s = c.Error("read");
    }
    if (s.ok()) return chunked ? body : buf;
    last = s;
  }
  return last;
}

}  // namespace

Result<RangeReply> EtcdRange(const EtcdOptions& options) {
  Result<std::string> body = Unary(options, "/v3/kv/range", RangeRequest(options.url.key));
  if (!body.ok()) return body.status();
  return ParseRangeReply(*body);
}

Result<int64_t> EtcdPut(const EtcdOptions& options, std::string_view value) {
  Result<std::string> body = Unary(options, "/v3/kv/put", PutRequest(options.url.key, value));
  if (!body.ok()) return body.status();
  Result<RangeReply> reply = ParseRangeReply(*body);  // a put reply is a header, as a range's
  if (!reply.ok()) return reply.status();
  return reply->revision;
}

namespace {

Result<int64_t> TxnIfRevision(const EtcdOptions& options, int64_t mod_revision,
                              std::optional<std::string_view> value) {
  Result<std::string> body =
      Unary(options, "/v3/kv/txn", TxnIfRevisionRequest(options.url.key, mod_revision, value));
  if (!body.ok()) return body.status();
  Result<TxnReply> reply = ParseTxnReply(*body);
  if (!reply.ok()) return reply.status();
  if (!reply->succeeded) {
    return UnavailableError("etcd key " + options.url.key + " changed since revision " +
                            std::to_string(mod_revision) +
                            " (written by someone else); not written");
  }
  return reply->revision;
}

}  // namespace

Result<int64_t> EtcdPutIfRevision(const EtcdOptions& options, std::string_view value,
                                  int64_t mod_revision) {
  return TxnIfRevision(options, mod_revision, value);
}

Status EtcdDeleteIfRevision(const EtcdOptions& options, int64_t mod_revision) {
  return TxnIfRevision(options, mod_revision, std::nullopt).status();
}

EtcdWatch::EtcdWatch(EtcdOptions options, int64_t after_revision, OnValue on_value,
                     OnError on_error)
    : options_(std::move(options)),
      on_value_(std::move(on_value)),
      on_error_(std::move(on_error)),
      thread_([this, after_revision] { Run(after_revision); }) {}

EtcdWatch::~EtcdWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  thread_.join();
}

void EtcdWatch::Run(int64_t after_revision) {
  int64_t revision = after_revision;
  size_t endpoint = 0;
  auto backoff = options_.retry_min;
  bool resync = false;
  while (!stop_.load()) {
    Status s = Status::Ok();
    if (resync) {
      EtcdOptions one = options_;
      one.url.endpoints = {options_.url.endpoints[endpoint]};
      Result<RangeReply> r = EtcdRange(one);
      if (r.ok()) {
        if (r->kv && r->kv->mod_revision > revision) on_value_(r->kv->mod_revision, r->kv->value);
        revision = std::max(revision, r->revision);
        resync = false;
      } else {
        s = r.status();
      }
    }
    if (s.ok() && !resync) s = WatchOnce(endpoint, &revision, &backoff);
    if (stop_.load()) break;
    if (!s.ok()) on_error_(s);
    resync = true;
    endpoint = (endpoint + 1) % options_.url.endpoints.size();
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, backoff, [this] { return stop_.load(); });
    backoff = std::min(backoff * 2, options_.retry_max);
  }
}

Status EtcdWatch::WatchOnce(size_t endpoint, int64_t* revision,
                            std::chrono::milliseconds* backoff) {
  Connection c;
  std::string raw;
  bool chunked = false;
  Status s = c.Open(options_.url.endpoints[endpoint], options_.io_timeout);
  if (s.ok()) s = c.Post("/v3/watch", WatchRequest(options_.url.key, *revision + 1));
  if (s.ok()) s = ReadHead(c, &raw, &chunked, Clock::now() + options_.io_timeout);
  if (!s.ok()) return s;
  Clock::time_point heard = Clock::now();  // the stream's last sign of life
  std::string lines;
  bool done = false;
  while (!stop_.load()) {
    if (chunked) {
      if (!Dechunk(&raw, &lines, &done)) return UnavailableError("etcd: malformed chunk");
    } else {
      lines.append(raw);
      raw.clear();
    }
    std::string line;
    while (TakeWatchLine(&lines, &line)) {
      Result<WatchReply> reply = ParseWatchLine(line);
      if (!reply.ok()) return reply.status();
      if (reply->created) *backoff = options_.retry_min;  // a healthy member again
      for (const WatchEvent& e : reply->events) {
        *revision = std::max(*revision, e.kv.mod_revision);
        if (e.deleted) {
          on_error_(InvalidArgument("etcd key " + options_.url.key +
                                    " was deleted; the running policy stays"));
        } else {
          on_value_(e.kv.mod_revision, e.kv.value);
        }
      }
      if (reply->canceled) {
        return UnavailableError(reply->compact_revision > 0
                                    ? "etcd watch from revision " + std::to_string(*revision + 1) +
                                          " compacted (at " +
                                          std::to_string(reply->compact_revision) + "): re-reading"
                                    : "etcd watch canceled: " + reply->cancel_reason);
      }
    }
    if (lines.size() > kMaxReplyBytes) return UnavailableError("etcd: watch line too large");
    if (done) return UnavailableError("etcd " + c.where() + ": watch stream ended");
    const ssize_t n =
        c.Read(&raw, Clock::now() + std::min(options_.io_timeout, options_.probe_interval));
    if (n == 0) return UnavailableError("etcd " + c.where() + ": connection closed");
    if (n < -1) return c.Error("read");
    if (n > 0) {
      heard = Clock::now();
      continue;
    }
    // Nothing said: a watch may be quiet for hours, or its member frozen (a
    // stopped process keeps its sockets open). Past probe_interval, read the
    // key from the same member: no answer in io_timeout moves to the next
    // one; a newer value than the watch delivered means the stream is stale.
    if (stop_.load() || Clock::now() - heard < options_.probe_interval) continue;
    EtcdOptions one = options_;
    one.url.endpoints = {options_.url.endpoints[endpoint]};
    Result<RangeReply> probe = EtcdRange(one);
    if (!probe.ok()) {
      return UnavailableError("etcd " + c.where() + ": watch silent and a read failed (" +
                              probe.status().message() + "); trying the next member");
    }
    if (probe->kv && probe->kv->mod_revision > *revision) {
      return UnavailableError("etcd " + c.where() + ": watch behind the key (revision " +
                              std::to_string(probe->kv->mod_revision) + "); re-reading");
    }
    heard = Clock::now();
  }
  return Status::Ok();
}

}  // namespace tollgate::etcd
