#include "redis/node_client.h"

#include <algorithm>
#include <unordered_map>

namespace tollgate::redis {

namespace asio = boost::asio;

namespace {

void FailJob(NodeJobPtr& job, const Status& st, bool sent = true) {
  JobResult r;
  r.status = st;
  r.sent = sent;
  auto& done = job->done;  // stays alive even if the callback takes the job
  done(job, r);
}

void Finish(NodeJobPtr& job, const JobResult& r) {
  auto& done = job->done;
  done(job, r);
}

}  // namespace

// The largest script reply (3 integers of at most 9 MessagePack bytes per item)
// must fit the reply reader's bound on one bulk string.
static_assert(3 * kMaxItemsPerCall * 9 + 5 <= ReplyReader::kMaxBulkBytes);

BatchDecision DecodeJob(const NodeJob& job, const int64_t* triples) {
  BatchDecision out;
  out.decisions.reserve(job.items.size());
  bool all = true;
  for (size_t i = 0; i < job.items.size(); ++i) {
    const int64_t head = triples[3 * i];  // code + 8 * count
    const int64_t code = head & 7;
    const int64_t rel = triples[3 * i + 1] * 1'000'000'000 + triples[3 * i + 2];
    // A dry run charges nothing: its "allowed" means "would fit" (code 3).
    const int64_t as = job.dry_run && code == 1 ? 3 : code;
    out.decisions.push_back(DecodeDecision(job.limits[i], job.items[i], as, rel, head >> 3));
    if (code != 1) all = false;
    if ((code == 0 || code == 2) && out.denied_index < 0) out.denied_index = static_cast<int>(i);
  }
  out.allowed = all;
  return out;
}

Status ErrorReplyStatus(std::string_view endpoint, std::string_view text) {
  std::string msg = "redis " + std::string(endpoint) + ": " + std::string(text.substr(0, 300));
  if (text.starts_with("ERR Error running script") || text.starts_with("NOSCRIPT") ||
      text.find("user_script") != std::string_view::npos) {
    return Status(StatusCode::kScript, msg);
  }
  return Status(StatusCode::kServer, msg);
}

NodeClient::NodeClient(asio::io_context& io, RedisOptions options, std::string_view script,
                       NodeStats* stats, bool cluster, TlsContextPtr tls)
    : io_(io),
      options_(std::move(options)),
      script_(script),
      stats_(stats),
      cluster_(cluster),
      tls_(std::move(tls)) {}

NodeClient::~NodeClient() = default;

void NodeClient::Start() {
  for (size_t i = 0; i < options_.connections; ++i) {
    conns_.push_back(std::make_shared<Connection>(io_, options_, script_, this, tls_));
    backoff_.push_back(options_.reconnect_backoff_min);
    retry_at_.push_back(SteadyTime::max());
  }
  for (auto& c : conns_) c->Connect();
}

void NodeClient::Close(const Status& why) {
  stopping_ = true;
  for (auto& c : conns_) c->Fail(why);
  UpdateReady();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  FailQueued(why);
}

bool NodeClient::Released() const {
  for (const auto& c : conns_) {
    if (c.use_count() > 1) return false;
  }
  return true;
}

void NodeClient::Submit(NodeJobPtr job) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (closed_ || queue_.size() >= options_.max_queue) {
      lock.unlock();
      FailJob(job,
              UnavailableError(closed_ ? "redis " + endpoint() + ": client closed"
                                       : "redis " + endpoint() + ": queue is full (" +
                                             std::to_string(options_.max_queue) + " waiting)"),
              /*sent=*/false);
      return;
    }
    queue_.push_back(std::move(job));
    if (pump_posted_) return;
    pump_posted_ = true;
  }
  asio::post(io_, [this] { Pump(); });
}

void NodeClient::OnReady(Connection&) {
  stats_->connects.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i]->ready()) backoff_[i] = options_.reconnect_backoff_min;
  }
  UpdateReady();
  Pump();
}

