#include "rls/rls_decider.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <set>

#include "base/one_shot.h"
#include "rls/rls_key.h"
#include "tollgate/policy_headers.h"

namespace tollgate::rls {
namespace {

// Any cost above every possible burst is simply "over"; keep it far from overflow.
constexpr uint64_t kMaxCost = uint64_t{1} << 62;

enum class Kind { kNone, kUnlimited, kDenyAll, kStore };

struct Slot {
  Kind kind = Kind::kNone;
  bool shadow = false;
  int64_t cost = 1;
  const RlsRule* rule = nullptr;   // null for overrides
  std::optional<Limit> own_limit;  // override
  const Limit* limit = nullptr;
  uint32_t requests_per_unit = 0;
  RlsUnit unit = RlsUnit::kUnknown;
  std::string name;
  RuleCounters* counters = nullptr;
  std::string key;
  // Outcome.
  bool decided = false;  // a store decision is in `decision`
  bool over = false;
  Decision decision;
};

struct Call {
  std::shared_ptr<const RlsConfig> config;
  const rlspb::RateLimitRequest* request = nullptr;
  rlspb::RateLimitResponse* response = nullptr;
  RlsDecider::Done done;
  std::vector<Slot> slots;
  std::vector<size_t> enforced, shadow;  // slot indexes with kind kStore
  bool deny_all_enforced = false;        // an enforced deny-all rule with a cost
  bool enforced_denied = false;
  bool unenforced = false;
  bool shadow_failed = false;  // the shadow rules' store call failed
  int64_t start_ns = 0;        // steady clock, for the decision latency histogram
};

rlspb::RateLimitResponse::RateLimit::Unit ToProtoUnit(RlsUnit u) {
  return static_cast<rlspb::RateLimitResponse::RateLimit::Unit>(static_cast<int>(u));
}

void SetDuration(int64_t seconds, google::protobuf::Duration* d) {
  d->set_seconds(seconds);
  d->set_nanos(0);
}

uint32_t ClampU32(int64_t v) {
  if (v <= 0) return 0;
  return v > std::numeric_limits<uint32_t>::max() ? std::numeric_limits<uint32_t>::max()
                                                  : static_cast<uint32_t>(v);
}

void Count(std::atomic<uint64_t>& c, int64_t n) {
  c.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// tollgate_decisions_total semantics, per call and rule (slot): an enforced rule
// counts allowed when the call is answered OK and rejected when it made the call
// OVER_LIMIT (a rule that fit in a rejected call counts nothing, as on HTTP); a
// shadow rule counts shadow_rejected when it would have been over; an answer by
// the store's failure mode counts unenforced.
void CountDecisions(const Call& call, bool over_limit) {
  bool applied = false;
  for (const Slot& s : call.slots) {
    if (s.kind == Kind::kNone || s.counters == nullptr) continue;
    applied = true;
    RuleCounters& c = *s.counters;
    if (s.kind == Kind::kStore && call.unenforced && !s.shadow) {
      Count(c.unenforced, 1);
    } else if (s.shadow) {
      if (s.over) Count(c.shadow_rejected, 1);
    } else if (!over_limit) {
      Count(c.allowed, 1);
    } else if (s.over) {
      Count(c.rejected, 1);
    }
  }
  if (applied) call.config->counters().ObserveDecision(SteadyNs() - call.start_ns);
  // A call with store rules is one decision sent to the store (as an HTTP request is).
  if (!call.enforced.empty() || !call.shadow.empty()) {
    call.config->counters().ObserveStoreCall(call.unenforced || call.shadow_failed);
  }
}

}  // namespace

RlsDecider::RlsDecider(Store* store, std::shared_ptr<const RlsConfig> config, const Clock* clock,
                       RlsDecideOptions options)
    : store_(store), clock_(clock), options_(options), config_(std::move(config)) {}

void RlsDecider::SetConfig(std::shared_ptr<const RlsConfig> config) {
  {
    std::lock_guard<std::mutex> lock(config_mu_);
    config_.swap(config);
  }
  Count(counters().service().config_reloads, 1);
}

namespace {

class Runner {
 public:
  Runner(Store* store, const Clock* clock, const RlsDecideOptions& options)
      : store_(store), clock_(clock), options_(options) {}

