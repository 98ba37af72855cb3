#include "redis/sentinel.h"

#include <algorithm>

namespace tollgate::redis {
namespace {

// "host:port" / "[v6]:port" (as ParseRedisSentinelUrl writes them).
MasterAddress SplitSentinel(const std::string& hp) {
  MasterAddress out;
  const size_t colon = hp.rfind(':');
  if (colon == std::string::npos) return out;
  std::string host = hp.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.host = std::move(host);
  if (!ParsePort(std::string_view(hp).substr(colon + 1), &out.port)) out.port = 0;
  return out;
}

}  // namespace

SentinelWatcher::SentinelWatcher(boost::asio::io_context& io, const RedisOptions& options,
                                 TlsContextPtr tls, OnMaster on_master)
    : io_(io),
      tls_(std::move(tls)),
      options_(options),
      on_master_(std::move(on_master)),
      backoff_(options.reconnect_backoff_min),
      sub_backoff_(options.reconnect_backoff_min) {
  for (const auto& s : options_.sentinels) sentinels_.push_back(SplitSentinel(s));
}

SentinelWatcher::~SentinelWatcher() = default;

void SentinelWatcher::Start() {
  Subscribe();
  StartRound();
}

void SentinelWatcher::Close() {
  closed_ = true;
  Bury(probe_);
  Bury(sub_);
}

bool SentinelWatcher::Released() const {
  return std::all_of(graveyard_.begin(), graveyard_.end(),
                     [](const Link& l) { return l.conn.use_count() <= 1; });
}

SentinelWatcher::Link SentinelWatcher::Open(const std::string& host, int port, bool sentinel) {
  Link link;
  link.options = std::make_shared<RedisOptions>(options_);
  RedisOptions& o = *link.options;
  o.host = host;
  o.port = port;
  o.db = 0;  // sentinels know no SELECT; ROLE needs none
  o.sentinels.clear();
  if (sentinel) {
    o.username = options_.sentinel_username;
    o.password = options_.sentinel_password;
  }
  link.conn = std::make_shared<Connection>(io_, o, std::string_view(), this, tls_);
  return link;
}

void SentinelWatcher::Bury(Link& link) {
  if (!link.conn) return;
  Link dead = std::move(link);
  link = Link{};
  dead.conn->Fail(UnavailableError("redis sentinel: link closed"));  // OnDown ignores it now
  graveyard_.push_back(std::move(dead));
}

void SentinelWatcher::Suspect() { want_round_ = true; }

void SentinelWatcher::StartRound() {
  if (closed_ || discovering_) return;
  discovering_ = true;
  want_round_ = false;
  ++rounds_;
  ask_index_ = 0;
  candidate_.reset();
  reasons_.clear();
  Ask();
}

void SentinelWatcher::Ask() {
  if (ask_index_ >= sentinels_.size()) {
    FinishRound(std::nullopt, ConnectionError("redis sentinel: no sentinel named a reachable "
                                              "master '" +
                                              options_.sentinel_master + "' (" + reasons_ + ")"));
    return;
  }
  Bury(probe_);
  ++step_;
  const MasterAddress& target = candidate_ ? *candidate_ : sentinels_[ask_index_];
  probe_ = Open(target.host, target.port, /*sentinel=*/!candidate_);
  probe_.conn->Connect();
}

void SentinelWatcher::OnReady(Connection& c) {
  if (probe_.conn.get() == &c) {
    std::string resp;
    if (candidate_) {
      AppendCommand(resp, {"ROLE"});
    } else {
      AppendCommand(resp, {"SENTINEL", "get-master-addr-by-name", options_.sentinel_master});
    }
    const uint64_t step = step_;
    c.Send(std::move(resp), 1, IoNow(options_) + options_.call_timeout,
           [this, step](Status st, std::vector<ReplyPtr>& got) {
             // A failure reaches OnDown too, which moves on.
             if (step != step_ || !st.ok() || got.empty()) return;
             OnProbeReply(got[0].get());
           });
    return;
  }
  if (sub_.conn.get() == &c) {
    std::string resp;
    AppendCommand(resp, {"SUBSCRIBE", "+switch-master"});
    c.Send(std::move(resp), 1, IoNow(options_) + options_.call_timeout,
           [this, conn = &c](Status st, std::vector<ReplyPtr>& got) {
             if (sub_.conn.get() != conn || !st.ok() || got.empty()) return;
             if (Status check = CheckSubscribeReply(got[0].get()); !check.ok()) {
               OnSubscriptionDown();
               return;
             }
             subscribed_ = true;
             sub_backoff_ = options_.reconnect_backoff_min;
           });
  }
}

void SentinelWatcher::OnDown(Connection& c, const Status& why) {
  if (probe_.conn.get() == &c) {
    NextSentinel(why.message());
    return;
  }
  if (sub_.conn.get() == &c) OnSubscriptionDown();
}

void SentinelWatcher::OnProbeReply(const redisReply* reply) {
  const MasterAddress& sentinel = sentinels_[ask_index_];
  if (!candidate_) {
    auto address = ParseMasterAddrReply(reply, options_.sentinel_master);
    if (!address.ok()) {
      NextSentinel("sentinel " + sentinel.ToString() + ": " + address.status().message());
      return;
    }
    candidate_ = *address;
    Ask();  // now the ROLE of the named server
    return;
  }
  auto role = ParseRoleReply(reply);
  const std::string named = candidate_->ToString();
  if (!role.ok()) {
    NextSentinel(named + " (named by " + sentinel.ToString() + "): " + role.status().message());
    return;
  }
  if (*role != "master") {
    NextSentinel(named + " (named by " + sentinel.ToString() + ") is a " + *role +
                 ", not a master");
    return;
  }
  FinishRound(candidate_, Status::Ok());
}

void SentinelWatcher::NextSentinel(const std::string& why) {
  if (!reasons_.empty()) reasons_ += "; ";
  if (reasons_.size() < 2000) reasons_ += why;
  candidate_.reset();
  ++ask_index_;
  Ask();
}

void SentinelWatcher::FinishRound(std::optional<MasterAddress> master, const Status& why) {
  Bury(probe_);
  ++step_;
  discovering_ = false;
  candidate_.reset();
  const bool changed = master.has_value() && master != master_;
  backoff_ = changed ? options_.reconnect_backoff_min
                     : std::min(options_.reconnect_backoff_max, backoff_ * 2);
  next_round_ = IoNow(options_) + backoff_;
  master_ = master;
  if (round_again_) {
    round_again_ = false;
    want_round_ = true;
    next_round_ = IoNow(options_);
  }
  on_master_(master, why);
}

void SentinelWatcher::Subscribe() {
  if (closed_ || sentinels_.empty()) return;
  const MasterAddress& s = sentinels_[sub_index_ % sentinels_.size()];
  sub_ = Open(s.host, s.port, /*sentinel=*/true);
  sub_.conn->SetPushHandler([this](ReplyPtr reply) { OnPush(std::move(reply)); });
  sub_.conn->Connect();
}

void SentinelWatcher::OnSubscriptionDown() {
  Bury(sub_);
  subscribed_ = false;
  ++sub_index_;
  sub_retry_at_ = IoNow(options_) + sub_backoff_;
  sub_backoff_ = std::min(options_.reconnect_backoff_max, sub_backoff_ * 2);
  // Switches may have been missed while unsubscribed.
  want_round_ = true;
}

void SentinelWatcher::OnPush(ReplyPtr reply) {
  auto message = ParseSwitchMaster(reply.get(), options_.sentinel_master);
  if (!message.ok()) {  // not what we subscribed to: a broken or hostile sentinel
    OnSubscriptionDown();
    return;
  }
  if (!message->has_value()) return;  // another master's switch
  ++switch_messages_;
  if (discovering_) {
    round_again_ = true;
    return;
  }
  want_round_ = true;
  next_round_ = IoNow(options_);
}

void SentinelWatcher::Tick(SteadyTime now) {
  if (closed_) return;
  if (probe_.conn) probe_.conn->CheckDeadlines(now);
  if (sub_.conn) sub_.conn->CheckDeadlines(now);
  if (!sub_.conn && now >= sub_retry_at_) Subscribe();
  if (!discovering_ && (want_round_ || !master_) && now >= next_round_) StartRound();
  std::erase_if(graveyard_, [](const Link& l) { return l.conn.use_count() <= 1; });
}

}  // namespace tollgate::redis
