#include "server/test_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "tollgate/http_text.h"

namespace tollgate::testing {
namespace {

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000),
             static_cast<suseconds_t>((t.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool SendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// Reads more bytes into buf; false on EOF/error/timeout.
bool ReadMore(int fd, std::string& buf) {
  char tmp[16384];
  ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf.append(tmp, size_t(n));
  return true;
}

struct Message {
  std::string start_line;
  std::map<std::string, std::string> headers;
  std::string body;
};

// Reads one HTTP message from fd (with leftover bytes in buf). For responses,
// `head` / status without body are handled by the caller passing no_body.
bool ReadMessage(int fd, std::string& buf, Message* m, bool is_response, bool no_body,
                 std::string* error) {
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (buf.size() > (1 << 20)) {
      *error = "header too large";
      return false;
    }
    if (!ReadMore(fd, buf)) {
      *error = buf.empty() ? "connection closed" : "eof in header";
      return false;
    }
  }
  std::string head = buf.substr(0, end);
  buf.erase(0, end + 4);
  std::istringstream lines(head);
  std::getline(lines, m->start_line);
  if (!m->start_line.empty() && m->start_line.back() == '\r') m->start_line.pop_back();
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = AsciiLowered(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    auto it = m->headers.find(name);
    if (it == m->headers.end()) {
      m->headers[name] = value;
    } else {
      it->second += ", " + value;
    }
  }
  if (no_body) return true;
  auto te = m->headers.find("transfer-encoding");
  auto cl = m->headers.find("content-length");
  if (te != m->headers.end() && AsciiLowered(te->second).find("chunked") != std::string::npos) {
    for (;;) {
      size_t eol;
      while ((eol = buf.find("\r\n")) == std::string::npos) {
        if (!ReadMore(fd, buf)) {
          *error = "eof in chunk size";
          return false;
        }
      }
      size_t size = std::stoul(buf.substr(0, eol), nullptr, 16);
      buf.erase(0, eol + 2);
      if (size == 0) {
        while ((eol = buf.find("\r\n")) != 0) {  // trailers until empty line
          if (eol == std::string::npos) {
            if (!ReadMore(fd, buf)) {
              *error = "eof in trailer";
              return false;
            }
            continue;
          }
          buf.erase(0, eol + 2);
        }
        buf.erase(0, 2);
        return true;
      }
      while (buf.size() < size + 2) {
        if (!ReadMore(fd, buf)) {
          *error = "eof in chunk";
          return false;
        }
      }
      m->body.append(buf, 0, size);
      buf.erase(0, size + 2);
    }
  }
  if (cl != m->headers.end()) {
    size_t n = std::stoul(cl->second);
    while (buf.size() < n) {
      if (!ReadMore(fd, buf)) {
        *error = "eof in body";
        return false;
      }
    }
    m->body = buf.substr(0, n);
    buf.erase(0, n);
    return true;
  }
  if (!is_response) return true;  // request without body
  while (ReadMore(fd, buf)) {
  }
  m->body = std::move(buf);
  buf.clear();
  return true;
}

}  // namespace

int ConnectLoopback(int port, std::chrono::milliseconds timeout, const char* source_ip) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  SetTimeouts(fd, timeout);
  if (source_ip) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source_ip, &local.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

HttpConnection::HttpConnection(int port, std::chrono::milliseconds timeout)
    : fd_(ConnectLoopback(port, Scaled(timeout))) {}
HttpConnection::HttpConnection(int port, const std::string& source_ip,
                               std::chrono::milliseconds timeout)
    : fd_(ConnectLoopback(port, Scaled(timeout), source_ip.c_str())) {}
HttpConnection::~HttpConnection() { Close(); }

void HttpConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HttpConnection::SendRaw(const std::string& bytes) { return fd_ >= 0 && SendAll(fd_, bytes); }

HttpResponse HttpConnection::ReadResponse(bool head) {
  HttpResponse r;
  if (fd_ < 0) {
    r.error = "not connected";
    return r;
  }
  Message m;
  for (;;) {
    m = Message();
    if (!ReadMessage(fd_, buffer_, &m, true, true, &r.error)) return r;
    if (m.start_line.size() < 12) {
      r.error = "bad status line: " + m.start_line;
      return r;
    }
    r.status = std::atoi(m.start_line.c_str() + 9);
    if (r.status != 100) break;
  }
  bool no_body = head || r.status == 204 || r.status == 304;
  if (!no_body) {
    // Re-run the body part with the parsed headers.
    std::string error;
    Message body_only;
    body_only.headers = m.headers;
    auto te = m.headers.find("transfer-encoding");
    auto cl = m.headers.find("content-length");
    if (te != m.headers.end() || cl != m.headers.end()) {
      // Build a fake header block so ReadMessage can parse the body.
      std::string fake = "HTTP/1.1 200 OK\r\n";
      if (te != m.headers.end()) fake += "Transfer-Encoding: " + te->second + "\r\n";
      if (cl != m.headers.end()) fake += "Content-Length: " + cl->second + "\r\n";
      fake += "\r\n";
      buffer_.insert(0, fake);
      Message b;
      if (!ReadMessage(fd_, buffer_, &b, true, false, &r.error)) return r;
      m.body = std::move(b.body);
    } else {
      while (ReadMore(fd_, buffer_)) {
      }
      m.body = std::move(buffer_);
      buffer_.clear();
    }
  }
  r.headers = std::move(m.headers);
  r.body = std::move(m.body);
  std::string conn = AsciiLowered(r.Header("connection"));
  r.keep_alive = conn.find("close") == std::string::npos;
  r.ok = true;
  return r;
}

HttpResponse HttpConnection::Request(const std::string& method, const std::string& target,
                                     const Headers& headers, const std::string& body) {
  // Host: localhost (a name the admin listener answers) unless the caller sends its own.
  const bool has_host = std::any_of(headers.begin(), headers.end(),
                                    [](const auto& h) { return AsciiLowered(h.first) == "host"; });
  std::string req = method + " " + target + " HTTP/1.1\r\n" +
                    (has_host ? std::string() : std::string("Host: localhost\r\n"));
  bool has_length = false;
  for (const auto& [n, v] : headers) {
    req += n + ": " + v + "\r\n";
    has_length =
        has_length || AsciiLowered(n) == "content-length" || AsciiLowered(n) == "transfer-encoding";
  }
  if (!has_length && (!body.empty() || method == "POST" || method == "PUT")) {
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  if (!SendRaw(req)) {
    HttpResponse r;
    r.error = "send failed";
    return r;
  }
  return ReadResponse(method == "HEAD");
}

std::string HttpConnection::ReadAtLeast(size_t n) {
  while (fd_ >= 0 && buffer_.size() < n) {
    if (!ReadMore(fd_, buffer_)) break;
  }
  return buffer_;
}

bool HttpConnection::WaitClosed(std::chrono::milliseconds within) {
  if (fd_ < 0) return true;
  auto end = std::chrono::steady_clock::now() + Scaled(within);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, int(left.count()));
    if (n <= 0) continue;
    char c[4096];
    ssize_t r = ::recv(fd_, c, sizeof c, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    if (r > 0) buffer_.append(c, size_t(r));
  }
}

HttpResponse Fetch(int port, const std::string& method, const std::string& target,
                   const Headers& headers, const std::string& body) {
  HttpConnection c(port);
  if (!c.connected()) {
    HttpResponse r;
    r.error = "connect failed";
    return r;
  }
  return c.Request(method, target, headers, body);
}

std::string PatternBytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 256) & 0xff);
  return s;
}