  // Seconds until the next `unit` boundary of wall time (envoyproxy/ratelimit's
  // CalculateReset), for rules decided without the store.
  int64_t UnitReset(RlsUnit unit) const {
    const int64_t s = UnitSeconds(unit);
    if (s <= 0) return 0;
    const int64_t now_s = clock_->WallNow() / 1'000'000'000;
    return s - now_s % s;
  }

  void Enforced(std::shared_ptr<Call> call) {
    if (call->enforced.empty()) return Shadow(std::move(call));
    std::vector<AcquireItem> items;
    items.reserve(call->enforced.size());
    for (size_t i : call->enforced) {
      const Slot& s = call->slots[i];
      // A request rejected by a deny-all rule charges nothing.
      items.push_back({s.key, s.limit, call->deny_all_enforced ? 0 : s.cost});
    }
    Runner self = *this;
    store_->AcquireAsync(items, [self, call](Result<BatchDecision> r) mutable {
      if (!r.ok()) return self.Fail(*call, r.status());
      const BatchDecision& b = *r;
      if (!b.enforced) call->unenforced = true;
      call->enforced_denied = !b.allowed;
      for (size_t j = 0; j < call->enforced.size() && j < b.decisions.size(); ++j) {
        Slot& s = call->slots[call->enforced[j]];
        s.decided = true;
        s.decision = b.decisions[j];
        s.over = s.cost > 0 && (!s.decision.allowed || static_cast<int>(j) == b.denied_index);
      }
      if (!b.allowed && b.denied_index < 0) call->enforced_denied = true;
      self.Shadow(std::move(call));
    });
  }

  void Shadow(std::shared_ptr<Call> call) {
    if (call->shadow.empty()) return Finish(*call);
    const bool charge = !call->enforced_denied && !call->deny_all_enforced;
    std::vector<AcquireItem> items;
    items.reserve(call->shadow.size());
    for (size_t i : call->shadow) {
      const Slot& s = call->slots[i];
      items.push_back({s.key, s.limit, charge ? s.cost : 0});
    }
    Runner self = *this;
    store_->AcquireAsync(items, [self, call, charge](Result<BatchDecision> r) mutable {
      if (r.ok()) {
        for (size_t j = 0; j < call->shadow.size() && j < r->decisions.size(); ++j) {
          Slot& s = call->slots[call->shadow[j]];
          s.decided = true;
          s.decision = r->decisions[j];
          // Peeked (cost 0): over means "this cost would not fit now".
          s.over = s.cost > 0 && (charge ? (!r->allowed && (!s.decision.allowed ||
                                                            static_cast<int>(j) == r->denied_index))
                                         : s.cost > s.decision.remaining);
        }
      } else {
        // Shadow rules never change the answer: report them without state.
        Count(call->config->counters().service().store_errors, 1);
        call->shadow_failed = true;
      }
      self.Finish(*call);
    });
  }

  void Fail(Call& call, const Status& st) {
    Count(call.config->counters().service().store_errors, 1);
    for (const Slot& s : call.slots) {
      if (s.kind != Kind::kNone && s.counters != nullptr) Count(s.counters->unavailable, 1);
    }
    call.config->counters().ObserveDecision(SteadyNs() - call.start_ns);
    call.config->counters().ObserveStoreCall(true);
    call.response->Clear();
    call.done(UnavailableError("rate limit store: " + st.ToString()));
  }

