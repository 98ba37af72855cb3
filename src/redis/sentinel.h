// SentinelWatcher: finds the master of a Redis Sentinel group and follows it,
// for RedisStore's sentinel mode (RedisOptions::sentinels).
//
// A discovery round asks the sentinels in their configured order
// (SENTINEL get-master-addr-by-name <name>), connects to the address the
// first one names and asks it ROLE; the first address that says "master" is
// the round's answer. A sentinel that is down, slow (connect_timeout,
// call_timeout), does not know the name or answers garbage, and a named
// server that is down or not a master, pass the turn to the next sentinel.
// After the last one the round ends with no master and every reason.
//
// Rounds start: at Start(); on a +switch-master message for our master (one
// connection to a sentinel stays subscribed to it; it moves to the next
// sentinel when it breaks); and on Suspect() (the store saw READONLY or lost
// its connections to the master), at most once per backoff (from
// reconnect_backoff_min, doubling to reconnect_backoff_max while rounds
// confirm the same master or find none; reset when the master changes).
// While no master is known the owner fails calls as a Redis outage.
//
// Untrusted input: every reply goes through the bounded ReplyReader and the
// checks of sentinel_reply.h; a sentinel cannot make the watcher hang (every
// step has a deadline) or connect to a malformed address.
//
// Thread safety: none; every method runs on the io_context's thread, and
// on_master runs there too. Ownership: owns its connections; Close() then
// Released() before destruction, like NodeClient.
#ifndef TOLLGATE_SRC_REDIS_SENTINEL_H_
#define TOLLGATE_SRC_REDIS_SENTINEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "redis/sentinel_reply.h"

namespace tollgate::redis {

class SentinelWatcher : public Connection::Listener {
 public:
  // The outcome of a round: a verified master, or none and why.
  using OnMaster = std::function<void(const std::optional<MasterAddress>&, const Status& why)>;

  // `options`: the store's (sentinels, sentinel_master, both credentials,
  // timeouts, io_clock); copied. `tls`: the store's TLS context
  // (rediss-sentinel://), used for the sentinels and the probed master alike;
  // null for plain TCP.
  SentinelWatcher(boost::asio::io_context& io, const RedisOptions& options, TlsContextPtr tls,
                  OnMaster on_master);
  ~SentinelWatcher() override;

  void Start();
  // Deadlines of the probes, retries, the subscription, the next round.
  void Tick(SteadyTime now);
  // The master may have moved: run a round when the backoff allows.
  void Suspect();
  void Close();
  bool Released() const;

  uint64_t rounds() const { return rounds_; }
  uint64_t switch_messages() const { return switch_messages_; }
  bool subscribed() const { return subscribed_; }

 private:
  struct Link {
    std::shared_ptr<RedisOptions> options;  // the connection's, kept as long as it
    std::shared_ptr<Connection> conn;
  };
  void OnReady(Connection& c) override;
  void OnDown(Connection& c, const Status& why) override;
  Link Open(const std::string& host, int port, bool sentinel);
  void Bury(Link& link);
  void StartRound();
  void Ask();
  void OnProbeReply(const redisReply* reply);
  void NextSentinel(const std::string& why);
  void FinishRound(std::optional<MasterAddress> master,
                   const Status& why);  // a copy: may be candidate_
  void Subscribe();
  void OnSubscriptionDown();
  void OnPush(ReplyPtr reply);

  boost::asio::io_context& io_;
  TlsContextPtr tls_;
  const RedisOptions options_;
  const OnMaster on_master_;
  std::vector<MasterAddress> sentinels_;
  bool closed_ = false;
  // The round.
  bool discovering_ = false;
  bool want_round_ = true;
  bool round_again_ = false;  // a +switch-master arrived during the round
  size_t ask_index_ = 0;
  std::optional<MasterAddress> candidate_;  // named by sentinels_[ask_index_], in ROLE
  std::string reasons_;
  Link probe_;
  uint64_t step_ = 0;  // bumps per probe, so stale replies are ignored
  SteadyTime next_round_{};
  std::chrono::milliseconds backoff_;
  std::optional<MasterAddress> master_;
  // The subscription.
  Link sub_;
  size_t sub_index_ = 0;
  bool subscribed_ = false;
  SteadyTime sub_retry_at_{};
  std::chrono::milliseconds sub_backoff_;
  std::vector<Link> graveyard_;  // closed links whose handlers may still be queued
  uint64_t rounds_ = 0, switch_messages_ = 0;
};

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_SENTINEL_H_
