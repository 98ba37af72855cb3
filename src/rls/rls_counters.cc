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
    RuleCountersSnapshot r;
    r.rule = name;
#define TOLLGATE_LOAD_HIT(field, metric, help) r.field = Load(c->field);
    TOLLGATE_RLS_HIT_COUNTERS(TOLLGATE_LOAD_HIT)
#undef TOLLGATE_LOAD_HIT
    if (auto d = decided.find(name); d != decided.end()) {
#define TOLLGATE_COPY_DECISION(field, label) r.field = d->second.field;
      TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_COPY_DECISION)
#undef TOLLGATE_COPY_DECISION
    }
    out.push_back(std::move(r));
  }
  return out;
}

ServiceCountersSnapshot RlsCounters::ServiceSnapshot() const {
  ServiceCountersSnapshot out;
#define TOLLGATE_LOAD_SERVICE(field, metric, help) out.field = Load(service_.field);
  TOLLGATE_RLS_SERVICE_COUNTERS(TOLLGATE_LOAD_SERVICE)
#undef TOLLGATE_LOAD_SERVICE
  return out;
}

void RlsCounters::AppendPrometheus(std::string* out) const {
  const ServiceCountersSnapshot s = ServiceSnapshot();
  PrometheusWriter w;
#define TOLLGATE_SERVICE_SAMPLE(field, metric, help) \
  w.Family(metric, "counter", help);                 \
  w.Sample(metric, {}, s.field);
  TOLLGATE_RLS_SERVICE_COUNTERS(TOLLGATE_SERVICE_SAMPLE)
#undef TOLLGATE_SERVICE_SAMPLE
  const std::vector<RuleCountersSnapshot> rules = RuleSnapshot();
  if (!rules.empty()) {
#define TOLLGATE_HIT_SAMPLES(field, metric, help) \
  w.Family(metric, "counter", help);              \
  for (const auto& r : rules) w.Sample(metric, {"rule", r.rule}, r.field);
    TOLLGATE_RLS_HIT_COUNTERS(TOLLGATE_HIT_SAMPLES)
#undef TOLLGATE_HIT_SAMPLES
  }
  out->append(w.Take());
}

}  // namespace tollgate::rls