  void Finish(Call& call) {
    ServiceCounters& service = call.config->counters().service();
    if (call.unenforced) Count(service.unenforced, 1);
    rlspb::RateLimitResponse& resp = *call.response;
    bool over_limit = false;
    const bool headers = options_.header_style != HeaderStyle::kNone;
    std::vector<QuotaReport> reports, denied_reports;
    int64_t retry_after = -1;
    for (Slot& s : call.slots) {
      auto* st = resp.add_statuses();
      st->set_code(rlspb::RateLimitResponse::OK);
      switch (s.kind) {
        case Kind::kNone:
          break;
        case Kind::kUnlimited:
          st->set_limit_remaining(std::numeric_limits<uint32_t>::max());
          Count(s.counters->total_hits, s.cost);
          Count(s.counters->within_limit, s.cost);
          break;
        case Kind::kDenyAll:
        case Kind::kStore: {
          auto* cl = st->mutable_current_limit();
          cl->set_requests_per_unit(s.requests_per_unit);
          cl->set_unit(ToProtoUnit(s.unit));
          cl->set_name(s.name);
          int64_t reset = 0;
          if (s.kind == Kind::kDenyAll) {
            s.over = s.cost > 0;
            reset = UnitReset(s.unit);
          } else if (s.decided) {
            const Decision& d = s.decision;
            st->set_limit_remaining(ClampU32(d.remaining));
            const Nanos wait =
                (s.over && d.retry_after != Decision::kNever) ? d.retry_after : d.reset_after;
            reset = CeilSeconds(wait);
          }
          SetDuration(reset, st->mutable_duration_until_reset());
          Count(s.counters->total_hits, s.cost);
          if (s.over) {
            Count(s.counters->over_limit, s.cost);
            if (s.shadow) Count(s.counters->shadow_mode, s.cost);
          } else {
            Count(s.counters->within_limit, s.cost);
            if (s.decided && s.limit && s.decision.remaining * 5 < s.limit->burst()) {
              Count(s.counters->near_limit, s.cost);
            }
          }
          if (s.over && !s.shadow) {
            st->set_code(rlspb::RateLimitResponse::OVER_LIMIT);
            over_limit = true;
            retry_after = std::max(retry_after, reset);
          }
          if (headers && !s.shadow && s.decided && s.limit) {
            QuotaReport r = MakeQuotaReport(
                s.name.empty() ? (s.rule ? s.rule->full_key : std::string("override")) : s.name,
                *s.limit, s.decision);
            r.reset_seconds = reset;
            (s.over ? denied_reports : reports).push_back(r);
          }
          break;
        }
      }
    }
    resp.set_overall_code(over_limit ? rlspb::RateLimitResponse::OVER_LIMIT
                                     : rlspb::RateLimitResponse::OK);
    Count(over_limit ? service.over_limit : service.ok, 1);
    CountDecisions(call, over_limit);
    if (headers) {
      std::vector<HeaderField> fields = RenderRateLimitHeaders(
          options_.header_style, over_limit ? denied_reports : reports, clock_->WallNow());
      if (over_limit) fields.push_back({"Retry-After", std::to_string(retry_after)});
      for (const HeaderField& f : fields) {
        auto* h = resp.add_response_headers_to_add();
        h->set_key(f.name);
        h->set_value(f.value);
      }
    }
    call.done(Status::Ok());
  }

