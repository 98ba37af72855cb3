// SpoeSession: one SPOP connection from HAProxy (`spoe.listen`, docs/haproxy.md).
//
// tollgated's SPOE agent is a front end like /v1/auth: it adapts SPOP to the
// Runtime and decides each NOTIFY's message (server/spoe/spoe_message.h) on
// the one Enforcer with HTTP's answer options, through DecideAndRecord (so
// through Enforcer::CheckAsync when the store is asynchronous: a worker never
// waits on the network), counted and logged as HTTP decisions are. The
// answer is an ACK of set-var actions.
//
// The connection: HAPROXY-HELLO first (within spoe.hello_timeout), answered
// with AGENT-HELLO (SPOP 2.0, the smaller max-frame-size, "pipelining" when
// HAProxy has it; never "fragmentation" or "async"); a health check's HELLO is
// answered and the connection closed. Then NOTIFY frames, decided
// concurrently (pipelining), each ACKed on this connection in completion
// order, at most spoe.max_in_flight decided or waiting to be written at once:
// past that the session stops reading. HAPROXY-DISCONNECT is answered with
// AGENT-DISCONNECT and the connection closed; unknown frame types are
// skipped. Anything malformed (a bad frame, a fragment, a frame over the
// negotiated size) is answered with AGENT-DISCONNECT carrying the SPOP status
// and the connection closed. Deadlines (the worker's sweeper closes the
// socket): a frame's first to last byte and the HELLO within hello_timeout,
// one write within write_timeout, no frame and nothing in flight for
// idle_timeout. A drain closes the connection once nothing is in flight.
//
// Thread safety: a session lives on its worker's thread, as HTTP sessions do.
#ifndef TOLLGATE_SERVER_SPOE_SESSION_H_
#define TOLLGATE_SERVER_SPOE_SESSION_H_

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <optional>
#include <utility>

#include "server/context.h"
#include "server/runtime.h"

namespace tollgate::server {

// The SPOE listener's connection cap (spoe.max_connections). Thread-safe;
// must outlive its slots.
class SpoeConnections {
 public:
  explicit SpoeConnections(size_t max) : max_(max) {}
  class Slot {
   public:
    explicit Slot(SpoeConnections* owner) : owner_(owner) {}
    Slot(Slot&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (owner_) owner_->open_.fetch_sub(1, std::memory_order_relaxed);
    }

   private:
    SpoeConnections* owner_;
  };
  std::optional<Slot> TryAcquire() {
    if (open_.fetch_add(1, std::memory_order_relaxed) >= max_) {
      open_.fetch_sub(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    return Slot(this);
  }
  size_t open() const { return open_.load(std::memory_order_relaxed); }

 private:
  const size_t max_;
  std::atomic<size_t> open_{0};
};

// Serves one accepted connection (bound to worker.ioc) until it ends.
boost::asio::awaitable<void> RunSpoeSession(const RuntimeHolder& runtimes, Worker& worker,
                                            tcp::socket socket, SpoeConnections::Slot slot);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SPOE_SESSION_H_
