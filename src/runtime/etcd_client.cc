#include "runtime/etcd_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/redact.h"
#include "runtime/etcd_http.h"
#include "tls/pem.h"
#include "tollgate/secret_file.h"

namespace tollgate::etcd {
namespace {

using Clock = std::chrono::steady_clock;

// A refusal's body (an error object) is small; more is not etcd.
constexpr size_t kMaxErrorBody = 64 * 1024;

bool IsIpLiteral(const std::string& host) {
  in6_addr ignored{};
  return inet_pton(AF_INET, host.c_str(), &ignored) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &ignored) == 1;
}

// A DNS name as an endpoint may spell it: 1-253 bytes of letters, digits, '-'
// and '.', no empty label, no label starting or ending with '-'.
bool IsHostName(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    const char c = host[i];
    if (c == '.') {
      if (label == 0 || host[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && label > 0)) return false;
    if (++label > 63) return false;
  }
  return host.back() != '-' && host.back() != '.';
}

// What to check when etcd's TLS refused us: OpenSSL's text names the alert.
std::string TlsHint(const std::string& why) {
  if (why.find("certificate required") != std::string::npos ||
      why.find("bad certificate") != std::string::npos ||
      why.find("unknown ca") != std::string::npos) {
    return why +
           " (etcd wants a client certificate its --trusted-ca-file signed: "
           "etcd.tls.cert_file and etcd.tls.key_file)";
  }
  return why;
}

}  // namespace

Result<EtcdUrl> ParseEtcdUrl(const std::string_view whole) {
  std::string_view url = whole;
  EtcdUrl out;
  constexpr std::string_view kPlain = "etcd://";
  constexpr std::string_view kTls = "etcds://";
  if (url.starts_with(kTls)) {
    out.tls = true;
    url.remove_prefix(kTls.size());
  } else if (url.starts_with(kPlain)) {
    url.remove_prefix(kPlain.size());
  } else {
    return InvalidArgument(
        "must start with etcd:// (plain HTTP) or etcds:// (TLS: etcd.tls names the CA file and "
        "the client certificate)");
  }
  const size_t slash = url.find('/');
  if (slash == std::string_view::npos || slash + 1 == url.size()) {
    return InvalidArgument("needs a key after the endpoints: etcd://host:port/key");
  }
  out.key = std::string(url.substr(slash));
  std::string_view hosts = url.substr(0, slash);
  while (!hosts.empty()) {
    const size_t comma = hosts.find(',');
    const std::string_view one = hosts.substr(0, comma);
    hosts = comma == std::string_view::npos ? std::string_view() : hosts.substr(comma + 1);
    if (one.find('@') != std::string_view::npos) {
      return InvalidArgument("endpoint '" + base::RedactUrlPiece(whole, one) +
                             "': user:password@ is not accepted in the URL (it is shown and "
                             "logged): set etcd.username and etcd.password_file");
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
    std::string_view host = one.substr(0, colon);
    in6_addr ignored{};
    if (host.starts_with('[')) {
      if (host.size() < 3 || !host.ends_with(']') ||
          inet_pton(AF_INET6, std::string(host.substr(1, host.size() - 2)).c_str(), &ignored) !=
              1) {
        return InvalidArgument("endpoint '" + base::RedactUrlPiece(whole, one) +
                               "': a bracketed host must be an IPv6 address");
      }
      host = host.substr(1, host.size() - 2);
    } else if (!IsHostName(host)) {
      return InvalidArgument("endpoint '" + base::RedactUrlPiece(whole, one) +
                             "': the host must be a DNS name, an IPv4 address or [IPv6]");
    }
    out.endpoints.emplace_back(std::string(host), port);
    if (out.endpoints.size() > kMaxEndpoints) {
      return InvalidArgument("more than " + std::to_string(kMaxEndpoints) + " endpoints");
    }
  }
  if (out.endpoints.empty()) return InvalidArgument("needs at least one host:port");
  return out;
}

std::shared_ptr<EtcdSession> EtcdSession::Create(const EtcdClientOptions& options, bool tls,
                                                 std::vector<ConfigError>* errors) {
  const size_t before = errors->size();
  std::shared_ptr<EtcdSession> session(new EtcdSession(options));
  if (!options.username.empty() || !options.password_file.empty()) {
    if (options.username.empty()) {
      errors->push_back({"etcd.username", "is required with etcd.password_file"});
    } else if (options.password_file.empty()) {
      errors->push_back(
          {"etcd.password_file", "is required with etcd.username (a file holding the password)"});
    } else if (Result<std::string> pw = session->ReadPassword(); !pw.ok()) {
      errors->push_back({"etcd.password_file", pw.status().message()});
    }
    for (char c : options.username) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        errors->push_back({"etcd.username", "holds a control byte"});
        break;
      }
    }
  }
  if (options.tls.any() && !tls) {
    errors->push_back({"etcd.tls",
                       "is set, but the policy URL is etcd:// (plain HTTP): use "
                       "etcds:// to talk TLS to etcd"});
  }
  if (tls) {
    // A client certificate past its dates is etcd's to refuse (a handshake
    // error saying so), not a reason to refuse the configuration.
    std::vector<ConfigError> warnings;
    session->tls_ =
        MakeClientTlsContext(options.tls, "etcd.tls", std::time(nullptr), errors, &warnings);
  }
  if (errors->size() != before) return nullptr;
  return session;
}

