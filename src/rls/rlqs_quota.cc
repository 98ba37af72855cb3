// The RLQS assignment logic: reports -> demand -> max-min split -> one
// acquisition from the rule's bucket per round -> assignments. Three phases
// per message: plan under the lock, acquire without it, record under it.
#include "rls/rlqs_quota.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "rls/rls_key.h"
#include "tollgate/metrics.h"
#include "tollgate/trace.h"

namespace tollgate::rls {

namespace {

using Usage = rlqspb::RateLimitQuotaUsageReports::BucketQuotaUsage;
using Action = rlqspb::RateLimitQuotaResponse::BucketAction;
using Strategy = ::envoy::type::v3::RateLimitStrategy;

struct RuleAtomics {
#define TOLLGATE_RLQS_ATOMIC(field, metric, help) std::atomic<uint64_t> field{0};
  TOLLGATE_RLQS_RULE_COUNTERS(TOLLGATE_RLQS_ATOMIC)
#undef TOLLGATE_RLQS_ATOMIC
};

// What a bucket's rule tells the data plane.
enum class Answer { kAllowAll, kDenyAll, kShare };

// One (stream, data plane bucket id): what it reported and was last given.
struct Reporter {
  rlqspb::BucketId id;     // echoed in every action
  std::string rule;        // the rule's stats key; empty: no rule limits it
  std::string bucket_key;  // the store bucket (and the split group); empty: not in one
  std::optional<Limit> limit;
  Answer answer = Answer::kAllowAll;
  double demand = -1;          // tokens per second; < 0: not known yet
  int64_t last_report_ns = 0;  // server clock
  int64_t last_round_ns = -1;  // server clock of the last acquisition; -1: none yet
  Nanos round{0};              // the last assignment's fill interval
  Nanos reported{0};           // the last valid time_elapsed, clamped
  int64_t granted = 0;         // tokens per round of the last assignment
};

struct Stream {
  std::string domain;
  std::map<uint64_t, Reporter> buckets;
};

using MemberKey = std::pair<uint64_t, uint64_t>;  // stream, data plane bucket id

// One acquisition to make outside the lock.
struct Plan {
  uint64_t id = 0;
  bool acquire = false;
  int64_t desired = 0;
  std::string rule;
  std::string bucket_key;
  std::optional<Limit> limit;
  Nanos round{0};
  int64_t granted = 0;
  bool store_error = false;
};

int64_t ToNs(const google::protobuf::Duration& d) {
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
  if (d.seconds() > kMaxSeconds) return std::numeric_limits<int64_t>::max();
  if (d.seconds() < -kMaxSeconds) return std::numeric_limits<int64_t>::min();
  return d.seconds() * 1'000'000'000 + d.nanos();
}

void SetDuration(Nanos n, google::protobuf::Duration* d) {
  d->set_seconds(n.count() / 1'000'000'000);
  d->set_nanos(static_cast<int32_t>(n.count() % 1'000'000'000));
}

// Tokens per second of `limit`.
double RatePerSecond(const Limit& limit) {
  if (limit.count() > 0 && limit.period_ns() > 0) {
    return static_cast<double>(limit.count()) * 1e9 / static_cast<double>(limit.period_ns());
  }
  const int64_t per_token = limit.IncrementFor(1);
  return per_token > 0 ? 1e9 / static_cast<double>(per_token) : 0.0;
}

// `n` rounded to the nearest multiple of `step`, within [lo, hi]: an honest
// data plane reporting every second gets the same round every time, so its
// assignment stays unchanged (Envoy then extends it instead of refilling).
Nanos Quantize(int64_t n, Nanos step, Nanos lo, Nanos hi) {
  const int64_t s = std::max<int64_t>(1, step.count());
  const int64_t q = (std::min(n, hi.count()) + s / 2) / s * s;
  return Nanos(std::clamp(q, lo.count(), hi.count()));
}

}  // namespace

std::vector<double> MaxMinShares(const std::vector<double>& demands, double capacity) {
  std::vector<double> shares(demands.size(), 0.0);
  std::vector<size_t> order(demands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return demands[a] < demands[b]; });
  double left = std::max(0.0, capacity);
  size_t remaining = order.size();
  for (size_t i : order) {
    const double level = left / static_cast<double>(remaining);
    shares[i] = std::min(std::max(0.0, demands[i]), level);
    left -= shares[i];
    --remaining;
  }
  return shares;
}

struct RlqsQuota::Impl {
  Enforcer* enforcer = nullptr;
  Enforcer::FrontEnd* front_end = nullptr;
  ConfigSource config;
  const Clock* clock = nullptr;
  RlqsOptions options;

  mutable std::mutex mu;  // guards everything below; never held across a store call
  uint64_t next_stream = 1;
  std::map<uint64_t, Stream> streams;
  // The split: store bucket -> its live reporters (pointers into `streams`).
  std::map<std::string, std::map<MemberKey, Reporter*>, std::less<>> groups;
  std::map<std::string, std::unique_ptr<RuleAtomics>, std::less<>> counters;

  RuleAtomics& CountersFor(const std::string& rule) {
    auto it = counters.find(rule);
    if (it == counters.end()) it = counters.emplace(rule, std::make_unique<RuleAtomics>()).first;
    return *it->second;
  }

  void Leave(const MemberKey& key, Reporter& r) {
    if (r.bucket_key.empty()) return;
    auto g = groups.find(r.bucket_key);
    if (g != groups.end()) {
      g->second.erase(key);
      if (g->second.empty()) groups.erase(g);
    }
  }

  void Join(const MemberKey& key, Reporter& r) {
    if (!r.bucket_key.empty()) groups[r.bucket_key][key] = &r;
  }

  // Matches `r`'s BucketId against `config` (a reload may move it to another
  // rule or bucket).
  void Match(const RlsConfig* config, const std::string& domain, const MemberKey& key,
             Reporter& r) {
    std::vector<std::pair<std::string_view, std::string_view>> sorted;
    for (const auto& [k, v] : r.id.bucket()) sorted.emplace_back(k, v);
    std::sort(sorted.begin(), sorted.end());
    std::vector<RlsEntry> entries;
    entries.reserve(sorted.size());
    for (const auto& [k, v] : sorted) entries.push_back({k, v});
    std::string rule, bucket_key;
    std::optional<Limit> limit;
    Answer answer = options.no_rule_action == RlqsOptions::NoRuleAction::kAllowAll
                        ? Answer::kAllowAll
                        : Answer::kDenyAll;
    const RlsMatch match =
        config != nullptr && !entries.empty() ? config->MatchForKey(domain, entries) : RlsMatch{};
    if (match.rule != nullptr && !match.rule->unlimited && !match.rule->shadow_mode) {
      rule = match.rule->full_key;
      if (!match.rule->limit) {
        answer = Answer::kDenyAll;
      } else {
        answer = Answer::kShare;
        limit = match.rule->limit;
        bucket_key = BucketKey(match.shared ? match.rule->shape + "~s" : match.rule->shape, domain,
                               match.key_entries);
      }
    } else if (match.rule != nullptr) {
      answer = Answer::kAllowAll;  // unlimited, or shadow mode: nothing enforced
      rule = match.rule->full_key;
    }
    if (bucket_key != r.bucket_key) {
      Leave(key, r);
      r.bucket_key = std::move(bucket_key);
      r.last_round_ns = -1;  // a new bucket: acquire at once
      Join(key, r);
    }
    r.rule = std::move(rule);
    r.limit = std::move(limit);
    r.answer = answer;
  }

  // The share (tokens per second) of `key` in its group: stale reporters
  // (silent for ttl_rounds rounds) leave first.
  double ShareOf(const MemberKey& key, const Reporter& r, int64_t now) {
    auto& members = groups[r.bucket_key];
    std::vector<double> demands;
    size_t mine = 0;
    const double capacity = RatePerSecond(*r.limit);
    for (auto it = members.begin(); it != members.end();) {
      const Reporter& m = *it->second;
      const int64_t ttl = std::max(m.round, options.min_round).count() * options.ttl_rounds;
      if (it->first != key && now - m.last_report_ns > ttl) {
        it = members.erase(it);
        continue;
      }
      if (it->first == key) mine = demands.size();
      demands.push_back(m.demand < 0 ? capacity : m.demand);
      ++it;
    }
    if (demands.empty()) return capacity;
    return MaxMinShares(demands, capacity)[mine];
  }

  // Plans `r`'s answer for this message; `force` acquires even within min_round.
  Plan PlanRound(const MemberKey& key, Reporter& r, int64_t now, bool force) {
    Plan p;
    p.id = key.second;
    p.rule = r.rule;
    p.round = r.round;
    p.granted = r.granted;
    if (r.answer != Answer::kShare) return p;
    // A reporter that left the split (silent too long) rejoins when it reports.
    Join(key, r);
    const int64_t since = r.last_round_ns < 0 ? -1 : now - r.last_round_ns;
    if (!force && since >= 0 && since < options.min_round.count()) return p;  // re-send
    // The first round lasts the reported interval; a forced one (a reload)
    // within min_round of the last keeps the last round's length.
    int64_t basis = since;
    if (since < 0) {
      basis = r.reported.count() > 0 ? r.reported.count() : options.min_round.count();
    } else if (since < options.min_round.count()) {
      basis = r.round.count();
    }
    p.round = Quantize(basis, options.min_round, options.min_round, options.max_round);
    const double share = ShareOf(key, r, now);
    const double tokens = std::ceil(share * static_cast<double>(p.round.count()) / 1e9);
    p.desired = std::clamp<int64_t>(static_cast<int64_t>(std::min(tokens, 9e15)), 1,
                                    std::max<int64_t>(1, r.limit->burst()));
    p.acquire = true;
    p.bucket_key = r.bucket_key;
    p.limit = r.limit;
    return p;
  }

  // Takes `p.desired` tokens from the bucket, or what is left of them.
  void Acquire(Plan& p) {
    trace::DecisionTracer* tracer = options.tracer;
    const trace::DecisionTracer::Active span =
        tracer != nullptr ? tracer->Begin(nullptr, false) : trace::DecisionTracer::Active{};
    ExplicitItem item{.cost = p.desired, .override_name = p.rule};
    item.limit = &*p.limit;
    item.bucket_key = p.bucket_key;
    p.granted = 0;
    std::optional<CheckOutcome> last;  // the round's last answer: its span
    for (int attempt = 0; attempt < 2 && item.cost > 0; ++attempt) {
      Result<CheckOutcome> out = enforcer->CheckItems({&item, 1}, front_end);
      if (!out.ok() || out->verdict == CheckOutcome::Verdict::kUnavailable) {
        p.store_error = true;
        if (out.ok()) last = std::move(*out);
        break;
      }
      if (out->allowed()) {
        p.granted = item.cost;
        last = std::move(*out);
        break;
      }
      const int64_t left = out->rules.empty() ? 0 : out->rules[0].decision.remaining;
      item.cost = std::min(left, item.cost - 1);
      last = std::move(*out);
    }
    if (tracer != nullptr && last) tracer->End(span, *last);
  }

  void Record(const MemberKey& key, const Plan& p, int64_t now) {
    auto s = streams.find(key.first);
    if (s == streams.end()) return;
    auto b = s->second.buckets.find(key.second);
    if (b == s->second.buckets.end()) return;
    Reporter& r = b->second;
    if (r.bucket_key != p.bucket_key) return;  // moved meanwhile (a reload)
    r.granted = p.granted;
    r.round = p.round;
    r.last_round_ns = now;
    RuleAtomics& c = CountersFor(p.rule);
    c.rounds.fetch_add(1, std::memory_order_relaxed);
    c.assigned.fetch_add(static_cast<uint64_t>(p.granted), std::memory_order_relaxed);
    if (p.store_error) c.store_errors.fetch_add(1, std::memory_order_relaxed);
  }

  // The BucketAction answering `r` after `p`.
  void Respond(const Reporter& r, const Plan& p, rlqspb::RateLimitQuotaResponse* response) const {
    Action* action = response->add_bucket_action();
    *action->mutable_bucket_id() = r.id;
    auto* assignment = action->mutable_quota_assignment_action();
    const Nanos round = std::max(p.round, options.min_round);
    const Nanos ttl = std::max(r.reported, round) * options.ttl_rounds;
    SetDuration(ttl, assignment->mutable_assignment_time_to_live());
    Strategy* strategy = assignment->mutable_rate_limit_strategy();
    if (r.answer == Answer::kAllowAll) {
      strategy->set_blanket_rule(Strategy::ALLOW_ALL);
    } else if (r.answer == Answer::kDenyAll || p.granted <= 0) {
      strategy->set_blanket_rule(Strategy::DENY_ALL);
    } else {
      auto* bucket = strategy->mutable_token_bucket();
      const auto tokens =
          static_cast<uint32_t>(std::min<int64_t>(p.granted, std::numeric_limits<uint32_t>::max()));
      bucket->set_max_tokens(tokens);
      bucket->mutable_tokens_per_fill()->set_value(tokens);
      SetDuration(round, bucket->mutable_fill_interval());
    }
  }

  static void Refuse(uint64_t id, const rlqspb::BucketId& bucket, Nanos ttl,
                     rlqspb::RateLimitQuotaResponse* response) {
    (void)id;
    Action* action = response->add_bucket_action();
    *action->mutable_bucket_id() = bucket;
    auto* assignment = action->mutable_quota_assignment_action();
    SetDuration(ttl, assignment->mutable_assignment_time_to_live());
    assignment->mutable_rate_limit_strategy()->set_blanket_rule(Strategy::DENY_ALL);
  }
};

Result<std::unique_ptr<RlqsQuota>> RlqsQuota::Create(Enforcer* enforcer, ConfigSource config,
                                                     const Clock* clock, RlqsOptions options) {
  if (enforcer == nullptr || !config || clock == nullptr) {
    return InvalidArgument("rlqs: an Enforcer, a configuration source and a clock are required");
  }
  if (options.max_streams == 0 || options.max_buckets == 0 || options.max_bucket_entries == 0) {
    return InvalidArgument("rlqs: max_streams, max_buckets and max_bucket_entries must be > 0");
  }
  if (options.min_round <= Nanos(0) || options.max_round < options.min_round) {
    return InvalidArgument("rlqs: need 0 < min_round <= max_round");
  }
  if (options.ttl_rounds < 1 || options.ttl_rounds > 100) {
    return InvalidArgument("rlqs: ttl_rounds must be in [1, 100]");
  }
  // Answers are assignments, not HTTP responses: no headers to render.
  ResponseOptions response;
  response.header_styles.clear();
  response.reason_header.clear();
  response.unenforced_header.clear();
  auto front_end = enforcer->AddFrontEnd(response);
  if (!front_end.ok()) return front_end.status();
  auto impl = std::make_unique<Impl>();
  impl->enforcer = enforcer;
  impl->front_end = *front_end;
  impl->config = std::move(config);
  impl->clock = clock;
  impl->options = options;
  return std::unique_ptr<RlqsQuota>(new RlqsQuota(std::move(impl), options));
}

RlqsQuota::RlqsQuota(std::unique_ptr<Impl> impl, RlqsOptions options)
    : impl_(std::move(impl)), options_(options) {}

RlqsQuota::~RlqsQuota() = default;

Result<uint64_t> RlqsQuota::OpenStream() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->streams.size() >= options_.max_streams) {
    return Status(StatusCode::kOverflow,
                  "rlqs: " + std::to_string(options_.max_streams) + " streams already open");
  }
  const uint64_t id = impl_->next_stream++;
  impl_->streams.emplace(id, Stream{});
  return id;
}

void RlqsQuota::CloseStream(uint64_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto s = impl_->streams.find(stream);
  if (s == impl_->streams.end()) return;
  for (auto& [id, r] : s->second.buckets) impl_->Leave({stream, id}, r);
  impl_->streams.erase(s);
}

Status RlqsQuota::OnReports(uint64_t stream, const rlqspb::RateLimitQuotaUsageReports& reports,
                            rlqspb::RateLimitQuotaResponse* response) {
  const std::shared_ptr<const RlsConfig> config = impl_->config();
  const int64_t now = impl_->clock->Now();
  std::vector<uint64_t> ids;
  ids.reserve(static_cast<size_t>(reports.bucket_quota_usages_size()));
  for (const auto& [id, usage] : reports.bucket_quota_usages()) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<Plan> plans;
  std::vector<std::pair<uint64_t, const rlqspb::BucketId*>> refused;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto s = impl_->streams.find(stream);
    if (s == impl_->streams.end()) return InvalidArgument("rlqs: the stream is closed");
    Stream& st = s->second;
    if (st.domain.empty()) {
      if (reports.domain().empty()) {
        return InvalidArgument("domain: required in a stream's first report");
      }
      st.domain = reports.domain();
    } else if (!reports.domain().empty() && reports.domain() != st.domain) {
      return InvalidArgument("domain: a stream keeps its first domain (\"" + st.domain +
                             "\"); open a new stream for another");
    }
    for (uint64_t id : ids) {
      const Usage& usage = reports.bucket_quota_usages().at(id);
      auto b = st.buckets.find(id);
      const bool fresh = b == st.buckets.end();
      if (fresh) {
        if (st.buckets.size() >= options_.max_buckets ||
            static_cast<size_t>(usage.bucket_id().bucket_size()) > options_.max_bucket_entries ||
            usage.bucket_id().bucket_size() == 0) {
          refused.emplace_back(id, &usage.bucket_id());
          continue;
        }
        b = st.buckets.emplace(id, Reporter{}).first;
        b->second.id = usage.bucket_id();
      }
      Reporter& r = b->second;
      const MemberKey key{stream, id};
      impl_->Match(config.get(), st.domain, key, r);
      r.last_report_ns = now;
      const uint64_t allowed = std::min(usage.num_requests_allowed(), options_.max_reported_count);
      const uint64_t denied = std::min(usage.num_requests_denied(), options_.max_reported_count);
      const int64_t elapsed = usage.has_time_elapsed() ? ToNs(usage.time_elapsed()) : 0;
      if (elapsed > 0) {
        r.reported = Quantize(elapsed, options_.min_round, options_.min_round, options_.max_round);
      }
      // A bucket's first report says only that it exists (Envoy sends it at
      // the first request): its demand stays unknown, so it starts with an
      // equal share instead of a share of one request.
      if (elapsed > 0 && !fresh) {
        // Demand over at least one min_round: a tiny time_elapsed cannot
        // make a few requests an absurd rate.
        const double seconds =
            static_cast<double>(std::max(elapsed, options_.min_round.count())) / 1e9;
        r.demand = static_cast<double>(allowed + denied) / seconds;
      }
      if (!r.rule.empty()) {
        RuleAtomics& c = impl_->CountersFor(r.rule);
        c.reported_allowed.fetch_add(allowed, std::memory_order_relaxed);
        c.reported_denied.fetch_add(denied, std::memory_order_relaxed);
      }
      plans.push_back(impl_->PlanRound(key, r, now, false));
    }
  }
  for (Plan& p : plans) {
    if (p.acquire) impl_->Acquire(p);
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto s = impl_->streams.find(stream);
  if (s == impl_->streams.end()) return Status();
  for (const Plan& p : plans) {
    if (p.acquire) impl_->Record({stream, p.id}, p, now);
    auto b = s->second.buckets.find(p.id);
    if (b != s->second.buckets.end()) impl_->Respond(b->second, p, response);
  }
  for (const auto& [id, bucket] : refused) {
    Impl::Refuse(id, *bucket, options_.min_round * options_.ttl_rounds, response);
  }
  return Status();
}

void RlqsQuota::Reassign(uint64_t stream, rlqspb::RateLimitQuotaResponse* response) {
  const std::shared_ptr<const RlsConfig> config = impl_->config();
  const int64_t now = impl_->clock->Now();
  std::vector<Plan> plans;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto s = impl_->streams.find(stream);
    if (s == impl_->streams.end() || s->second.domain.empty()) return;
    for (auto& [id, r] : s->second.buckets) {
      const MemberKey key{stream, id};
      impl_->Match(config.get(), s->second.domain, key, r);
      plans.push_back(impl_->PlanRound(key, r, now, true));
    }
  }
  for (Plan& p : plans) {
    if (p.acquire) impl_->Acquire(p);
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto s = impl_->streams.find(stream);
  if (s == impl_->streams.end()) return;
  for (const Plan& p : plans) {
    if (p.acquire) impl_->Record({stream, p.id}, p, now);
    auto b = s->second.buckets.find(p.id);
    if (b != s->second.buckets.end()) impl_->Respond(b->second, p, response);
  }
}

std::shared_ptr<const RlsConfig> RlqsQuota::CurrentConfig() const { return impl_->config(); }

size_t RlqsQuota::open_streams() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->streams.size();
}

