// Internal: a listener's TLS side (tollgate/tls.h builds the contexts).
//
// TlsListener holds the listener's current Asio ssl::context and hands it to
// each new connection, which keeps it (a shared_ptr) for its whole life:
// Reload() (server/tls_reload.h: SIGHUP, or the file watch) builds a new
// context from the files and swaps it in for new connections only, so a
// certificate rotation drops no connection; a new context that cannot be built
// (a file unreadable, a key that does not match) leaves the current one in
// place and returns why.
//
// Handshakes: TryHandshake() takes one of max_handshakes slots for a
// connection's handshake (released when the slot is destroyed); without a free
// slot the connection is closed at once, so a flood of slow or hostile
// handshakes costs a bounded amount of memory and CPU. Each handshake has
// handshake_timeout (the worker's sweeper closes the socket). A handshake never
// blocks a worker: it is asynchronous like every other read.
//
// TlsStream is the session's stream: Beast's ssl_stream over the connection's
// socket (borrowed; the Connection owns it, so the sweeper can close it).
//
// Thread safety: Current(), TryHandshake() and Reload() may be called from any
// thread (a mutex guards the context pointer; the slot count is atomic).
#ifndef TOLLGATE_SERVER_TLS_LISTENER_H_
#define TOLLGATE_SERVER_TLS_LISTENER_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/tls_reload.h"
#include "tollgate/tls.h"

namespace tollgate::server {

struct TlsStream : boost::beast::ssl_stream<boost::asio::ip::tcp::socket&> {
  using ssl_stream::ssl_stream;
};

class TlsListener final : public TlsReloadable {
 public:
  using Context = boost::asio::ssl::context;

  // Null with `errors` (under `path`) when the first context cannot be built.
  static std::unique_ptr<TlsListener> Create(TlsServerSettings settings, std::string path,
                                             int64_t now_unix, std::vector<ConfigError>* errors,
                                             std::vector<ConfigError>* warnings);

  std::shared_ptr<Context> Current() const {
    std::lock_guard lock(mu_);
    return context_;
  }

  class HandshakeSlot {
   public:
    explicit HandshakeSlot(std::atomic<size_t>* count) : count_(count) {}
    HandshakeSlot(HandshakeSlot&& o) noexcept : count_(std::exchange(o.count_, nullptr)) {}
    HandshakeSlot& operator=(HandshakeSlot&&) = delete;
    ~HandshakeSlot() { Release(); }
    void Release() {
      if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
      count_ = nullptr;
    }

   private:
    std::atomic<size_t>* count_;
  };
  std::optional<HandshakeSlot> TryHandshake();

 protected:
  // Builds a new context from the files; swaps it in only when it was built.
  std::vector<ConfigError> Load(int64_t now_unix, std::vector<ConfigError>* warnings) override;

 private:
  TlsListener(TlsServerSettings settings, std::string path)
      : TlsReloadable(std::move(settings), std::move(path)) {}

  mutable std::mutex mu_;
  std::shared_ptr<Context> context_;  // guarded by mu_
  std::atomic<size_t> handshakes_{0};
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_TLS_LISTENER_H_