Result<std::string> EtcdSession::ReadPassword() const {
  std::string password, why;
  if (!ReadSecretFile(options_.password_file, &password, &why)) {
    return InvalidArgument(options_.password_file + ": " + why);
  }
  return password;
}

std::string EtcdSession::token() const {
  std::lock_guard<std::mutex> lock(mu_);
  return token_;
}

void EtcdSession::SetToken(std::string token) {
  logins_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  token_ = std::move(token);
}

void EtcdSession::DropToken(const std::string& stale) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token_ == stale) token_.clear();
}

Connection::~Connection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

int Connection::Wait(short events, Clock::time_point deadline) const {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd_, events, 0};
    const int ready = ::poll(&p, 1, int(std::min<int64_t>(left, 60'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return -1;
    if (ready > 0) return 1;
  }
}

Status Connection::Open(const std::pair<std::string, int>& endpoint, const EtcdSession* session,
                        Clock::time_point deadline) {
  const std::string& host = endpoint.first;
  where_ = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(endpoint.second);
  Status s = Connect(host, endpoint.second, deadline);
  if (s.ok() && session != nullptr && session->tls() != nullptr) {
    s = Handshake(host, *session, deadline);
  }
  return s;
}

Status Connection::Connect(const std::string& host, int port, Clock::time_point deadline) {
  // Resolved on every connection: a member's address may change (a pod, a VM).
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return ConnectionError("etcd " + where_ + ": cannot resolve " + host + ": " +
                           ::gai_strerror(rc));
  }
  std::string failures;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (Clock::now() >= deadline) break;
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    int error = rc == 0 ? 0 : errno;
    if (rc != 0 && errno == EINPROGRESS) {
      fd_ = fd;
      const int ready = Wait(POLLOUT, deadline);
      fd_ = -1;
      socklen_t len = sizeof error;
      if (ready <= 0) {
        error = ready == 0 ? ETIMEDOUT : errno;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
        error = errno;
      }
    }
    if (error == 0) {
      fd_ = fd;
      break;
    }
    ::close(fd);
    char text[INET6_ADDRSTRLEN] = "?";
    const void* addr =
        a->ai_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    ::inet_ntop(a->ai_family, addr, text, sizeof text);
    failures += std::string(failures.empty() ? "" : ", ") + text + ": " + std::strerror(error);
  }
  ::freeaddrinfo(found);
  if (fd_ >= 0) return Status::Ok();
  if (failures.empty()) failures = "no address in time";
  return ConnectionError("etcd " + where_ + ": connect: " + failures);
}

