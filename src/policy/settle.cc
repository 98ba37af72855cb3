// Settlements: the cost known after the response and refunds
// (docs/configuration.md, "Cost after the response" and "Refunds"). The
// Enforcer makes a Settlement for an allowed request whose enforced rules
// settle; the front end hands it back with the ResponseOutcome when the
// response ends, and the Enforcer turns it into Store::Settle items.
#include <algorithm>
#include <cctype>

#include "base/json_fields.h"
#include "base/one_shot.h"
#include "policy/enforcer_impl.h"
#include "policy/policy_impl.h"
#include "tollgate/http_text.h"
#include "tollgate/policy.h"

namespace tollgate {

struct Settlement::Item {
  explicit Item(const Limit& l) : limit(l) {}
  Limit limit;
  std::string key;  // the store key
  Rule::CostKind cost_kind = Rule::CostKind::kFixed;
  std::string field;          // kResponse: the response field
  int64_t charged = 0;        // charged up front (the estimate, or the cost)
  int64_t default_cost = 1;   // a missing or bad reported cost
  int64_t max_cost = 0;       // a reported cost's bound
  int64_t abort_cost = 0;     // the client left and the upstream did not finish
  int64_t settle_charge = 0;  // a known cost charged at settlement (ExplicitItem)
  std::optional<RefundOn> refund_on;
  std::optional<RefundOn> count_on;  // the outcomes whose charge stays (the rest are refunded)
  std::optional<FailureMode> failure_mode;
  RuleState* state = nullptr;
};

Settlement::Settlement() = default;
Settlement::~Settlement() = default;

namespace {

using base::ConfigErrors;
using base::IndexPath;
using base::JsonTypeName;

// The reported cost of `item` in `response`: true with *out when valid.
bool ReportedCost(const Settlement::Item& item, const ResponseOutcome& response, int64_t* out) {
  if (item.cost_kind == Rule::CostKind::kHandler) {
    if (!response.handler_cost || *response.handler_cost < 0) return false;
    *out = *response.handler_cost;
    return true;
  }
  // The last value given wins: a trailer's replaces the header's.
  const HeaderField* found = nullptr;
  for (const HeaderField& f : response.fields) {
    if (f.name == item.field) found = &f;
  }
  return found != nullptr && ParseResponseCost(found->value, out);
}

// The refund of an outcome a rule's count_on does not count
// (tollgate_refunds_total{outcome="not_counted"}).
const RefundOn::Entry& NotCounted() {
  static const RefundOn::Entry entry{RefundOn::Entry::Kind::kStatus, 0, "not_counted"};
  return entry;
}

}  // namespace

bool ParseResponseCost(std::string_view text, int64_t* out) {
  text = TrimOws(text);
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

const RefundOn::Entry* RefundOn::Match(const ResponseOutcome& outcome) const {
  for (const Entry& e : entries) {
    switch (e.kind) {
      case Entry::Kind::kClass:
        if (outcome.kind == ResponseOutcome::Kind::kResponse && outcome.status / 100 == e.value) {
          return &e;
        }
        break;
      case Entry::Kind::kStatus:
        if (outcome.kind == ResponseOutcome::Kind::kResponse && outcome.status == e.value)
          return &e;
        break;
      case Entry::Kind::kTimeout:
        if (outcome.kind == ResponseOutcome::Kind::kTimeout) return &e;
        break;
      case Entry::Kind::kConnectError:
        if (outcome.kind == ResponseOutcome::Kind::kConnectError) return &e;
        break;
      case Entry::Kind::kBroken:
        if (outcome.kind == ResponseOutcome::Kind::kBroken) return &e;
        break;
    }
  }
  return nullptr;
}

std::optional<RefundOn> ParseRefundOn(const nlohmann::json& j, const std::string& path,
                                      ConfigErrors& e) {
  if (!j.is_array() || j.empty() || j.size() > kMaxRefundOn) {
    e.Add(path, "must be an array of 1 to " + std::to_string(kMaxRefundOn) +
                    " outcomes (\"5xx\", \"503\", \"timeout\", \"connect_error\", "
                    "\"upstream_error\")");
    return std::nullopt;
  }
  const size_t before = e.count();
  RefundOn out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = IndexPath(path, i);
    if (!j[i].is_string()) {
      e.Add(p, "must be a string (got " + JsonTypeName(j[i]) + ")");
      continue;
    }
    const std::string s = j[i].get<std::string>();
    RefundOn::Entry entry{RefundOn::Entry::Kind::kTimeout, 0, s};
    const bool three = s.size() == 3 && s[0] >= '1' && s[0] <= '5';
    if (s == "timeout") {
      entry.kind = RefundOn::Entry::Kind::kTimeout;
    } else if (s == "connect_error") {
      entry.kind = RefundOn::Entry::Kind::kConnectError;
    } else if (s == "upstream_error") {
      entry.kind = RefundOn::Entry::Kind::kBroken;
    } else if (three && s[1] == 'x' && s[2] == 'x') {
      entry.kind = RefundOn::Entry::Kind::kClass;
      entry.value = s[0] - '0';
    } else if (three && std::isdigit(static_cast<unsigned char>(s[1])) &&
               std::isdigit(static_cast<unsigned char>(s[2]))) {
      entry.kind = RefundOn::Entry::Kind::kStatus;
      entry.value = std::stoi(s);
    } else {
      e.Add(p,
            "must be a status class (\"5xx\"), a status (\"503\"), \"timeout\", "
            "\"connect_error\" or \"upstream_error\" (got \"" +
                s.substr(0, 64) + "\")");
      continue;
    }
    for (const RefundOn::Entry& other : out.entries) {
      if (other.label == s) e.Add(p, "\"" + s + "\" is listed twice");
    }
    out.entries.push_back(std::move(entry));
  }
  if (e.count() != before) return std::nullopt;
  return out;
}

void RuleState::CountRefund(std::string_view label) {
  std::lock_guard<std::mutex> lock(refunds_mu);
  for (auto& [name, n] : refunds) {
    if (name == label) {
      ++n;
      return;
    }
  }
  refunds.emplace_back(std::string(label), 1);
}

std::shared_ptr<Settlement> Enforcer::Impl::MakeSettlement(const Plan& plan) const {
  std::shared_ptr<Settlement> out;
  if (plan.explain) return out;
  for (size_t i = 0; i < plan.StoreCount(); ++i) {
    const PlannedItem& item = plan.items[i];
    // Explicit items with a known charge, enforced or not; else policy rules
    // whose cost comes after the response, enforced ones only.
    const bool known_charge = item.settle_charge > 0;
    if (!known_charge &&
        (i >= plan.enforced_count || item.rule == nullptr || !item.rule->SettlesAfterResponse())) {
      continue;
    }
    if (!out) {
      out = std::make_shared<Settlement>();
      out->admitted_at_ns_ = clock_->Now();
    }
    Settlement::Item s(item.limit);
    s.key = item.key;
    if (known_charge) {
      s.settle_charge = item.settle_charge;
      s.failure_mode = item.failure_mode;
      s.state = item.state;
      out->items_.push_back(std::move(s));
      continue;
    }
    const Rule& rule = *item.rule;
    s.cost_kind = rule.cost_kind;
    s.field = rule.cost_kind == Rule::CostKind::kResponse ? rule.cost_arg : std::string();
    s.charged = plan.peek ? 0 : item.cost;
    s.default_cost = rule.default_cost;
    s.max_cost = rule.max_response_cost;
    s.abort_cost = rule.abort_cost;
    s.refund_on = rule.refund_on;
    s.count_on = rule.count_on;
    s.failure_mode = item.failure_mode;
    s.state = item.state;
    if (!s.field.empty() &&
        std::find(out->fields_.begin(), out->fields_.end(), s.field) == out->fields_.end()) {
      out->fields_.push_back(s.field);
    }
    out->handler_cost_ |= rule.cost_kind == Rule::CostKind::kHandler;
    out->items_.push_back(std::move(s));
  }
  return out;
}

namespace {

// What one settlement item asks of the store, and the refund label if any.
struct Planned {
  SettleItem item;
  const RefundOn::Entry* refund = nullptr;
  size_t index = 0;
};

}  // namespace

Status Enforcer::Settle(Settlement& settlement, const ResponseOutcome& response) {
  // A non-owning pointer: the caller keeps `settlement` alive until we return.
  return base::CallSync<Status>([&](auto done) {
    SettleAsync(std::shared_ptr<Settlement>(&settlement, [](Settlement*) {}), response,
                std::move(done));
  });
}

void Enforcer::SettleAsync(std::shared_ptr<Settlement> settlement, ResponseOutcome response,
                           std::function<void(Status)> done) {
  if (!done) done = [](Status) {};
  if (!settlement || settlement->settled_.exchange(true, std::memory_order_acq_rel)) {
    done(Status::Ok());  // exactly once: a second settlement does nothing
    return;
  }
  const int64_t age = std::max<int64_t>(0, impl_->clock_->Now() - settlement->admitted_at_ns_);
  auto planned = std::make_shared<std::vector<Planned>>();
  for (size_t i = 0; i < settlement->items_.size(); ++i) {
    const Settlement::Item& it = settlement->items_[i];
    Planned p{SettleItem{it.key, &it.limit}, nullptr, i};
    p.item.age = Nanos(age);
    p.item.failure_mode = it.failure_mode;
    p.refund = it.refund_on ? it.refund_on->Match(response) : nullptr;
    if (it.count_on && it.count_on->Match(response) == nullptr) p.refund = &NotCounted();
    if (it.settle_charge > 0) {
      p.item.charge = it.settle_charge;
    } else if (p.refund != nullptr) {
      p.item.refund = it.charged;
    } else if (it.cost_kind == Rule::CostKind::kResponse ||
               it.cost_kind == Rule::CostKind::kHandler) {
      int64_t cost = 0;
      const bool reported = ReportedCost(it, response, &cost) && cost <= it.max_cost;
      if (response.client_aborted) {
        // The client left and the upstream did not finish: abort_cost, or
        // what was reported so far (a header) when larger.
        cost = reported ? std::max(cost, it.abort_cost) : it.abort_cost;
      } else if (!reported) {
        // Missing, malformed or beyond the bound: the documented default (or
        // the bound), counted. An upstream that never answered is not counted.
        if (response.kind == ResponseOutcome::Kind::kResponse && response.status != 0) {
          it.state->response_cost_invalid.fetch_add(1, std::memory_order_relaxed);
        }
        cost = cost > it.max_cost ? it.max_cost : it.default_cost;
      }
      const int64_t delta = cost - it.charged;
      (delta >= 0 ? p.item.charge : p.item.refund) = delta >= 0 ? delta : -delta;
    }
    if (p.item.charge > 0 || p.item.refund > 0) planned->push_back(p);
  }
  if (planned->empty()) {
    for (const Settlement::Item& it : settlement->items_) {
      it.state->settled.fetch_add(1, std::memory_order_relaxed);
    }
    done(Status::Ok());
    return;
  }
  std::vector<SettleItem> items;
  items.reserve(planned->size());
  for (const Planned& p : *planned) items.push_back(p.item);
  impl_->store_->SettleAsync(items, [settlement, planned,
                                     done = std::move(done)](Result<std::vector<Settled>> r) {
    if (!r.ok() || r->size() != planned->size()) {
      for (const Planned& p : *planned) {
        settlement->items_[p.index].state->settle_failures.fetch_add(1, std::memory_order_relaxed);
      }
      done(r.ok() ? InternalError("store settled a different number of items") : r.status());
      return;
    }
    for (const Settlement::Item& it : settlement->items_) {
      it.state->settled.fetch_add(1, std::memory_order_relaxed);
    }
    for (size_t i = 0; i < planned->size(); ++i) {
      const Planned& p = (*planned)[i];
      RuleState& state = *settlement->items_[p.index].state;
      const Settled& s = (*r)[i];
      state.settled_cost.fetch_add(static_cast<uint64_t>(s.charged), std::memory_order_relaxed);
      if (p.refund != nullptr && s.refunded > 0) state.CountRefund(p.refund->label);
    }
    done(Status::Ok());
  });
}

}  // namespace tollgate
