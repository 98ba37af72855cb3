#include "rls/rls_counters.h"

namespace tollgate::rls {
namespace {

uint64_t Load(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

RuleHits* RlsCounters::ForRule(std::string_view rule) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rules_.find(rule);
  if (it != rules_.end()) return it->second.get();
  auto [ins, _] = rules_.emplace(std::string(rule), std::make_unique<RuleHits>());
  return ins->second.get();
}

void RlsCounters::SetDecisionSource(DecisionSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  decisions_ = std::move(source);
}

std::vector<RuleCountersSnapshot> RlsCounters::RuleSnapshot() const {
  DecisionSource source;
  {
    std::lock_guard<std::mutex> lock(mu_);
    source = decisions_;
  }
  std::map<std::string, tollgate::RuleCounters, std::less<>> decided;
  if (source) {
    for (tollgate::RuleCounters& c : source()) decided.emplace(c.rule, std::move(c));
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RuleCountersSnapshot> out;
  out.reserve(rules_.size());
  for (const auto& [name, c] : rules_) {
    RuleCountersSnapshot r{name,
                           Load(c->total_hits),
                           Load(c->over_limit),
                           Load(c->near_limit),
                           Load(c->within_limit),
                           Load(c->shadow_mode)};
    if (auto d = decided.find(name); d != decided.end()) {
      r.allowed = d->second.allowed;
      r.rejected = d->second.rejected;
      r.shadow_rejected = d->second.shadow_rejected;
      r.unenforced = d->second.unenforced;
      r.unavailable = d->second.unavailable;
    }
    out.push_back(std::move(r));
  }
  return out;
}

ServiceCountersSnapshot RlsCounters::ServiceSnapshot() const {
  const ServiceCounters& s = service_;
  return {Load(s.requests),        Load(s.over_limit),   Load(s.ok),
          Load(s.invalid_request), Load(s.store_errors), Load(s.unknown_domain),
          Load(s.no_rule),         Load(s.unenforced),   Load(s.config_reloads)};
}

void RlsCounters::AppendPrometheus(std::string* out) const {
  const ServiceCountersSnapshot s = ServiceSnapshot();
  const struct {
    const char* name;
    const char* help;
    uint64_t value;
  } service[] = {
      {"tollgate_rls_requests_total", "ShouldRateLimit calls.", s.requests},
      {"tollgate_rls_ok_total", "Calls answered OK.", s.ok},
      {"tollgate_rls_over_limit_total", "Calls answered OVER_LIMIT.", s.over_limit},
      {"tollgate_rls_invalid_requests_total", "Calls refused as INVALID_ARGUMENT.",
       s.invalid_request},
      {"tollgate_rls_store_errors_total", "Calls failed with UNAVAILABLE (store error).",
       s.store_errors},
      {"tollgate_rls_unknown_domain_total", "Calls for a domain not configured.", s.unknown_domain},
      {"tollgate_rls_no_rule_total", "Descriptors that matched no rate limit.", s.no_rule},
      {"tollgate_rls_unenforced_total", "Calls the store's failure mode answered.", s.unenforced},
      {"tollgate_rls_config_reloads_total", "Successful configuration reloads.", s.config_reloads},
  };
  PrometheusWriter w;
  for (const auto& f : service) {
    w.Family(f.name, "counter", f.help);
    w.Sample(f.name, {}, f.value);
  }
  const std::vector<RuleCountersSnapshot> rules = RuleSnapshot();
  const struct {
    const char* name;
    const char* help;
    uint64_t RuleCountersSnapshot::*field;
  } per_rule[] = {
      {"tollgate_rls_rule_total_hits_total", "Hits (cost) asked of the rule.",
       &RuleCountersSnapshot::total_hits},
      {"tollgate_rls_rule_over_limit_total", "Hits over the limit.",
       &RuleCountersSnapshot::over_limit},
      {"tollgate_rls_rule_near_limit_total", "Hits allowed with less than 20% quota left.",
       &RuleCountersSnapshot::near_limit},
      {"tollgate_rls_rule_within_limit_total", "Hits within the limit.",
       &RuleCountersSnapshot::within_limit},
      {"tollgate_rls_rule_shadow_mode_total", "Hits over a shadow-mode limit (not enforced).",
       &RuleCountersSnapshot::shadow_mode},
  };
  for (const auto& f : per_rule) {
    if (rules.empty()) break;
    w.Family(f.name, "counter", f.help);
    for (const auto& r : rules) w.Sample(f.name, {"rule", r.rule}, r.*(f.field));
  }
  out->append(w.Take());
}

}  // namespace tollgate::rls