Status Connection::Handshake(const std::string& host, const EtcdSession& session,
                             Clock::time_point deadline) {
  ssl_ = SSL_new(session.tls());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    return ConnectionError("etcd " + where_ + ": TLS: " + tls::OpenSslErrors());
  }
  const std::string& name = session.server_name().empty() ? host : session.server_name();
  // SNI carries DNS names only (RFC 6066); an address is checked against the
  // certificate's IP SANs.
  if (!IsIpLiteral(name)) {
    SSL_set_tlsext_host_name(ssl_, name.c_str());
    SSL_set1_host(ssl_, name.c_str());
  } else {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str());
  }
  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) return Status::Ok();
    const int error = SSL_get_error(ssl_, rc);
    int ready = -1;
    if (error == SSL_ERROR_WANT_READ) {
      ready = Wait(POLLIN, deadline);
    } else if (error == SSL_ERROR_WANT_WRITE) {
      ready = Wait(POLLOUT, deadline);
    }
    if (ready == 0) return TimeoutError("etcd " + where_ + ": TLS handshake: no answer in time");
    if (ready > 0) continue;
    std::string why = tls::OpenSslErrors();
    const long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      why += std::string(" (") + X509_verify_cert_error_string(verify) + ": is etcd.tls.ca_file " +
             "the CA that signed etcd's certificate, and does it name " + name + "?)";
    }
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      why = "etcd closed the connection (a client certificate required: etcd.tls.cert_file?)";
    }
    return ConnectionError("etcd " + where_ + ": TLS handshake failed: " + TlsHint(why));
  }
}

Status Connection::Post(std::string_view path, std::string_view body, std::string_view token,
                        Clock::time_point deadline) {
  std::string request = "POST " + std::string(path) + " HTTP/1.1\r\nHost: " + where_ +
                        "\r\nContent-Type: application/json\r\nConnection: close\r\n";
  if (!token.empty()) request += "Authorization: " + std::string(token) + "\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  request.append(body);
  size_t done = 0;
  while (done < request.size()) {
    const char* data = request.data() + done;
    const size_t size = request.size() - done;
    short wait_for = POLLOUT;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, data, int(std::min<size_t>(size, 1 << 30)));
      if (n > 0) {
        done += size_t(n);
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_WANT_READ) {
        wait_for = POLLIN;
      } else if (error != SSL_ERROR_WANT_WRITE) {
        tls_error_ = tls::OpenSslErrors();
        return Error("TLS send");
      }
    } else {
      const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
      if (n > 0) {
        done += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return Error("send");
    }
    const int ready = Wait(wait_for, deadline);
    if (ready == 0) return TimeoutError("etcd " + where_ + ": send: no progress in time");
    if (ready < 0) return Error("send");
  }
  return Status::Ok();
}

ssize_t Connection::Read(std::string* buf, Clock::time_point deadline) {
  char tmp[16384];
  while (true) {
    short wait_for = POLLIN;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, tmp, sizeof tmp);
      if (n > 0) {
        buf->append(tmp, size_t(n));
        return n;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_ZERO_RETURN) return 0;
      if (error == SSL_ERROR_WANT_WRITE) {
        wait_for = POLLOUT;
      } else if (error != SSL_ERROR_WANT_READ) {
        tls_error_ = tls::OpenSslErrors();
        return -2;
      }
    } else {
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n > 0) buf->append(tmp, size_t(n));
      if (n >= 0) return n;
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -2;
    }
    const int ready = Wait(wait_for, deadline);
    if (ready == 0) return -1;
    if (ready < 0) return -2;
  }
}

