#include "server/spoe_session.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "server/endpoints.h"
#include "server/spoe/spoe_message.h"
#include "server/spoe/spop.h"

namespace tollgate::server {
namespace {

using net::redirect_error;
using net::use_awaitable;

// A NOTIFY of HAProxy's carries the messages of one event: a few at most.
constexpr size_t kMaxMessages = 16;
constexpr size_t kMaxArguments = 256;
// Bytes read at once beyond the largest frame.
constexpr size_t kReadChunk = 16 * 1024;

class SpoeSession {
 public:
  SpoeSession(const RuntimeHolder& runtimes, Worker& w, tcp::socket socket)
      : runtimes_(runtimes),
        w_(w),
        conn_(std::move(socket), w.clock),
        guard_(w, conn_),
        rt_(runtimes.Load()),
        shard_(rt_->metrics->shard(w.index)),
        wake_(w.ioc),
        max_frame_(uint32_t(rt_->cfg().spoe_max_frame_size)),
        buffer_(spop::kLengthPrefix + max_frame_ + kReadChunk) {
    spoe().connections.fetch_add(1, std::memory_order_relaxed);
    spoe().connections_total.fetch_add(1, std::memory_order_relaxed);
  }
  ~SpoeSession() { spoe().connections.fetch_sub(1, std::memory_order_relaxed); }

  net::awaitable<void> Run();

 private:
  const ServerConfig& cfg() const { return rt_->cfg(); }
  SpoeCounters& spoe() { return shard_.spoe; }
  int64_t After(Millis d) const { return w_.clock.Now() + Nanos(d).count(); }
  // The earliest deadline that applies now, given to the sweeper.
  void Rearm();
  net::awaitable<bool> ReadFrame(std::string_view* frame);
  net::awaitable<void> Handle(spop::Frame frame);
  net::awaitable<void> Decide(std::string payload, uint64_t stream_id, uint64_t frame_id);
  // Queues `bytes`, one frame of type `type` (counted as written when queued).
  void Enqueue(std::string bytes, SpoeFrame type);
  net::awaitable<void> Writer();
  // Answers `error` with AGENT-DISCONNECT and stops reading.
  void Fail(spop::Error error, std::string_view detail);
  net::awaitable<void> WaitWake();
  void Wake() { wake_.cancel(); }
  // Once closing, nothing in flight and the last frame written: the socket
  // closes, which also ends a read waiting on it.
  void CloseWhenDone() {
    if (!closing_ || in_flight_ > 0 || writing_) return;
    boost::system::error_code ec;
    conn_.socket.shutdown(tcp::socket::shutdown_both, ec);
    conn_.socket.close(ec);
  }

