// Abuse protection fields of a rule (issue 34; docs/configuration.md,
// "Counting chosen outcomes" and "Penalty box"): "count_on" and "block_for",
// parsed once here and planned by the Enforcer (the settlement refunds what
// count_on does not count, enforcer_block.cc keeps the penalty boxes).
#include <string>

#include "base/config_errors.h"
#include "base/json_fields.h"
#include "policy/policy_impl.h"
#include "tollgate/period.h"

namespace tollgate {

using base::ConfigErrors;
using base::FieldPath;
using base::JsonTypeName;

namespace {

// A penalty shorter than a second cannot be told in Retry-After's whole
// seconds; one longer than kMaxPeriod (366 days) is not a period.
constexpr Nanos kMinBlock{1'000'000'000};

}  // namespace

void ParseAbuseFields(const nlohmann::json& j, const std::string& path, bool limited,
                      bool concurrency, Rule* rule, ConfigErrors& e) {
  for (const char* field : {"count_on", "block_for"}) {
    if (!j.contains(field)) continue;
    if (!limited) {
      e.Add(FieldPath(path, field), "is only used by limit rules");
    } else if (concurrency) {
      e.Add(FieldPath(path, field),
            "is not used by a concurrency rule (it holds leases, not tokens)");
    }
  }
  if (!limited || concurrency) return;
  if (auto c = j.find("count_on"); c != j.end()) {
    rule->count_on = ParseRefundOn(*c, FieldPath(path, "count_on"), e);
    if (j.contains("refund_on")) {
      e.Add(FieldPath(path, "count_on"),
            "cannot be used with refund_on (count_on already gives back every other outcome)");
    }
  }
  if (auto b = j.find("block_for"); b != j.end()) {
    const std::string where = FieldPath(path, "block_for");
    if (!b->is_string()) {
      e.Add(where, "must be a period string like \"15m\" (got " + JsonTypeName(*b) + ")");
      return;
    }
    auto period = ParsePeriod(b->get<std::string>());
    if (!period.ok()) {
      e.Add(where, period.status().message());
      return;
    }
    if (*period < kMinBlock) {
      e.Add(where, "must be at least 1s (got \"" + b->get<std::string>() + "\")");
      return;
    }
    auto limit = Limit::Create(
        {.algorithm = Algorithm::kTokenBucket, .count = 1, .period = *period, .burst = 1});
    if (!limit.ok()) {
      e.Add(where, limit.status().message());
      return;
    }
    rule->block_for = *period;
    rule->block_limit = *limit;
  }
}

void CheckAbuseFields(const std::string& path, Rule* rule, ConfigErrors& e) {
  if (!rule->count_on) return;
  const std::string where = FieldPath(path, "count_on");
  if (rule->cost_kind == Rule::CostKind::kResponse || rule->cost_kind == Rule::CostKind::kHandler) {
    e.Add(where,
          "cannot be used with a cost after the response (the cost is settled already; "
          "use refund_on)");
  }
  if (rule->limit.algorithm() == Algorithm::kSlidingLog || rule->limit.calendar() != nullptr) {
    e.Add(where,
          "needs token_bucket, leaky_bucket, fixed_window (without calendar) or sliding_window "
          "(the outcomes it does not count are refunded)");
  }
}

std::string AbuseDescription(const Rule& rule) {
  std::string out;
  if (rule.count_on) {
    out += " count_on=";
    for (size_t i = 0; i < rule.count_on->entries.size(); ++i) {
      out += (i ? "," : "") + rule.count_on->entries[i].label;
    }
  }
  if (rule.block_limit) out += " block_for=" + FormatPeriod(rule.block_for);
  return out;
}

std::string BlockKey(std::string_view rule, std::string_view identity) {
  std::string key;
  key.reserve(rule.size() + identity.size() + 7);
  key.append(rule)
      .append(
          "\x1f"
          "block"
          "\x1f")
      .append(identity);
  return key;
}

}  // namespace tollgate
