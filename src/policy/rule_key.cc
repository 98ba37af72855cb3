// KeyForRule (tollgate/policy.h): a rule's bucket key from identity values,
// through the same parts the Enforcer's plan uses (IdentityPart, JoinIdentity,
// BucketKey), and the limit it uses (a tenant table's row, else the rule's).
#include <string>
#include <vector>

#include "policy/enforcer_impl.h"
#include "policy/policy_impl.h"
#include "policy/value_sets.h"
#include "tollgate/policy.h"

namespace tollgate {

std::string IdentityPart(const std::optional<std::string>& value) {
  return value ? NormalizeKeyValue(*value) : std::string(kMissingValue);
}

Result<std::string> IdentityOfValues(const Rule& r,
                                     std::span<const std::optional<std::string>> values,
                                     bool* missing) {
  if (values.size() != r.keys.size()) {
    return InvalidArgument("values: rule '" + r.name + "' keys on " +
                           std::to_string(r.keys.size()) + " value(s), got " +
                           std::to_string(values.size()));
  }
  std::vector<std::string> parts;
  parts.reserve(values.size());
  bool absent = false;
  for (size_t i = 0; i < values.size(); ++i) {
    const Source& source = r.keys[i];
    const std::optional<std::string>* value = &values[i];
    if (source.kind == Source::Kind::kConst) {
      if (*value && **value != source.arg) {
        return InvalidArgument("values[" + std::to_string(i) + "]: " + source.spec +
                               " is always '" + source.arg + "'");
      }
      parts.push_back(NormalizeKeyValue(source.arg));
      continue;
    }
    absent |= !value->has_value();
    parts.push_back(IdentityPart(*value));
  }
  if (missing != nullptr) *missing = absent;
  return JoinIdentity(parts);
}

RuleKeyResult KeyForRule(const Policy& policy, std::string_view rule,
                         std::span<const std::optional<std::string>> values) {
  RuleKeyResult out;
  const int index = policy.Find(rule);
  if (index < 0) return out;
  out.rule_found = true;
  const Rule& r = policy.rules[static_cast<size_t>(index)];
  if (r.lease) {
    out.status = InvalidArgument("rule: '" + r.name +
                                 "' is a concurrency rule: it holds leases, not tokens");
    return out;
  }
  if (r.action != RuleAction::kLimit) {
    out.status =
        InvalidArgument("rule: '" + r.name + "' is an " + std::string(RuleActionName(r.action)) +
                        " rule: it is decided without the store and keeps no state");
    return out;
  }
  bool missing = false;
  Result<std::string> identity = IdentityOfValues(r, values, &missing);
  if (!identity.ok()) {
    out.status = identity.status();
    return out;
  }
  RuleKey key{.rule = r.name,
              .identity = std::move(*identity),
              .bucket_key = {},
              .limit = r.limit,
              .limit_keys = {},
              .block_key = {},
              .block_limit = std::nullopt};
  for (const Source& source : r.keys) key.limit_keys.push_back(source.spec);
  key.bucket_key = BucketKey(r.name, r.limit.algorithm(), key.identity);
  if (r.block_limit) {
    key.block_key = BlockKey(r.name, key.identity);
    key.block_limit = r.block_limit;
  }
  // A tenant table's row is the limit requests with this key are decided with.
  if (const Limit* tenant = r.tenants && !missing ? r.tenants->Find(key.identity) : nullptr) {
    key.limit = *tenant;
  }
  out.key = std::move(key);
  return out;
}

}  // namespace tollgate