  const RuntimeHolder& runtimes_;
  Worker& w_;
  Connection conn_;
  ConnectionGuard guard_;
  std::shared_ptr<const Runtime> rt_;  // refreshed before each decision
  uint64_t rt_version_ = 0;
  ServerMetrics::Shard& shard_;
  net::steady_timer wake_;  // cancelled when a decision or a write ends
  uint32_t max_frame_;      // ours until the HELLO, then the negotiated size
  bool hello_done_ = false;
  bool closing_ = false;  // a DISCONNECT is queued or the peer is gone: read no more
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // buffered bytes not yet cut into frames
  size_t in_flight_ = 0;        // NOTIFYs being decided
  size_t queued_acks_ = 0;      // ACKs decided, not yet written
  std::string out_, sending_;
  bool writing_ = false;
  int64_t read_deadline_ = 0, write_deadline_ = 0, idle_deadline_ = 0;
};

void SpoeSession::Rearm() {
  int64_t d = 0;
  auto take = [&d](int64_t x) {
    if (x != 0 && (d == 0 || x < d)) d = x;
  };
  const bool partial = begin_ < end_;
  const bool quiet = in_flight_ == 0 && !writing_;
  if (writing_) take(write_deadline_);
  if (partial || !hello_done_) {
    take(read_deadline_);
  } else if (quiet) {
    take(idle_deadline_);
  }
  conn_.deadline_ns = d;
  conn_.idle = hello_done_ && !partial && quiet;
}

net::awaitable<void> SpoeSession::WaitWake() {
  boost::system::error_code ec;
  wake_.expires_at(net::steady_timer::time_point::max());
  co_await wake_.async_wait(redirect_error(use_awaitable, ec));
}

net::awaitable<bool> SpoeSession::ReadFrame(std::string_view* frame) {
  for (;;) {
    size_t consumed = 0;
    const std::string_view buffered(buffer_.data() + begin_, end_ - begin_);
    switch (spop::CutFrame(buffered, max_frame_, frame, &consumed)) {
      case spop::Cut::kFrame:
        begin_ += consumed;
        if (begin_ == end_) begin_ = end_ = 0;
        if (begin_ < end_) read_deadline_ = After(cfg().spoe_hello_timeout);
        Rearm();
        co_return true;
      case spop::Cut::kTooBig:
        Fail(spop::Error::kTooBig, "");
        co_return false;
      case spop::Cut::kNeedMore:
        break;
    }
    if (begin_ > 0) {  // the next frame starts at the buffer's front
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    boost::system::error_code ec;
    const size_t n = co_await conn_.socket.async_read_some(
        net::buffer(buffer_.data() + end_, buffer_.size() - end_),
        redirect_error(use_awaitable, ec));
    if (ec || closing_) {
      closing_ = true;
      co_return false;
    }
    if (end_ == 0) read_deadline_ = After(cfg().spoe_hello_timeout);  // a frame begins
    end_ += n;
    Rearm();
  }
}

void SpoeSession::Enqueue(std::string bytes, SpoeFrame type) {
  out_ += bytes;
  spoe().Count(type);
  if (type == SpoeFrame::kAck) ++queued_acks_;
  if (writing_) return;
  writing_ = true;
  net::co_spawn(w_.ioc, Writer(), net::detached);
}

net::awaitable<void> SpoeSession::Writer() {
  size_t acks = 0;
  while (!out_.empty()) {
    sending_.swap(out_);
    out_.clear();
    acks = queued_acks_;
    write_deadline_ = After(cfg().spoe_write_timeout);
    Rearm();
    boost::system::error_code ec;
    co_await net::async_write(conn_.socket, net::buffer(sending_),
                              redirect_error(use_awaitable, ec));
    sending_.clear();
    queued_acks_ -= acks;
    if (ec) {
      spoe().Count(SpoeError::kWriteFailed);
      closing_ = true;
      out_.clear();
      queued_acks_ = 0;
      boost::system::error_code ignored;
      conn_.socket.close(ignored);
      break;
    }
  }
  writing_ = false;
  idle_deadline_ = After(cfg().spoe_idle_timeout);
  Rearm();
  Wake();
  CloseWhenDone();
}

void SpoeSession::Fail(spop::Error error, std::string_view detail) {
  if (closing_) return;
  closing_ = true;
  std::string frame;
  spop::AppendAgentDisconnect(error, spop::ErrorMessage(error), &frame);
  spoe().Count(SpoeErrorKind(error));
  Enqueue(std::move(frame), SpoeFrame::kAgentDisconnect);
  rt_->log->Warn("spoe_protocol_error", {{"status_code", uint32_t(error)},
                                         {"error", std::string(spop::ErrorMessage(error))},
                                         {"detail", std::string(detail)}});
}

net::awaitable<void> SpoeSession::Decide(std::string payload, uint64_t stream_id,
                                         uint64_t frame_id) {
  std::vector<spop::Message> messages;
  const spop::Error e = spop::ParseNotify(payload, &messages, kMaxMessages, kMaxArguments);
  spop::ActionList actions;
  if (e != spop::Error::kNone) {
    Fail(e, "NOTIFY");
  } else {
    const spop::Message* message = nullptr;
    for (const spop::Message& m : messages) {
      if (m.name == cfg().spoe_message) {
        message = &m;
        break;
      }
    }
    if (message == nullptr) {
      spoe().Count(SpoeResult::kNoMessage);
    } else {
      spop::SpoeRequest request;
      std::string why = spop::RequestFromMessage(*message, &request);
      if (!why.empty()) {
        spoe().Count(SpoeResult::kMessageError);
        actions.SetString(spop::Scope::kTransaction, "message_error", why);
      } else {
        runtimes_.Refresh(&rt_, &rt_version_);
        std::shared_ptr<const Runtime> rt = rt_;  // this decision's, across the await
        const RequestView view = request.View();
        CheckOutcome outcome;
        if (rt->async_decisions) {
          outcome = co_await DecideAndRecord(*rt, shard_, view, nullptr);
        } else {
          outcome = DecideAndRecordNow(*rt, shard_, view, nullptr);
        }
        spoe().Count(SpoeDecisionResult(outcome.allowed(), outcome.http_status));
        spop::ActionsFromOutcome(outcome, max_frame_ - spop::FrameSize(stream_id, frame_id, 0),
                                 &actions);
      }
    }
  }
  --in_flight_;
  spoe().in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (!closing_) {
    std::string frame;
    spop::AppendAck(stream_id, frame_id, actions, &frame);
    Enqueue(std::move(frame), SpoeFrame::kAck);
  }
  idle_deadline_ = After(cfg().spoe_idle_timeout);
  Rearm();
  Wake();
  CloseWhenDone();
}

net::awaitable<void> SpoeSession::Handle(spop::Frame frame) {
  switch (frame.type) {
    case spop::FrameType::kHaproxyHello:
      Fail(spop::Error::kInvalid, "a second HAPROXY-HELLO");
      break;
    case spop::FrameType::kHaproxyDisconnect: {
      closing_ = true;
      std::string out;
      spop::AppendAgentDisconnect(spop::Error::kNone, spop::ErrorMessage(spop::Error::kNone), &out);
      Enqueue(std::move(out), SpoeFrame::kAgentDisconnect);
      break;
    }
    case spop::FrameType::kNotify:
      while (!closing_ && in_flight_ + queued_acks_ >= cfg().spoe_max_in_flight) {
        co_await WaitWake();
      }
      if (closing_) break;
      ++in_flight_;
      spoe().in_flight.fetch_add(1, std::memory_order_relaxed);
      net::co_spawn(w_.ioc, Decide(std::string(frame.payload), frame.stream_id, frame.frame_id),
                    net::detached);
      break;
    default:
      break;  // "Unknown frames may be silently skipped" (doc/SPOE.txt 3.2.2)
  }
  co_return;
}

net::awaitable<void> SpoeSession::Run() {
  read_deadline_ = After(cfg().spoe_hello_timeout);
  Rearm();
  std::string_view bytes;
  spop::Frame frame;
  spop::Hello hello;
  spop::Negotiated negotiated;
  if (co_await ReadFrame(&bytes)) {
    spop::Error e = spop::ParseFrame(bytes, &frame);
    if (e == spop::Error::kNone && frame.type != spop::FrameType::kHaproxyHello) {
      e = spop::Error::kInvalid;
    }
    if (e == spop::Error::kNone) spoe().Count(SpoeFrame::kHaproxyHello);
    if (e == spop::Error::kNone) e = spop::ParseHello(frame.payload, &hello);
    if (e == spop::Error::kNone) e = spop::Negotiate(hello, max_frame_, &negotiated);
    if (e != spop::Error::kNone) {
      Fail(e, "HAPROXY-HELLO");
    } else {
      std::string out;
      spop::AppendAgentHello(negotiated, &out);
      Enqueue(std::move(out), SpoeFrame::kAgentHello);
      max_frame_ = negotiated.max_frame_size;
      hello_done_ = true;
      idle_deadline_ = After(cfg().spoe_idle_timeout);
      if (hello.healthcheck) closing_ = true;  // answered; HAProxy closes
      Rearm();
    }
  }
  while (!closing_ && co_await ReadFrame(&bytes)) {
    const spop::Error e = spop::ParseFrame(bytes, &frame);
    if (e != spop::Error::kNone) {
      Fail(e, "frame");
      break;
    }
    spoe().Count(SpoeReceivedFrame(frame.type));
    co_await Handle(frame);
  }
  closing_ = true;
  // Every decision ends (the store's own timeout bounds it) and the last
  // frames are written (or the write deadline closes the socket) first.
  while (in_flight_ > 0 || writing_) co_await WaitWake();
  CloseWhenDone();
}

}  // namespace

net::awaitable<void> RunSpoeSession(const RuntimeHolder& runtimes, Worker& worker,
                                    tcp::socket socket, SpoeConnections::Slot slot) {
  SpoeSession session(runtimes, worker, std::move(socket));
  co_await session.Run();
}

}  // namespace tollgate::server
