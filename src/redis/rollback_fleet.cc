// The fleet's rollback guards in one Redis hash (tollgate/rollback_fleet.h).
#include "tollgate/rollback_fleet.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/instance_id.h"
#include "base/names.h"

namespace tollgate {
namespace {

// KEYS[1] the hash; ARGV: rule, "tripped"|"cleared", fingerprint, trigger,
// origin, reason. A trip of a rule already recorded as tripped with the same
// fingerprint keeps that record; anything else gets the next epoch. Returns
// the rule's record afterwards.
constexpr const char* kPublishScript =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local cur = redis.call('HGET', KEYS[1], ARGV[1])\n"
    "if cur and ARGV[2] == 'tripped' then\n"
    "  local state, fp = string.match(cur, '^%d+ %d+ (%a+) (%x+) ')\n"
    "  if state == 'tripped' and fp == ARGV[3] then return cur end\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local epoch = redis.call('HINCRBY', KEYS[1], '#epoch', 1)\n"
    "local rec = string.format('%d %d %s %s %s %s\\n%s', epoch, now, ARGV[2], ARGV[3],\n"
    "                          ARGV[4], ARGV[5], ARGV[6])\n"
    "redis.call('HSET', KEYS[1], ARGV[1], rec)\n"
    "return rec\n";

constexpr std::string_view kEpochField = "#epoch";
constexpr size_t kMaxKeyBytes = 512;
constexpr size_t kMaxTrigger = 32;
constexpr size_t kMaxError = 300;
constexpr int64_t kMaxEpoch = int64_t{1} << 53;  // Lua numbers are exact below 2^53

// The hash's fields are a policy's rule names (base::IsPolicyName) and nothing else.
static_assert(kMaxRollbackRuleName == base::kMaxNameLength);

bool IsTrigger(std::string_view s) {
  if (s.empty() || s.size() > kMaxTrigger) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// Printable ASCII without the space (an origin is one word of the record).
bool IsWord(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

bool IsText(std::string_view s, size_t max) {
  if (s.size() > max) return false;
  for (char c : s) {
    if (c < ' ' || c > '~') return false;
  }
  return true;
}

std::string Sanitize(std::string_view s) {
  std::string out(s.substr(0, kMaxRollbackReason));
  for (char& c : out) {
    if (c < ' ' || c > '~') c = '?';
  }
  return out;
}

bool ParseDecimal(std::string_view s, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= 0 && *out <= max;
}

bool ParseFingerprint(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string FormatFingerprint(uint64_t fp) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(fp));
  return buf;
}

// Splits off the next space-separated word of `rest`.
std::string_view NextWord(std::string_view* rest) {
  const size_t space = rest->find(' ');
  if (space == std::string_view::npos) {
    std::string_view word = *rest;
    *rest = {};
    return word;
  }
  std::string_view word = rest->substr(0, space);
  rest->remove_prefix(space + 1);
  return word;
}

}  // namespace

Result<RollbackRecord> ParseRollbackRecord(std::string_view rule, std::string_view value) {
  if (!base::IsPolicyName(rule)) return InvalidArgument("not a rule name");
  if (value.size() > kMaxRollbackValue) {
    return InvalidArgument("longer than " + std::to_string(kMaxRollbackValue) + " bytes");
  }
  const size_t newline = value.find('\n');
  if (newline == std::string_view::npos) return InvalidArgument("no line with the reason");
  std::string_view head = value.substr(0, newline);
  const std::string_view reason = value.substr(newline + 1);
  RollbackRecord r;
  r.rule = std::string(rule);
  const std::string_view epoch = NextWord(&head), at = NextWord(&head), state = NextWord(&head),
                         fp = NextWord(&head), trigger = NextWord(&head), origin = head;
  if (!ParseDecimal(epoch, kMaxEpoch, &r.epoch) || r.epoch == 0) {
    return InvalidArgument("the epoch is not a number in 1..2^53");
  }
  if (!ParseDecimal(at, kMaxEpoch, &r.at_ms)) return InvalidArgument("the time is not a number");
  if (state != "tripped" && state != "cleared") {
    return InvalidArgument("the state is neither tripped nor cleared");
  }
  r.tripped = state == "tripped";
  if (!ParseFingerprint(fp, &r.fingerprint)) {
    return InvalidArgument("the fingerprint is not 16 lower-case hex digits");
  }
  if (!IsTrigger(trigger)) return InvalidArgument("the trigger is not 1..32 of [a-z0-9_]");
  if (!IsWord(origin, kMaxRollbackOrigin)) {
    return InvalidArgument("the origin is not 1..256 printable bytes without spaces");
  }
  if (!IsText(reason, kMaxRollbackReason)) {
    return InvalidArgument("the reason is not at most 256 printable ASCII bytes");
  }
  r.trigger = std::string(trigger);
  r.origin = std::string(origin);
  r.reason = std::string(reason);
  return r;
}

std::string FormatRollbackRecord(const RollbackRecord& r) {
  return std::to_string(r.epoch) + " " + std::to_string(r.at_ms) + " " +
         (r.tripped ? "tripped" : "cleared") + " " + FormatFingerprint(r.fingerprint) + " " +
         r.trigger + " " + r.origin + "\n" + r.reason;
}

class RollbackFleet::Impl {
 public:
  Impl(RollbackFleetOptions options, RedisCommand command, Adopt adopt)
      : options_(std::move(options)), command_(std::move(command)), adopt_(std::move(adopt)) {
    if (options_.clock == nullptr) options_.clock = &SystemClock::Instance();
  }