void NodeClient::OnDown(Connection& c, const Status&) {
  UpdateReady();
  if (stopping_) return;
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i].get() != &c) continue;
    // Exponential backoff with jitter in [backoff/2, backoff].
    const auto b = backoff_[i];
    std::uniform_int_distribution<int64_t> jitter(b.count() / 2, b.count());
    retry_at_[i] = IoNow(options_) + std::chrono::milliseconds(jitter(rng_));
    backoff_[i] = std::min(options_.reconnect_backoff_max, b * 2);
  }
  // Posted, so that a job failing inside Connection::Fail() does not re-enter Pump.
  asio::post(io_, [this] { Pump(); });
}

void NodeClient::UpdateReady() {
  int ready = 0;
  for (auto& c : conns_) ready += c->ready() ? 1 : 0;
  ready_count_.store(ready, std::memory_order_relaxed);
}

bool NodeClient::AnyConnecting() const {
  for (auto& c : conns_) {
    if (c->state() == Connection::State::kConnecting) return true;
  }
  return false;
}

Status NodeClient::LastError() const {
  for (auto& c : conns_) {
    if (!c->last_error().ok()) return c->last_error();
  }
  return ConnectionError("redis " + endpoint() + ": not connected");
}

void NodeClient::Tick(SteadyTime now) {
  if (stopping_) return;
  for (size_t i = 0; i < conns_.size(); ++i) {
    conns_[i]->CheckDeadlines(now);
    const auto st = conns_[i]->state();
    if ((st == Connection::State::kClosed || st == Connection::State::kIdle) &&
        now >= retry_at_[i]) {
      retry_at_[i] = SteadyTime::max();
      conns_[i]->Connect();
    }
  }
  ExpireQueued(now);
}

void NodeClient::ExpireQueued(SteadyTime now) {
  std::vector<NodeJobPtr> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!queue_.empty() && queue_.front()->deadline < now) {
      expired.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  for (auto& j : expired) {
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
    FailJob(j,
            TimeoutError("redis " + endpoint() + ": no connection answered within " +
                         std::to_string(options_.call_timeout.count()) + "ms"),
            /*sent=*/false);
  }
}

void NodeClient::FailQueued(const Status& why) {
  std::deque<NodeJobPtr> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(queue_);
  }
  for (auto& j : failed) {
    stats_->errors.fetch_add(1, std::memory_order_relaxed);
    FailJob(j, why, /*sent=*/false);
  }
}

Connection* NodeClient::PickConnection() {
  Connection* best = nullptr;
  for (auto& c : conns_) {
    if (!c->ready() || c->inflight() >= options_.max_inflight_per_connection) continue;
    if (best == nullptr || c->inflight() < best->inflight()) best = c.get();
  }
  return best;
}

void NodeClient::Pump() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pump_posted_ = false;
  }
  if (stopping_) return;
  for (;;) {
    Connection* c = PickConnection();
    if (c == nullptr) break;
    std::vector<NodeJobPtr> batch;
    size_t items = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        // Some jobs go alone: ASKING applies to the next command only, and in a
        // cluster a call with declared keys must stay within one slot.
        const NodeJob& front = *queue_.front();
        const bool alone = front.asking || (cluster_ && front.declare_keys && front.argv.empty());
        if (alone && !batch.empty()) break;
        if (!batch.empty() && cluster_ && batch.back()->argv.empty() && front.argv.empty() &&
            front.declare_keys != batch.back()->declare_keys) {
          break;
        }
        if (!batch.empty() && items + front.items.size() >= kMaxItemsPerCall) break;
        items += front.items.size();
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
        if (alone) break;
      }
    }
    if (batch.empty()) return;
    std::vector<NodeJobPtr> scripts;
    scripts.reserve(batch.size());
    for (auto& j : batch) {
      if (!j->argv.empty()) {
        SendCommand(*c, std::move(j));
      } else {
        scripts.push_back(std::move(j));
      }
    }
    if (!scripts.empty()) SendScript(*c, std::move(scripts), /*eval=*/false);
  }
  if (ready_count_.load(std::memory_order_relaxed) == 0 && !AnyConnecting()) {
    FailQueued(LastError());  // every connection is backing off: fail fast
  }
}

