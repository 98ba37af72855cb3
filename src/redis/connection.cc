#include "redis/connection.h"

#include "redis/gcra_script.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <charconv>
#include <cstring>
#include <utility>

namespace tollgate::redis {

namespace asio = boost::asio;
using boost::system::error_code;

void AppendRespHeader(std::string& out, char kind, size_t n) {
  char buf[24];
  buf[0] = kind;
  char* end = std::to_chars(buf + 1, buf + sizeof(buf) - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, static_cast<size_t>(end - buf));
}

void AppendBulk(std::string& out, std::string_view arg) {
  AppendRespHeader(out, '$', arg.size());
  out.append(arg);
  out.append("\r\n", 2);
}

void AppendBulk(std::string& out, int64_t value) {
  char buf[24];
  const char* end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  AppendBulk(out, std::string_view(buf, static_cast<size_t>(end - buf)));
}

void AppendCommand(std::string& out, int argc, const char** argv, const size_t* lens) {
  AppendRespHeader(out, '*', static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) AppendBulk(out, std::string_view(argv[i], lens[i]));
}

void AppendCommand(std::string& out, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  AppendCommand(out, static_cast<int>(argv.size()), ptrs.data(), lens.data());
}

RedisReply ToRedisReply(const redisReply* r) {
  RedisReply out;
  if (r == nullptr) return out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(ToRedisReply(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

namespace {

namespace ssl = asio::ssl;

// OpenSSL's reason ("certificate verify failed") plus, when the chain or name
// check failed, which check ("self-signed certificate in certificate chain").
std::string TlsErrorText(const error_code& ec, SSL* ssl_handle = nullptr) {
  std::string text = ec.message();
  if (ssl_handle != nullptr) {
    const long verify = SSL_get_verify_result(ssl_handle);
    if (verify != X509_V_OK) {
      text += std::string(": ") + X509_verify_cert_error_string(verify);
    }
  }
  return text;
}

}  // namespace

Result<TlsContextPtr> MakeTlsContext(const RedisOptions& o) {
  if (!o.tls) return TlsContextPtr();
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return InvalidArgument("redis tls: tls_cert_file and tls_key_file must be given together");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  if (ec) return InvalidArgument("redis tls: " + TlsErrorText(ec));
  if (o.tls_ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return InvalidArgument("redis tls: system trust store: " + TlsErrorText(ec));
  } else {
    ctx->load_verify_file(o.tls_ca_file, ec);
    if (ec) {
      return InvalidArgument("redis tls: tls_ca_file '" + o.tls_ca_file + "': " + TlsErrorText(ec));
    }
  }
  if (!o.tls_cert_file.empty()) {
    ctx->use_certificate_chain_file(o.tls_cert_file, ec);
    if (ec) {
      return InvalidArgument("redis tls: tls_cert_file '" + o.tls_cert_file +
                             "': " + TlsErrorText(ec));
    }
    ctx->use_private_key_file(o.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      return InvalidArgument("redis tls: tls_key_file '" + o.tls_key_file +
                             "': " + TlsErrorText(ec));
    }
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      return InvalidArgument("redis tls: tls_key_file '" + o.tls_key_file +
                             "' does not match tls_cert_file '" + o.tls_cert_file + "'");
    }
  }
  ctx->set_verify_mode(o.tls_insecure_skip_verify ? ssl::verify_none : ssl::verify_peer, ec);
  if (ec) return InvalidArgument("redis tls: " + TlsErrorText(ec));
  return ctx;
}

Connection::Connection(asio::io_context& io, const RedisOptions& options, std::string_view script,
                       Listener* listener, TlsContextPtr tls)
    : io_(io),
      options_(options),
      script_(script),
      listener_(listener),
      socket_(io),
      tls_(std::move(tls)) {
  in_.resize(64 * 1024);
}

Connection::~Connection() = default;

std::string Endpoint(const RedisOptions& o) { return o.host + ":" + std::to_string(o.port); }

void Connection::Connect() {
  if (state_ == State::kConnecting || state_ == State::kReady) return;
  state_ = State::kConnecting;
  connect_deadline_ = IoNow(options_) + options_.connect_timeout;
  const uint64_t gen = ++generation_;
  reader_ = std::make_unique<ReplyReader>();
  // A fresh TLS stream (and socket) per attempt: an older one may still have
  // aborted operations in flight, which keep it alive through their handlers.
  tls_stream_ = tls_ ? std::make_shared<TlsStream>(io_, *tls_) : nullptr;
  auto self = shared_from_this();
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
  resolver->async_resolve(
      options_.host, std::to_string(options_.port),
      [this, self, gen, resolver, keep = tls_stream_](
          const error_code& ec, asio::ip::tcp::resolver::results_type results) {
        if (gen != generation_) return;
        if (ec) {
          Fail(ConnectionError("redis " + Endpoint(options_) + ": resolve: " + ec.message()));
          return;
        }
        asio::async_connect(
            tcp(), results,
            [this, self, gen, keep](const error_code& ec, const asio::ip::tcp::endpoint&) {
              if (gen != generation_) return;
              if (ec) {
                Fail(ConnectionError("redis " + Endpoint(options_) + ": connect: " + ec.message()));
                return;
              }
              error_code ignored;
              tcp().set_option(asio::ip::tcp::no_delay(true), ignored);
              if (tls_stream_) {
                StartTlsHandshake();
                return;
              }
              Read();
              StartHandshake();
            });
      });
}

void Connection::StartTlsHandshake() {
  const std::string& name =
      options_.tls_server_name.empty() ? options_.host : options_.tls_server_name;
  SSL* handle = tls_stream_->native_handle();
  error_code ec;
  asio::ip::make_address(name, ec);
  const bool is_ip = !ec;
  // SNI carries DNS names only (RFC 6066); the name check is OpenSSL's own, so
  // a mismatch reports X509_V_ERR_HOSTNAME_MISMATCH / IP_ADDRESS_MISMATCH.
  if (!is_ip) SSL_set_tlsext_host_name(handle, name.c_str());
  if (!options_.tls_insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(handle);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int set = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                          : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (set != 1) {
      Fail(ConnectionError("redis " + Endpoint(options_) + ": TLS: cannot verify name '" + name +
                           "'"));
      return;
    }
  }
  const uint64_t gen = generation_;
  auto self = shared_from_this();
  tls_stream_->async_handshake(
      ssl::stream_base::client, [this, self, gen, keep = tls_stream_](const error_code& ec) {
        if (gen != generation_) return;
        if (ec) {
          Fail(ConnectionError("redis " + Endpoint(options_) + ": TLS handshake failed: " +
                               TlsErrorText(ec, keep->native_handle())));
          return;
        }
        Read();
        StartHandshake();
      });
}

void Connection::StartHandshake() {
  std::string resp;
  int replies = 0;
  if (!options_.password.empty()) {
    if (options_.username.empty()) {
      AppendCommand(resp, {"AUTH", options_.password});
    } else {
      AppendCommand(resp, {"AUTH", options_.username, options_.password});
    }
    ++replies;
  }
  if (options_.db != 0) {
    AppendCommand(resp, {"SELECT", std::to_string(options_.db)});
    ++replies;
  }
  // Without a script (a sentinel, a ROLE probe) PING ends the handshake:
  // sentinels know neither SCRIPT nor SELECT.
  if (script_.empty()) {
    AppendCommand(resp, {"PING"});
  } else {
    AppendCommand(resp, {"SCRIPT", "LOAD", std::string(script_)});
  }
  ++replies;
  out_ += resp;
  pending_.push_back(Pending{
      replies,
      connect_deadline_,
      [this](Status st, std::vector<ReplyPtr>& got) {
        if (!st.ok()) return;  // Fail() already reported it
        for (auto& r : got) {
          if (r->type == REDIS_REPLY_ERROR) {
            Fail(ConnectionError("redis " + Endpoint(options_) +
                                 ": handshake: " + std::string(r->str, r->len)));
            return;
          }
        }
        const redisReply* sha = got.back().get();
        if (script_.empty()) {
          // PING answered (an error reply was refused above).
        } else if (sha->type != REDIS_REPLY_STRING ||
                   !IsScriptSha(std::string_view(sha->str, sha->len))) {
          Fail(ConnectionError("redis " + Endpoint(options_) + ": SCRIPT LOAD returned no sha"));
          return;
        }
        if (!script_.empty()) sha_.assign(sha->str, sha->len);
        state_ = State::kReady;
        last_error_ = Status::Ok();
        listener_->OnReady(*this);
      },
      {}});
  Flush();
}

void Connection::Send(std::string&& resp, int replies, SteadyTime deadline, Handler done) {
  if (state_ != State::kReady) {
    std::vector<ReplyPtr> none;
    done(ConnectionError("redis " + Endpoint(options_) + ": not connected"), none);
    return;
  }
  if (out_.empty()) {
    out_ = std::move(resp);
  } else {
    out_ += resp;
  }
  pending_.push_back(Pending{replies, deadline, std::move(done), {}});
  Flush();
}

void Connection::Flush() {
  if (write_busy_ || out_.empty()) return;
  write_busy_ = true;
  writing_.clear();
  writing_.swap(out_);
  const uint64_t gen = generation_;
  auto self = shared_from_this();
  if (tls_stream_) {  // chosen once per connection; the plain path is unchanged
    asio::async_write(*tls_stream_, asio::buffer(writing_),
                      [this, self, gen, keep = tls_stream_](const error_code& ec, size_t) {
                        OnWritten(gen, ec);
                      });
    return;
  }
  asio::async_write(socket_, asio::buffer(writing_),
                    [this, self, gen](const error_code& ec, size_t) { OnWritten(gen, ec); });
}

void Connection::OnWritten(uint64_t gen, const error_code& ec) {
  if (gen != generation_) return;
  write_busy_ = false;
  if (ec) {
    Fail(ConnectionError("redis " + Endpoint(options_) + ": write: " + ec.message()));
    return;
  }
  Flush();
}

void Connection::Read() {
  const uint64_t gen = generation_;
  auto self = shared_from_this();
  if (tls_stream_) {
    tls_stream_->async_read_some(
        asio::buffer(in_), [this, self, gen, keep = tls_stream_](const error_code& ec, size_t n) {
          OnRead(gen, ec, n);
        });
    return;
  }
  socket_.async_read_some(
      asio::buffer(in_), [this, self, gen](const error_code& ec, size_t n) { OnRead(gen, ec, n); });
}

void Connection::OnRead(uint64_t gen, const error_code& ec, size_t n) {
  if (gen != generation_) return;
  if (ec) {
    // A TLS peer that closes without close_notify reads as stream_truncated.
    const bool closed = ec == asio::error::eof || ec == ssl::error::stream_truncated;
    Fail(ConnectionError("redis " + Endpoint(options_) + ": " +
                         (closed ? std::string("connection closed by server")
                                 : (tls_stream_ ? "TLS read: " : "read: ") + ec.message())));
    return;
  }
  OnData(n);
  if (gen == generation_) Read();
}

void Connection::OnData(size_t n) {
  const uint64_t gen = generation_;
  if (!reader_->Feed(in_.data(), n)) {
    Fail(ConnectionError("redis " + Endpoint(options_) + ": protocol error: " + reader_->error()));
    return;
  }
  for (;;) {
    ReplyPtr reply;
    if (!reader_->Next(&reply)) {
      Fail(
          ConnectionError("redis " + Endpoint(options_) + ": protocol error: " + reader_->error()));
      return;
    }
    if (reply == nullptr) return;
    if (pending_.empty()) {
      if (state_ == State::kReady && on_push_) {
        on_push_(std::move(reply));
        if (gen != generation_) return;  // the handler closed the connection
        continue;
      }
      Fail(ConnectionError("redis " + Endpoint(options_) + ": unexpected reply"));
      return;
    }
    Pending& front = pending_.front();
    front.got.push_back(std::move(reply));
    if (static_cast<int>(front.got.size()) < front.replies) continue;
    Pending done = std::move(front);
    pending_.pop_front();
    done.done(Status::Ok(), done.got);
    if (gen != generation_) return;  // the handler closed the connection
  }
}

void Connection::CheckDeadlines(SteadyTime now) {
  if (state_ == State::kConnecting && now > connect_deadline_) {
    Fail(TimeoutError("redis " + Endpoint(options_) + ": not connected within " +
                      std::to_string(options_.connect_timeout.count()) + "ms"));
    return;
  }
  if (state_ == State::kReady && !pending_.empty() && now > pending_.front().deadline) {
    Fail(TimeoutError("redis " + Endpoint(options_) + " did not answer within " +
                      std::to_string(options_.call_timeout.count()) + "ms"));
  }
}

void Connection::Fail(const Status& why) {
  if (state_ == State::kClosed || state_ == State::kIdle) return;
  ++generation_;
  state_ = State::kClosed;
  last_error_ = why;
  error_code ignored;
  tcp().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  tcp().close(ignored);
  out_.clear();
  writing_.clear();
  write_busy_ = false;
  std::deque<Pending> failed;
  failed.swap(pending_);
  for (auto& p : failed) {
    std::vector<ReplyPtr> none;
    p.done(why, none);
  }
  listener_->OnDown(*this, why);
}

}  // namespace tollgate::redis