  ~Impl() { Stop(); }

  void Stop() {
    std::thread thread;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      thread = std::move(thread_);
    }
    cv_.notify_all();
    if (thread.joinable()) thread.join();
  }

  void Start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable() || stop_) return;
    thread_ = std::thread([this] { Run(); });
  }

  void Publish(RollbackChange change) {
    change.reason = Sanitize(change.reason);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (Status why = Admissible(change); !why.ok()) {
        ++stats_.publish_failures;  // never queued: it could never be sent
        stats_.last_error = why.message();
        return;
      }
      Pending& p = pending_[change.rule];
      p.change = std::move(change);
      ++p.generation;
      wake_ = true;
    }
    cv_.notify_all();
  }

  Result<RollbackRecord> PublishNow(RollbackChange change) {
    change.reason = Sanitize(change.reason);
    uint64_t generation;
    {
      // The operator's action supersedes whatever was queued for the rule.
      std::lock_guard<std::mutex> lock(mu_);
      if (Status why = Admissible(change); !why.ok()) return why;
      Pending& p = pending_[change.rule];
      p.change = change;
      generation = ++p.generation;
      p.in_flight = generation;
    }
    return SendAndAdopt(change, generation);
  }

  Status Sync() {
    Status first = SendPending();
    Status read = ReadAndAdopt();
    return first.ok() ? read : first;
  }

  RollbackFleetStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    RollbackFleetStats s = stats_;
    s.pending = pending_.size();
    return s;
  }

  const RollbackFleetOptions& options() const { return options_; }

 private:
  struct Pending {
    RollbackChange change;
    uint64_t generation = 0;  // bumped by every new change for the rule
    uint64_t in_flight = 0;   // the generation being sent (0: none); one send at a time
  };

  // Whether `change` may be queued: a rule name and trigger the record can
  // carry, and room (a queue as long as the hash's cap is a hostile caller).
  // mu_ is held.
  Status Admissible(const RollbackChange& change) const {
    if (!base::IsPolicyName(change.rule) || !IsTrigger(change.trigger)) {
      return InvalidArgument("rollback fleet: not a rule name or trigger");
    }
    if (pending_.size() >= options_.max_records && pending_.count(change.rule) == 0) {
      return UnavailableError("rollback fleet: too many changes queued");
    }
    return Status::Ok();
  }

  void Run() {
    for (;;) {
      (void)Sync();
      std::unique_lock<std::mutex> lock(mu_);
      const int64_t deadline = options_.clock->Now() + options_.interval.count();
      options_.clock->WaitUntil(lock, cv_, deadline, [this] { return stop_ || wake_; });
      if (stop_) return;
      wake_ = false;
    }
  }

  void Fail(uint64_t* counter, const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    ++*counter;
    stats_.last_error = why.ToString().substr(0, kMaxError);
  }

  Result<RollbackRecord> Send(const RollbackChange& c) {
    Result<RedisReply> reply = command_(
        {"EVAL", kPublishScript, "1", options_.key, c.rule, c.tripped ? "tripped" : "cleared",
         FormatFingerprint(c.fingerprint), c.trigger, options_.instance_id, c.reason});
    if (!reply.ok()) return reply.status();
    if (reply->type == RedisReply::Type::kError) {
      return Status(StatusCode::kServer, "rollback publish: " + reply->str.substr(0, 200));
    }
    if (reply->type != RedisReply::Type::kString) {
      return Status(StatusCode::kServer, "rollback publish answered " +
                                             std::string(RedisReplyTypeName(reply->type)) +
                                             ", not a record");
    }
    Result<RollbackRecord> record = ParseRollbackRecord(c.rule, reply->str);
    if (!record.ok()) {
      return Status(StatusCode::kServer, "rollback publish: " + record.status().message());
    }
    return record;
  }

  // Sends one change; on success adopts the stored record and forgets the
  // change unless a newer one came meanwhile; on failure leaves it queued.
  Result<RollbackRecord> SendAndAdopt(const RollbackChange& change, uint64_t generation) {
    Result<RollbackRecord> record = Send(change);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(change.rule);
      if (it != pending_.end()) {
        if (it->second.in_flight == generation) it->second.in_flight = 0;
        // Sent and nothing newer queued meanwhile: done.
        if (record.ok() && it->second.generation == generation) pending_.erase(it);
      }
    }
    if (!record.ok()) {
      Fail(&stats_.publish_failures, record.status());
      return record;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.publishes;
    }
    std::lock_guard<std::mutex> adopting(adopt_mu_);
    Consider(*record);
    return record;
  }

  Status SendPending() {
    std::vector<std::pair<RollbackChange, uint64_t>> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [rule, p] : pending_) {
        if (p.in_flight != 0) continue;
        p.in_flight = p.generation;
        batch.emplace_back(p.change, p.generation);
      }
    }
    Status first = Status::Ok();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!first.ok()) {
        // Redis failed: leave the rest queued for the next tick.
        std::lock_guard<std::mutex> lock(mu_);
        auto it = pending_.find(batch[i].first.rule);
        if (it != pending_.end() && it->second.in_flight == batch[i].second) {
          it->second.in_flight = 0;
        }
        continue;
      }
      Result<RollbackRecord> r = SendAndAdopt(batch[i].first, batch[i].second);
      if (!r.ok()) first = r.status();
    }
    return first;
  }

  Status ReadAndAdopt() {
    std::vector<std::pair<std::string, std::string>> entries;
    HashScanLimits limits;
    limits.max_entries = options_.max_records + 1;  // "#epoch" too
    limits.max_field_bytes = kMaxRollbackRuleName;
    limits.max_value_bytes = kMaxRollbackValue;
    limits.page = 500;
    limits.max_pages = options_.max_records / 10 + 100;
    Status s = ScanRedisHash(command_, options_.key, &entries, limits);
    if (!s.ok()) {
      Fail(&stats_.read_failures, s);
      return s;
    }
    std::lock_guard<std::mutex> adopting(adopt_mu_);
    ForgetIfReset(entries);
    uint64_t bad = 0;
    for (const auto& [field, value] : entries) {
      if (field == kEpochField) continue;
      Result<RollbackRecord> record = ParseRollbackRecord(field, value);
      if (!record.ok()) {
        ++bad;
        std::lock_guard<std::mutex> lock(mu_);
        stats_.last_error =
            ("record \"" + field + "\": " + record.status().message()).substr(0, kMaxError);
        continue;
      }
      Consider(*record);
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.reads;
    stats_.bad_records += bad;
    stats_.last_read_ns = options_.clock->Now();
    return Status::Ok();
  }

  // A counter below the newest epoch adopted (or gone) means the hash was
  // lost (a flush, a failover that lost writes, a DEL by an operator): epochs
  // start again at 1, so what was seen before says nothing about them.
  // adopt_mu_ is held.
  void ForgetIfReset(const std::vector<std::pair<std::string, std::string>>& entries) {
    int64_t counter = 0;
    for (const auto& [field, value] : entries) {
      if (field == kEpochField && !ParseDecimal(value, kMaxEpoch, &counter)) counter = 0;
    }
    if (counter >= newest_) return;
    seen_.clear();
    newest_ = 0;
  }

  // Adopts `record` if it is newer than what was seen for its rule and no
  // change of ours is queued for the rule. adopt_mu_ is held.
  void Consider(const RollbackRecord& record) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.count(record.rule) != 0) return;
    }
    auto [it, inserted] = seen_.try_emplace(record.rule, 0);
    if (!inserted && record.epoch <= it->second) return;
    if (inserted && seen_.size() > options_.max_records * 2) {
      // More distinct names than two full hashes: a hostile Redis. Forget the
      // oldest view rather than grow; a forgotten rule is simply re-adopted.
      seen_.clear();
      seen_.emplace(record.rule, 0);
      it = seen_.find(record.rule);
    }
    it->second = record.epoch;
    newest_ = std::max(newest_, record.epoch);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.adopted;
    }
    adopt_(record);
  }

  RollbackFleetOptions options_;
  const RedisCommand command_;
  const Adopt adopt_;

  mutable std::mutex mu_;  // guards pending_, stats_, stop_, wake_
  std::condition_variable cv_;
  std::map<std::string, Pending> pending_;
  RollbackFleetStats stats_;
  bool stop_ = false;
  bool wake_ = false;
  std::thread thread_;

  std::mutex adopt_mu_;  // one adoption at a time, in epoch order; taken before mu_
  std::unordered_map<std::string, int64_t> seen_;  // rule -> newest epoch handed to adopt_
  int64_t newest_ = 0;                             // the highest of seen_'s epochs
};