Status Connection::Error(std::string_view step) const {
  const std::string why = !tls_error_.empty() ? TlsHint(tls_error_) : std::strerror(errno);
  return ConnectionError("etcd " + where_ + ": " + std::string(step) + ": " + why);
}

Status ReadHead(Connection& c, std::string* buf, ReplyHead* out, Clock::time_point deadline,
                bool* rejected_token) {
  *rejected_token = false;
  size_t end;
  while ((end = buf->find("\r\n\r\n")) == std::string::npos) {
    if (buf->size() > kMaxHeadBytes)
      return UnavailableError("etcd " + c.where() + ": head too large");
    const ssize_t n = c.Read(buf, deadline);
    if (n == 0) return UnavailableError("etcd " + c.where() + ": closed before answering");
    if (n == -1) return TimeoutError("etcd " + c.where() + ": no answer in time");
    if (n < 0) return c.Error("read");
  }
  Result<ReplyHead> head = ParseReplyHead(std::string_view(*buf).substr(0, end));
  buf->erase(0, end + 4);
  if (!head.ok()) return UnavailableError("etcd " + c.where() + ": " + head.status().message());
  *out = *head;
  if (head->status == 200) return Status::Ok();
  // A refusal: its body says why ({"error", "code", "message"}), read whole
  // within the same deadline and bound.
  std::string body;
  bool done = false;
  while (!done && body.size() < kMaxErrorBody && buf->size() < kMaxErrorBody) {
    if (head->chunked) {
      if (!Dechunk(buf, &body, &done)) break;
    } else if (head->content_length && buf->size() >= *head->content_length) {
      body = buf->substr(0, *head->content_length);
      done = true;
    }
    if (done) break;
    const ssize_t n = c.Read(buf, deadline);
    if (n == 0 && !head->chunked && !head->content_length) body = *buf;
    if (n <= 0) break;
  }
  std::string why = "HTTP " + std::to_string(head->status);
  if (Result<ErrorReply> error = ParseErrorReply(body); error.ok()) {
    *rejected_token = TokenRejected(*error);
    why += ": " + error->message + " (code " + std::to_string(error->code) + ")";
    if (error->code == kGrpcPermissionDenied) {
      why +=
          "; the etcd user (etcd.username, with etcd.password_file; none: an anonymous "
          "request) needs read and write on the key (etcdctl role grant-permission)";
    } else if (error->message.find("user name is empty") != std::string::npos) {
      why += "; etcd requires authentication: set etcd.username and etcd.password_file";
    }
  } else {
    // Not etcd's JSON error (a proxy's page, the gateway's own text): quoted, bounded.
    std::string text = body.substr(0, kMaxErrorMessage);
    for (char& ch : text) {
      if (ch < 0x20 || ch >= 0x7f) ch = ' ';
    }
    why += ": " + text;
    if (text.find("CommonName") != std::string::npos) {
      why +=
          " (etcd's JSON gateway refuses a client certificate with a subject CommonName: "
          "issue etcd.tls.cert_file without a CN; the etcd user is etcd.username)";
    }
  }
  // 4xx: etcd refused the request (kServer: the same at every member); 5xx:
  // this member cannot serve now (no leader, its gateway's dial failed).
  return Status(head->status < 500 ? StatusCode::kServer : StatusCode::kUnavailable,
                "etcd " + c.where() + ": " + why);
}

