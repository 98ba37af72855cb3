// Connection: one pipelined RESP connection to Redis on an Asio io_context.
//
// Commands are pre-formatted RESP (hiredis' redisFormatCommandArgv) appended
// to a write buffer; replies are parsed by a ReplyReader (hiredis' reader,
// bounded: reply_reader.h) and handed, in order, to the handler of each
// pending call. A reply past a bound closes the connection like a broken socket. A call may expect
// several replies (a pipeline). On connect the connection runs its handshake (AUTH, SELECT, SCRIPT
// LOAD; PING instead of SCRIPT LOAD when the script is empty: a sentinel, a
// ROLE probe) before it reports ready.
//
// TLS: with a TLS context the connection runs the TLS handshake (SNI, peer and
// host name verification) between the TCP connect and the RESP handshake,
// both within connect_timeout. The stream kind is chosen once per connection
// attempt: the plain path calls the TCP socket directly (no virtual call, no
// allocation per read or write); the TLS path owns a fresh
// ssl::stream<tcp::socket> per attempt, kept alive by its pending handlers.
//
// Failure model: a broken socket fails every pending call with kConnection; a
// call past its deadline fails every pending call with kTimeout (replies of a
// pipeline cannot be skipped) and closes the socket. The owner reconnects.
// Nothing is ever resent by the connection itself.
//
// Thread safety: none; every method runs on the io_context's single thread.
#ifndef TOLLGATE_SRC_REDIS_CONNECTION_H_
#define TOLLGATE_SRC_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply_reader.h"
#include "tollgate/redis_store.h"
#include "tollgate/status.h"

namespace tollgate::redis {

using SteadyTime = std::chrono::steady_clock::time_point;

// The I/O clock's time (RedisOptions::io_clock) as a deadline type: for the
// real clock it is std::chrono::steady_clock::now().
inline SteadyTime IoNow(const RedisOptions& options) {
  return SteadyTime(std::chrono::duration_cast<SteadyTime::duration>(
      std::chrono::nanoseconds(options.io_clock->Now())));
}

// RESP encoding, by hand (hiredis' formatter allocates and runs sprintf per
// argument): a "*<n>\r\n" or "$<n>\r\n" header, one bulk string, one
// integer as a bulk string.
void AppendRespHeader(std::string& out, char kind, size_t n);
void AppendBulk(std::string& out, std::string_view arg);
void AppendBulk(std::string& out, int64_t value);
// Formats argv as one RESP command and appends it to `out`.
void AppendCommand(std::string& out, const std::vector<std::string>& argv);
void AppendCommand(std::string& out, int argc, const char** argv, const size_t* lens);
RedisReply ToRedisReply(const redisReply* r);

using TlsContextPtr = std::shared_ptr<boost::asio::ssl::context>;
// The client TLS context for `options` (CA file or system trust store, peer
// verification unless tls_insecure_skip_verify, client certificate and key),
// built once per store and shared by its connections. nullptr when !tls;
// kInvalidArgument naming the file when a file cannot be loaded.
Result<TlsContextPtr> MakeTlsContext(const RedisOptions& options);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // ok + replies, or an error status (replies empty).
  using Handler = std::function<void(Status, std::vector<ReplyPtr>&)>;
  // Told when the connection becomes ready or goes down.
  struct Listener {
    virtual ~Listener() = default;
    virtual void OnReady(Connection& c) = 0;
    virtual void OnDown(Connection& c, const Status& why) = 0;
  };

  // `tls`: nullptr for plain TCP, else the store's TLS context.
  Connection(boost::asio::io_context& io, const RedisOptions& options, std::string_view script,
             Listener* listener, TlsContextPtr tls = nullptr);
  ~Connection();

  enum class State { kIdle, kConnecting, kReady, kClosed };
  State state() const { return state_; }
  bool ready() const { return state_ == State::kReady; }
  size_t inflight() const { return pending_.size(); }
  const std::string& script_sha() const { return sha_; }
  const Status& last_error() const { return last_error_; }

  // Starts connecting (kIdle/kClosed -> kConnecting).
  void Connect();
  // Sends a pre-formatted command expecting `replies` replies; `done` runs once.
  void Send(std::string&& resp, int replies, SteadyTime deadline, Handler done);
  // Fails pending calls past their deadline (kTimeout) and the handshake past
  // connect_timeout; called by the owner's ticker.
  void CheckDeadlines(SteadyTime now);
  // Closes the socket and fails every pending call with `why`.
  void Fail(const Status& why);
  // Replies that arrive on a ready connection with no call waiting (pub/sub
  // messages after a SUBSCRIBE) go to `push` instead of closing the
  // connection as unexpected. Unset: they close it.
  void SetPushHandler(std::function<void(ReplyPtr)> push) { on_push_ = std::move(push); }

 private:
  struct Pending {
    int replies;
    SteadyTime deadline;
    Handler done;
    std::vector<ReplyPtr> got;
  };
  using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
  void StartTlsHandshake();
  void StartHandshake();
  void Flush();
  void Read();
  void OnWritten(uint64_t gen, const boost::system::error_code& ec);
  void OnRead(uint64_t gen, const boost::system::error_code& ec, size_t n);
  void OnData(size_t n);
  boost::asio::ip::tcp::socket& tcp() { return tls_stream_ ? tls_stream_->next_layer() : socket_; }

  boost::asio::io_context& io_;
  const RedisOptions& options_;
  std::string_view script_;
  Listener* listener_;
  boost::asio::ip::tcp::socket socket_;  // plain TCP (unused with TLS)
  TlsContextPtr tls_;
  std::shared_ptr<TlsStream> tls_stream_;  // this attempt's TLS stream, or null
  State state_ = State::kIdle;
  SteadyTime connect_deadline_{};
  std::string sha_;
  Status last_error_;
  std::unique_ptr<ReplyReader> reader_;
  std::deque<Pending> pending_;
  std::string out_;      // waiting to be written
  std::string writing_;  // being written
  bool write_busy_ = false;
  std::vector<char> in_;
  uint64_t generation_ = 0;  // bumps on every close, so stale completions are ignored
  std::function<void(ReplyPtr)> on_push_;
};

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_CONNECTION_H_