// ---- TestUpstream ----

void TestUpstream::ReleaseHeld() {
  std::lock_guard lock(hold_mu_);
  ++holds_released_;
  hold_cv_.notify_all();
}

void TestUpstream::SetGateOpen(bool open) {
  std::lock_guard lock(gate_mu_);
  gate_open_ = open;
  gate_cv_.notify_all();
}

int TestUpstream::in_flight() const {
  std::lock_guard lock(gate_mu_);
  return in_flight_;
}

int TestUpstream::peak_in_flight() const {
  std::lock_guard lock(gate_mu_);
  return peak_;
}

void TestUpstream::ResetPeak() {
  std::lock_guard lock(gate_mu_);
  peak_ = in_flight_;
}

bool TestUpstream::WaitInFlight(int n, std::chrono::milliseconds deadline) const {
  std::unique_lock lock(gate_mu_);
  return gate_cv_.wait_for(lock, deadline, [&] { return in_flight_ == n; });
}

TestUpstream::TestUpstream() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(listen_fd_, 512);
  socklen_t len = sizeof a;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TestUpstream::~TestUpstream() {
  {
    std::lock_guard lock(hold_mu_);
    stop_ = true;
    hold_cv_.notify_all();
  }
  SetGateOpen(true);
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    threads = std::move(threads_);
  }
  for (auto& t : threads) t.join();
}

void TestUpstream::AcceptLoop() {
  for (;;) {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      if (stop_) return;
      continue;
    }
    int id = ++connections_;
    SetTimeouts(fd, Scaled(std::chrono::seconds(10)));
    std::lock_guard lock(mu_);
    fds_.push_back(fd);
    threads_.emplace_back([this, fd, id] { Serve(fd, id); });
  }
}