std::vector<RlqsRuleCounters> RlqsQuota::Counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::map<std::string, uint64_t> streams;
  for (const auto& [bucket_key, members] : impl_->groups) {
    for (const auto& [key, r] : members) ++streams[r->rule];
  }
  std::vector<RlqsRuleCounters> out;
  for (const auto& [rule, c] : impl_->counters) {
    RlqsRuleCounters snap{.rule = rule};
#define TOLLGATE_RLQS_LOAD(field, metric, help) \
  snap.field = c->field.load(std::memory_order_relaxed);
    TOLLGATE_RLQS_RULE_COUNTERS(TOLLGATE_RLQS_LOAD)
#undef TOLLGATE_RLQS_LOAD
    auto it = streams.find(rule);
    snap.streams = it == streams.end() ? 0 : it->second;
    out.push_back(std::move(snap));
  }
  return out;
}

void RlqsQuota::AppendPrometheus(std::string* out) const {
  const std::vector<RlqsRuleCounters> rules = Counters();
  PrometheusWriter w;
  w.Family("tollgate_rlqs_streams", "gauge", "Open RLQS streams.");
  w.Sample("tollgate_rlqs_streams", {}, static_cast<uint64_t>(open_streams()));
  if (!rules.empty()) {
#define TOLLGATE_RLQS_SAMPLES(field, metric, help) \
  w.Family(metric, "counter", help);               \
  for (const auto& r : rules) w.Sample(metric, {"rule", r.rule}, r.field);
    TOLLGATE_RLQS_RULE_COUNTERS(TOLLGATE_RLQS_SAMPLES)
#undef TOLLGATE_RLQS_SAMPLES
    w.Family("tollgate_rlqs_rule_reporters", "gauge",
             "Live (stream, bucket) reporters sharing the rule's buckets.");
    for (const auto& r : rules)
      w.Sample("tollgate_rlqs_rule_reporters", {"rule", r.rule}, r.streams);
  }
  out->append(w.Take());
}

}  // namespace tollgate::rls