void NodeClient::CountFailure(const Status& st) {
  if (st.code() == StatusCode::kTimeout) {
    stats_->timeouts.fetch_add(1, std::memory_order_relaxed);
  } else {
    stats_->errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void NodeClient::SendCommand(Connection& c, NodeJobPtr job) {
  std::string resp;
  int replies = 1;
  if (job->asking) {  // an ASK redirection: ASKING, then the command (its reply is the last)
    AppendCommand(resp, {"ASKING"});
    replies = 2;
  }
  AppendCommand(resp, job->argv);
  NodeJob* raw = job.release();
  c.Send(std::move(resp), replies, raw->deadline,
         [this, raw](Status st, std::vector<ReplyPtr>& got) {
           NodeJobPtr j(raw);
           JobResult r;
           r.status = st;
           if (!st.ok()) {
             CountFailure(st);
           } else {
             r.reply = got.back().get();
           }
           Finish(j, r);
           Pump();
         });
}

// One EVALSHA (or EVAL after NOSCRIPT) for every job in `jobs`, encoded
// straight into RESP (see gcra_script.h for the argument layout).
void NodeClient::SendScript(Connection& c, std::vector<NodeJobPtr> jobs, bool eval) {
  // Distinct keys and distinct (kind, increment, threshold, burst) entries of
  // the call, 1-based, in first-seen order.
  size_t total = 0;
  for (auto& j : jobs) total += j->items.size();
  size_t slots = 16;
  while (slots < 2 * total) slots <<= 1;
  key_slots_.assign(slots, 0);
  keys_.clear();
  entries_.clear();
  packed_.clear();
  SteadyTime deadline = SteadyTime::max();
  const bool asking = jobs.front()->asking;
  const bool declare = jobs.front()->declare_keys;
  const int64_t sent = options_.clock->Now();  // the deny cache's time base (RedisOptions::clock)
  size_t key_bytes = 0, group_values = 0;
  for (auto& j : jobs) {
    j->sent_ns = sent;
    deadline = std::min(deadline, j->deadline);
    const size_t n = j->items.size();
    group_values += n == 1 && !j->dry_run ? 1 : 1 + n;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view key = j->keys[i];
      size_t slot = std::hash<std::string_view>{}(key) & (slots - 1);
      int64_t k = 0;
      while (key_slots_[slot] != 0) {
        if (keys_[key_slots_[slot] - 1] == key) {
          k = key_slots_[slot];
          break;
        }
        slot = (slot + 1) & (slots - 1);
      }
      if (k == 0) {
        keys_.push_back(key);
        key_bytes += key.size();
        k = static_cast<int64_t>(keys_.size());
        key_slots_[slot] = static_cast<uint32_t>(k);
      }
      const ScriptItem& si = j->items[i];
      int64_t e = 0;
      for (size_t x = entries_.size(); x-- > 0;) {  // few distinct limits per call
        if (entries_[x]->kind == si.kind && entries_[x]->increment == si.increment &&
            entries_[x]->threshold == si.threshold && entries_[x]->burst == si.burst &&
            entries_[x]->calendar == si.calendar) {
          e = static_cast<int64_t>(x) + 1;
          break;
        }
      }
      if (e == 0) {
        entries_.push_back(&si);
        e = static_cast<int64_t>(entries_.size());
      }
      packed_.push_back(k * kPackedItemBase + e);
    }
  }
  size_t entry_args = 0;
  for (const ScriptItem* e : entries_) entry_args += e->kind >= ItemKind::kFixedWindow ? 4 : 3;
  groups_.clear();
  AppendMsgpackArrayHeader(groups_, group_values);
  size_t n = 0;
  for (auto& j : jobs) {
    const int64_t count = static_cast<int64_t>(j->items.size());
    if (count == 1 && !j->dry_run) {  // one packed item: its own group
      AppendMsgpackInt(groups_, packed_[n++]);
      continue;
    }
    AppendMsgpackInt(groups_, j->dry_run ? -count : count);
    for (int64_t i = 0; i < count; ++i) AppendMsgpackInt(groups_, packed_[n++]);
  }
  const size_t argc = 3 + keys_.size() + 2 + 1 + entry_args + 1;
  std::string resp;
  resp.reserve(64 + (eval ? script_.size() : 0) + key_bytes + 8 * keys_.size() +
               24 * (argc - keys_.size()) + groups_.size());
  int replies = 1;
  if (asking) {
    AppendCommand(resp, {"ASKING"});
    replies = 2;
  }
  AppendRespHeader(resp, '*', argc);
  AppendBulk(resp, eval ? std::string_view("EVAL") : std::string_view("EVALSHA"));
  AppendBulk(resp, eval ? script_ : std::string_view(c.script_sha()));
  AppendBulk(resp, static_cast<int64_t>(declare ? keys_.size() : 0));  // numkeys
  if (declare)
    for (auto k : keys_) AppendBulk(resp, k);  // KEYS
  if (options_.use_client_clock) {             // ARGV[1] now
    AppendBulk(resp, options_.clock->WallNow());
  } else {
    AppendBulk(resp, std::string_view());
  }
  AppendBulk(resp, static_cast<int64_t>(declare ? 0 : keys_.size()));  // ARGV[2]
  if (!declare)
    for (auto k : keys_) AppendBulk(resp, k);
  AppendBulk(resp, static_cast<int64_t>(entries_.size()));
  for (const ScriptItem* e : entries_) {
    EmitEntryArgs(*e, *options_.clock, [&](const auto& v) { AppendBulk(resp, v); });
  }
  AppendBulk(resp, groups_);

  stats_->script_calls.fetch_add(1, std::memory_order_relaxed);
  auto shared = std::make_shared<std::vector<NodeJobPtr>>(std::move(jobs));
  Connection* conn = &c;
  c.Send(std::move(resp), replies, deadline,
         [this, shared, conn, eval](Status st, std::vector<ReplyPtr>& got) {
           OnScriptReply(*conn, *shared, eval, st, got);
           Pump();
         });
}

void NodeClient::OnScriptReply(Connection& c, std::vector<NodeJobPtr>& jobs, bool eval,
                               const Status& st, std::vector<ReplyPtr>& got) {
  if (!st.ok()) {
    for (auto& j : jobs) {
      CountFailure(st);
      FailJob(j, st);
    }
    return;
  }
  const redisReply* reply = got.back().get();
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string_view text(reply->str, reply->len);
    if (text.starts_with("NOSCRIPT") && !eval && c.ready()) {
      // The call did not run: resend it with the script body (which also loads it).
      stats_->noscript_reloads.fetch_add(1, std::memory_order_relaxed);
      SendScript(c, std::move(jobs), /*eval=*/true);
      return;
    }
    JobResult r;
    r.error = text;
    for (auto& j : jobs) Finish(j, r);
    return;
  }
  size_t total = 0;
  for (auto& j : jobs) total += j->items.size();
  // Decoded into reused storage; swapped out so that nothing a callback does
  // can touch it while the jobs read it.
  std::vector<int64_t> values;
  values.swap(reply_);
  bool valid = reply->type == REDIS_REPLY_STRING &&
               ParseMsgpackInts(std::string_view(reply->str, reply->len), &values) &&
               values.size() == 3 * total;
  size_t at = 0;
  for (size_t j = 0; valid && j < jobs.size(); ++j) {
    for (const ScriptItem& item : jobs[j]->items) {
      valid = valid && ValidScriptTriple(item, values[at], values[at + 1], values[at + 2]);
      at += 3;
    }
  }
  if (!valid) {
    const Status err(StatusCode::kScript,
                     "redis " + endpoint() + ": script returned a malformed reply");
    for (auto& j : jobs) {
      CountFailure(err);
      FailJob(j, err);
    }
    return;
  }
  size_t e = 0;
  for (auto& j : jobs) {
    JobResult r;
    r.triples = values.data() + e;
    e += 3 * j->items.size();
    Finish(j, r);
  }
  values.swap(reply_);
}

}  // namespace tollgate::redis