void TestUpstream::Serve(int fd, int id) {
  std::string buf;
  for (;;) {
    Message m;
    std::string error;
    if (!ReadMessage(fd, buf, &m, false, false, &error)) break;
    ++requests_;
    std::istringstream sl(m.start_line);
    std::string method, target, version;
    sl >> method >> target >> version;
    std::string path = target.substr(0, target.find('?'));
    std::string query =
        target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
    int status = 200;
    bool close = AsciiLowered(m.headers["connection"]) == "close";
    if (path == "/slow") {
      // The behaviour under test: answer after `ms`, or at once when the upstream is destroyed
      // (a test that saw its 504 does not wait for the slow answer nobody reads).
      const int ms = std::atoi(query.substr(query.find('=') + 1).c_str());
      std::unique_lock lock(hold_mu_);
      hold_cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_.load(); });
    } else if (path == "/status") {
      status = std::atoi(query.substr(query.find('=') + 1).c_str());
    } else if (path == "/close") {
      close = true;
    } else if (path == "/gate") {
      std::unique_lock lock(gate_mu_);
      ++in_flight_;
      peak_ = std::max(peak_, in_flight_);
      gate_cv_.notify_all();
      gate_cv_.wait_for(lock, Scaled(std::chrono::seconds(60)), [&] { return gate_open_; });
      --in_flight_;
      gate_cv_.notify_all();
    }
    std::string resp;
    size_t n = path == "/bytes" || path == "/truncate" || path == "/hold"
                   ? std::stoul(query.substr(query.find('=') + 1))
                   : 0;
    if (path == "/bytes") {
      std::string body = PatternBytes(n);
      resp =
          "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: X-Up-Hop\r\n"
          "X-Up-Hop: secret\r\nRateLimit: \"upstream\";r=1;t=1\r\nContent-Length: " +
          std::to_string(n) + "\r\n\r\n" + body;
    } else if (path == "/truncate" || path == "/hold") {
      std::string body = PatternBytes(n);
      resp = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(n) + "\r\n\r\n" +
             body.substr(0, n / 2);
      if (!SendAll(fd, resp) || path == "/truncate") break;
      {
        std::unique_lock lock(hold_mu_);
        hold_cv_.wait_for(lock, std::chrono::seconds(10),
                          [&] { return holds_released_ > 0 || stop_; });
        if (holds_released_ > 0) --holds_released_;
      }
      resp = body.substr(n / 2);
    } else if (path == "/tokens" || path == "/tokens-trailer") {
      // An LLM-like upstream: the tokens a response cost in X-LLM-Tokens, in
      // the header (/tokens?n=N&status=S) or in the trailer of a chunked body
      // (/tokens-trailer?n=N, whose header says 0 so the trailer must win).
      auto arg = [&](const std::string& name, const std::string& fallback) {
        const std::string key = name + "=";
        size_t at = query.find(key);
        if (at == std::string::npos) return fallback;
        return query.substr(at + key.size(), query.find('&', at) - at - key.size());
      };
      const std::string tokens = arg("n", "0");
      const std::string code = arg("status", "200");
      if (path == "/tokens") {
        resp = "HTTP/1.1 " + code + " X\r\nX-LLM-Tokens: " + tokens +
               "\r\nContent-Length: 2\r\n\r\nok";
      } else {
        resp = "HTTP/1.1 " + code +
               " X\r\nX-LLM-Tokens: 0\r\nTrailer: X-LLM-Tokens\r\n"
               "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-LLM-Tokens: " +
               tokens + "\r\n\r\n";
      }
    } else if (path == "/bighead") {
      // A response head of about n bytes (Set-Cookie and security headers make
      // heads past the proxy's first 512-byte read common); &dup=1: its
      // Content-Length comes twice, first and last (ambiguous framing).
      const size_t pad = std::stoul(query.substr(query.find("n=") + 2));
      const bool dup = query.find("dup=1") != std::string::npos;
      resp = std::string("HTTP/1.1 200 OK\r\n") + (dup ? "Content-Length: 2\r\n" : "") +
             "X-Pad: " + std::string(pad, 'p') + "\r\nContent-Length: 2\r\n\r\nok";
    } else if (path == "/chunked") {
      resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n";
      for (int i = 0; i < 5; ++i) resp += "5\r\npart" + std::to_string(i) + "\r\n";
      resp += "0\r\n\r\n";
    } else {
      std::ostringstream body;
      body << "{\"method\":\"" << method << "\",\"target\":\"" << target
           << "\",\"connection\":" << id << ",\"body_bytes\":" << m.body.size() << ",\"headers\":{";
      bool first = true;
      for (const auto& [n, v] : m.headers) {
        if (!first) body << ",";
        first = false;
        body << "\"" << n << "\":\"";
        for (char c : v) {
          if (c == '"' || c == '\\') body << '\\';
          body << c;
        }
        body << "\"";
      }
      body << "}}";
      std::string b = body.str();
      resp = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
             "Keep-Alive: timeout=5\r\nX-Upstream: yes\r\nContent-Length: " +
             std::to_string(b.size()) + "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" +
             (method == "HEAD" ? "" : b);
    }
    if (!SendAll(fd, resp) || close || path == "/drop") break;
  }
  ::shutdown(fd, SHUT_RDWR);
  std::lock_guard lock(mu_);
  for (auto& f : fds_) {
    if (f == fd) f = -1;
  }
  ::close(fd);
}

}  // namespace tollgate::testing