namespace {

// One POST on a fresh connection to `endpoint`: the 200 reply's body.
// *rejected_token when etcd refused `token`.
Result<std::string> Exchange(const EtcdOptions& options,
                             const std::pair<std::string, int>& endpoint, std::string_view path,
                             const std::string& request, const std::string& token,
                             bool* rejected_token) {
  *rejected_token = false;
  Connection c;
  std::string buf;
  ReplyHead head;
  // The whole call, connect to last byte, within io_timeout; then the next member.
  const Clock::time_point deadline = Clock::now() + options.io_timeout;
  Status s = c.Open(endpoint, options.session.get(), deadline);
  if (s.ok()) s = c.Post(path, request, token, deadline);
  if (s.ok()) s = ReadHead(c, &buf, &head, deadline, rejected_token);
  const bool chunked = head.chunked;
  std::string body;
  bool done = false;
  while (s.ok() && !done) {
    if (chunked && !Dechunk(&buf, &body, &done)) s = UnavailableError("etcd: malformed chunk");
    if (head.content_length && buf.size() >= *head.content_length) {
      buf.resize(*head.content_length);
      done = true;
    }
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
  if (!s.ok()) return s;
  return chunked ? body : buf;
}

// Logs in on `endpoint`: the new token (also the session's).
Result<std::string> Login(const EtcdOptions& options, const std::pair<std::string, int>& endpoint) {
  EtcdSession& session = *options.session;
  Result<std::string> password = session.ReadPassword();
  if (!password.ok()) return InvalidArgument("etcd.password_file: " + password.status().message());
  bool ignored = false;
  Result<std::string> body =
      Exchange(options, endpoint, "/v3/auth/authenticate",
               AuthenticateRequest(session.username(), *password), "", &ignored);
  if (!body.ok()) {
    if (body.status().code() != StatusCode::kServer) return body.status();
    // etcd answered and refused: the credentials (or auth is off in etcd).
    return InvalidArgument(body.status().message() + " (logging in as etcd.username '" +
                           session.username() + "' with the password in etcd.password_file)");
  }
  Result<std::string> token = ParseAuthReply(*body);
  if (!token.ok()) return UnavailableError("etcd: " + token.status().message());
  session.SetToken(*token);
  return token;
}

// One unary call on `endpoint`, logging in first when the session has no
// token, and once more (then retrying once) when etcd refuses the token.
Result<std::string> UnaryOn(const EtcdOptions& options, const std::pair<std::string, int>& endpoint,
                            std::string_view path, const std::string& request) {
  const bool auth = options.session && options.session->authenticates();
  std::string token = auth ? options.session->token() : "";
  bool fresh = false;
  if (auth && token.empty()) {
    Result<std::string> login = Login(options, endpoint);
    if (!login.ok()) return login.status();
    token = *login;
    fresh = true;
  }
  bool rejected = false;
  Result<std::string> body = Exchange(options, endpoint, path, request, token, &rejected);
  if (body.ok() || !rejected || !auth || fresh) return body;
  options.session->DropToken(token);
  Result<std::string> login = Login(options, endpoint);
  if (!login.ok()) return login.status();
  return Exchange(options, endpoint, path, request, *login, &rejected);
}

// One unary gateway call, trying the endpoints in turn: the reply body. A
// refused login is final (every member would refuse it too).
Result<std::string> Unary(const EtcdOptions& options, std::string_view path,
                          const std::string& request) {
  Status last = UnavailableError("etcd: no endpoints");
  for (const auto& endpoint : options.url.endpoints) {
    Result<std::string> body = UnaryOn(options, endpoint, path, request);
    if (body.ok() || body.status().code() == StatusCode::kInvalidArgument) return body;
    last = body.status();
  }
  return last;
}

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

Result<std::string> TokenFor(const EtcdOptions& options,
                             const std::pair<std::string, int>& endpoint, Clock::time_point) {
  if (!options.session || !options.session->authenticates()) return std::string();
  std::string token = options.session->token();
  if (!token.empty()) return token;
  return Login(options, endpoint);
}

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

Result<int64_t> EtcdPutIfRevision(const EtcdOptions& options, std::string_view value,
                                  int64_t mod_revision) {
  return TxnIfRevision(options, mod_revision, value);
}

Status EtcdDeleteIfRevision(const EtcdOptions& options, int64_t mod_revision) {
  return TxnIfRevision(options, mod_revision, std::nullopt).status();
}

}  // namespace tollgate::etcd