 private:
  Store* store_;
  const Clock* clock_;
  RlsDecideOptions options_;
};

}  // namespace

void RlsDecider::Decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
                        Done done) {
  auto call = std::make_shared<Call>();
  call->start_ns = SteadyNs();
  call->config = this->config();
  call->request = &request;
  call->response = response;
  call->done = std::move(done);
  ServiceCounters& service = call->config->counters().service();
  Count(service.requests, 1);
  response->Clear();

  auto invalid = [&](std::string message) {
    Count(service.invalid_request, 1);
    call->done(InvalidArgument(std::move(message)));
  };
  if (request.domain().empty()) return invalid("rate limit domain must not be empty");
  if (request.descriptors_size() == 0) {
    return invalid("rate limit descriptor list must not be empty");
  }
  if (static_cast<size_t>(request.descriptors_size()) > options_.max_descriptors) {
    return invalid("more than " + std::to_string(options_.max_descriptors) + " descriptors");
  }
  const std::string& domain = request.domain();
  const RlsConfig& config = *call->config;
  if (!config.HasDomain(domain)) {
    // Like envoyproxy/ratelimit: no limits apply, the answer is OK.
    Count(service.unknown_domain, 1);
    for (int i = 0; i < request.descriptors_size(); ++i) {
      response->add_statuses()->set_code(rlspb::RateLimitResponse::OK);
    }
    response->set_overall_code(rlspb::RateLimitResponse::OK);
    Count(service.ok, 1);
    return call->done(Status::Ok());
  }

  const int64_t request_cost = std::max<int64_t>(1, request.hits_addend());
  call->slots.resize(static_cast<size_t>(request.descriptors_size()));
  std::set<std::string_view> replaced;
  std::vector<RlsEntry> entries;
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& desc = request.descriptors(i);
    Slot& s = call->slots[static_cast<size_t>(i)];
    if (static_cast<size_t>(desc.entries_size()) > options_.max_entries) {
      return invalid("descriptors[" + std::to_string(i) + "]: more than " +
                     std::to_string(options_.max_entries) + " entries");
    }
    s.cost = desc.has_hits_addend()
                 ? static_cast<int64_t>(std::min<uint64_t>(desc.hits_addend().value(), kMaxCost))
                 : request_cost;
    entries.clear();
    for (const auto& e : desc.entries()) entries.push_back({e.key(), e.value()});
    if (desc.has_limit()) {
      // The descriptor carries its own limit (Envoy's `limit` override): it
      // applies whatever the configuration says, never in shadow mode.
      const auto unit = static_cast<RlsUnit>(static_cast<int>(desc.limit().unit()));
      if (UnitSeconds(unit) == 0) {
        return invalid("descriptors[" + std::to_string(i) + "].limit.unit: unknown unit");
      }
      s.unit = unit;
      s.requests_per_unit = desc.limit().requests_per_unit();
      s.counters = config.counters().ForRule(domain + ".override");
      if (s.requests_per_unit == 0) {
        s.kind = Kind::kDenyAll;
      } else {
        auto limit =
            LimitForUnit(unit, s.requests_per_unit, options_.override_algorithm, /*burst=*/0);
        if (!limit.ok()) {
          return invalid("descriptors[" + std::to_string(i) +
                         "].limit: " + limit.status().message());
        }
        s.own_limit = *limit;
        s.kind = Kind::kStore;
        s.key = BucketKey("o" + LimitShape(*s.own_limit), domain, entries);
      }
      continue;
    }
    s.rule = config.Match(domain, entries);
    if (s.rule == nullptr) {
      Count(service.no_rule, 1);
      continue;
    }
    const RlsRule& r = *s.rule;
    for (const std::string& name : r.replaces) replaced.insert(name);
    s.counters = r.counters;
    s.name = r.name;
    s.unit = r.unit;
    s.requests_per_unit = r.requests_per_unit;
    s.shadow = r.shadow_mode;
    if (r.unlimited) {
      s.kind = Kind::kUnlimited;
    } else if (!r.limit) {
      s.kind = Kind::kDenyAll;
    } else {
      s.kind = Kind::kStore;
      s.limit = &*r.limit;
      s.key = BucketKey(r.shape, domain, entries);
    }
  }
  for (size_t i = 0; i < call->slots.size(); ++i) {
    Slot& s = call->slots[i];
    if (s.own_limit) s.limit = &*s.own_limit;  // slots no longer move
    if (s.rule && !s.rule->name.empty() && replaced.count(s.rule->name) != 0 &&
        s.kind != Kind::kUnlimited) {
      s.kind = Kind::kNone;  // replaced by another matched rule
      continue;
    }
    if (s.kind == Kind::kStore) (s.shadow ? call->shadow : call->enforced).push_back(i);
    if (s.kind == Kind::kDenyAll && !s.shadow && s.cost > 0) call->deny_all_enforced = true;
  }
  Runner(store_, clock_, options_).Enforced(std::move(call));
}

Status RlsDecider::DecideSync(const rlspb::RateLimitRequest& request,
                              rlspb::RateLimitResponse* response) {
  // On the stack: Wait() returns only once the callback has run.
  base::OneShot<Status> result;
  Decide(request, response, [&](Status st) { result.Set(std::move(st)); });
  return result.Wait();
}

}  // namespace tollgate::rls