Result<std::unique_ptr<RollbackFleet>> RollbackFleet::Create(RollbackFleetOptions options,
                                                             RedisCommand command, Adopt adopt) {
  if (!command || !adopt) return InvalidArgument("rollback fleet: no command or adopt function");
  if (options.key.empty() || options.key.size() > kMaxKeyBytes) {
    return InvalidArgument("rollback fleet key: must be 1..512 bytes");
  }
  if (options.instance_id.empty()) options.instance_id = DefaultInstanceId();
  if (!IsWord(options.instance_id, kMaxRollbackOrigin)) {
    return InvalidArgument(
        "rollback fleet instance_id: must be 1..256 printable bytes without spaces");
  }
  if (options.interval < std::chrono::milliseconds(10)) {
    return InvalidArgument("rollback fleet interval: must be at least 10ms");
  }
  if (options.max_records == 0) return InvalidArgument("rollback fleet max_records: must be > 0");
  return std::unique_ptr<RollbackFleet>(new RollbackFleet(
      std::make_unique<Impl>(std::move(options), std::move(command), std::move(adopt))));
}

RollbackFleet::RollbackFleet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RollbackFleet::~RollbackFleet() = default;
void RollbackFleet::Start() { impl_->Start(); }
void RollbackFleet::Stop() { impl_->Stop(); }
void RollbackFleet::Publish(RollbackChange change) { impl_->Publish(std::move(change)); }
Result<RollbackRecord> RollbackFleet::PublishNow(RollbackChange change) {
  return impl_->PublishNow(std::move(change));
}
Status RollbackFleet::Sync() { return impl_->Sync(); }
RollbackFleetStats RollbackFleet::stats() const { return impl_->stats(); }
const std::string& RollbackFleet::instance_id() const { return impl_->options().instance_id; }
const std::string& RollbackFleet::key() const { return impl_->options().key; }

}  // namespace tollgate
