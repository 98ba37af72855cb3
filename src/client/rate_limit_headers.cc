// Reading RateLimit fields of every vintage into one RateLimitInfo.
#include <algorithm>
#include <charconv>
#include <string>

#include "client/structured_fields.h"
#include "tollgate/client.h"
#include "tollgate/http_text.h"

namespace tollgate {
namespace {

constexpr size_t kMaxFieldBytes = 8192;

// Every line of field `name`, joined with ", " (RFC 9110 §5.3). nullopt when
// absent or oversized.
std::optional<std::string> Field(std::span<const HeaderPair> headers, std::string_view name) {
  std::optional<std::string> out;
  for (const auto& [n, v] : headers) {
    if (!EqualsIgnoreCase(n, name)) continue;
    if (!out) {
      out.emplace(v);
    } else {
      out->append(", ").append(v);
    }
    if (out->size() > kMaxFieldBytes) return std::nullopt;
  }
  return out;
}

std::optional<int64_t> ParseNonNegative(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::optional<int64_t> IntParam(const sf::Item& item, std::string_view key) {
  const sf::BareItem* p = item.Param(key);
  if (p == nullptr || p->type != sf::BareItem::Type::kInteger || p->integer < 0)
    return std::nullopt;
  return p->integer;
}

Nanos Seconds(int64_t s) { return Nanos(std::chrono::seconds(std::min<int64_t>(s, 1LL << 32))); }

RateLimitQuota& QuotaNamed(RateLimitInfo& info, const std::string& name) {
  for (auto& q : info.quotas) {
    if (q.name == name) return q;
  }
  info.quotas.emplace_back();
  info.quotas.back().name = name;
  return info.quotas.back();
}

// Draft -08 .. -11: RateLimit and RateLimit-Policy are lists of named members.
// A member whose name is not a String/Token, or that lacks its required parameter,
// makes the whole field malformed (and ignored).
bool ParseDraft11(const std::optional<std::string>& ratelimit,
                  const std::optional<std::string>& policy, RateLimitInfo& info) {
  std::optional<std::vector<sf::Item>> limits, policies;
  if (ratelimit) limits = sf::ParseList(*ratelimit);
  if (policy) policies = sf::ParseList(*policy);
  auto named = [](const sf::Item& it) {
    return !it.inner_list && (it.value.type == sf::BareItem::Type::kString ||
                              it.value.type == sf::BareItem::Type::kToken);
  };
  auto valid = [&](const std::optional<std::vector<sf::Item>>& list, std::string_view required) {
    if (!list || list->empty()) return false;
    return std::all_of(list->begin(), list->end(), [&](const sf::Item& it) {
      return named(it) && IntParam(it, required).has_value();
    });
  };
  const bool limits_ok = valid(limits, "r");
  const bool policies_ok = valid(policies, "q");
  if (!limits_ok && !policies_ok) return false;
  if (policies_ok) {
    for (const auto& it : *policies) {
      if (info.quotas.size() >= RateLimitInfo::kMaxQuotas) break;
      RateLimitQuota& q = QuotaNamed(info, it.value.text);
      q.quota = IntParam(it, "q");
      if (auto w = IntParam(it, "w"); w && *w > 0) q.window_seconds = w;
      if (const auto* qu = it.Param("qu");
          qu && (qu->type == sf::BareItem::Type::kString || qu->type == sf::BareItem::Type::kToken))
        q.quota_unit = qu->text;
      if (const auto* pk = it.Param("pk"); pk && pk->type == sf::BareItem::Type::kByteSequence)
        q.partition_key = pk->text;
    }
  }
  if (limits_ok) {
    for (const auto& it : *limits) {
      const bool known =
          std::any_of(info.quotas.begin(), info.quotas.end(),
                      [&](const RateLimitQuota& q) { return q.name == it.value.text; });
      if (!known && info.quotas.size() >= RateLimitInfo::kMaxQuotas) break;
      RateLimitQuota& q = QuotaNamed(info, it.value.text);
      q.remaining = IntParam(it, "r");
      if (auto t = IntParam(it, "t")) q.reset = Seconds(*t);
      if (const auto* pk = it.Param("pk"); pk && pk->type == sf::BareItem::Type::kByteSequence)
        q.partition_key = pk->text;
    }
  }
  info.source = RateLimitSource::kDraft11;
  return true;
}

// Draft -07: RateLimit: limit=100, remaining=50, reset=5
bool ParseDraft07(const std::optional<std::string>& ratelimit, RateLimitInfo& info) {
  if (!ratelimit) return false;
  auto dict = sf::ParseDictionary(*ratelimit);
  if (!dict) return false;
  RateLimitQuota q;
  bool any = false;
  for (const auto& [key, item] : *dict) {
    if (item.inner_list || item.value.type != sf::BareItem::Type::kInteger ||
        item.value.integer < 0)
      continue;
    if (key == "limit") {
      q.quota = item.value.integer;
      any = true;
      if (auto w = IntParam(item, "w"); w && *w > 0) q.window_seconds = w;
    } else if (key == "remaining") {
      q.remaining = item.value.integer;
      any = true;
    } else if (key == "reset") {
      q.reset = Seconds(item.value.integer);
      any = true;
    }
  }
  if (!any || !q.remaining) return false;
  info.quotas.push_back(std::move(q));
  info.source = RateLimitSource::kDraft07;
  return true;
}

// Drafts -00 .. -06: RateLimit-Limit ("10" or "10, 10;w=1"), RateLimit-Remaining,
// RateLimit-Reset (delta seconds); -04 .. -06 put "100;w=10" into RateLimit-Policy.
bool ParseDraft03(std::span<const HeaderPair> headers, const std::optional<std::string>& policy,
                  RateLimitInfo& info) {
  const auto remaining = Field(headers, "RateLimit-Remaining");
  if (!remaining) return false;
  const auto r = ParseNonNegative(*remaining);
  if (!r) return false;
  RateLimitQuota q;
  q.remaining = r;
  if (const auto limit = Field(headers, "RateLimit-Limit")) {
    if (auto list = sf::ParseList(*limit); list && !list->empty()) {
      const sf::Item& first = list->front();
      if (!first.inner_list && first.value.type == sf::BareItem::Type::kInteger &&
          first.value.integer >= 0)
        q.quota = first.value.integer;
      // "10, 10;w=1": the quota policies follow the limit itself.
      for (size_t i = 1; i < list->size() && !q.window_seconds; ++i) {
        if (auto w = IntParam((*list)[i], "w"); w && *w > 0) q.window_seconds = w;
      }
    }
  }
  if (policy && !q.window_seconds) {
    if (auto list = sf::ParseList(*policy); list && !list->empty()) {
      if (auto w = IntParam(list->front(), "w"); w && *w > 0) q.window_seconds = w;
    }
  }
  if (const auto reset = Field(headers, "RateLimit-Reset")) {
    if (auto s = ParseNonNegative(*reset)) q.reset = Seconds(*s);
  }
  info.quotas.push_back(std::move(q));
  info.source = RateLimitSource::kDraft03;
  return true;
}

bool ParseXRateLimit(std::span<const HeaderPair> headers, int64_t now_wall_ns,
                     ResetEncoding encoding, RateLimitInfo& info) {
  const auto remaining = Field(headers, "X-RateLimit-Remaining");
  if (!remaining) return false;
  const auto r = ParseNonNegative(*remaining);
  if (!r) return false;
  RateLimitQuota q;
  q.remaining = r;
  if (const auto limit = Field(headers, "X-RateLimit-Limit")) q.quota = ParseNonNegative(*limit);
  if (const auto resource = Field(headers, "X-RateLimit-Resource");
      resource && resource->size() <= 128)
    q.name = *resource;
  if (const auto reset = Field(headers, "X-RateLimit-Reset")) {
    if (auto v = ParseNonNegative(*reset)) {
      ResetEncoding e = encoding;
      if (e == ResetEncoding::kAuto) {
        e = *v > 1'000'000'000'000 ? ResetEncoding::kEpochMillis
            : *v > 1'000'000'000   ? ResetEncoding::kEpochSeconds
                                   : ResetEncoding::kDeltaSeconds;
      }
      const int64_t now_ms = now_wall_ns / 1'000'000;
      int64_t wait_ms = 0;
      switch (e) {
        case ResetEncoding::kDeltaSeconds:
          wait_ms = std::min<int64_t>(*v, 1LL << 32) * 1000;
          break;
        case ResetEncoding::kDeltaMillis:
          wait_ms = std::min<int64_t>(*v, 1LL << 42);
          break;
        case ResetEncoding::kEpochSeconds:
          wait_ms = std::min<int64_t>(*v, 1LL << 42) * 1000 - now_ms;
          break;
        case ResetEncoding::kEpochMillis:
        case ResetEncoding::kAuto:
          wait_ms = std::min<int64_t>(*v, 1LL << 52) - now_ms;
          break;
      }
      // Capped like Seconds() (2^32 s): up to 2^52 ms would overflow nanoseconds.
      q.reset = std::chrono::milliseconds(std::clamp<int64_t>(wait_ms, 0, (1LL << 32) * 1000));
    }
  }
  info.quotas.push_back(std::move(q));
  info.source = RateLimitSource::kXRateLimit;
  return true;
}

}  // namespace

std::string_view RateLimitSourceName(RateLimitSource source) {
  switch (source) {
    case RateLimitSource::kNone:
      return "none";
    case RateLimitSource::kDraft11:
      return "draft-11";
    case RateLimitSource::kDraft07:
      return "draft-07";
    case RateLimitSource::kDraft03:
      return "draft-03";
    case RateLimitSource::kXRateLimit:
      return "x-ratelimit";
  }
  return "unknown";
}

const RateLimitQuota* RateLimitInfo::Tightest() const {
  const RateLimitQuota* best = nullptr;
  for (const auto& q : quotas) {
    if (!q.remaining) continue;
    if (best == nullptr || *q.remaining < *best->remaining ||
        (*q.remaining == *best->remaining &&
         q.reset.value_or(Nanos(0)) > best->reset.value_or(Nanos(0))))
      best = &q;
  }
  return best;
}

RateLimitInfo ParseRateLimitHeaders(std::span<const HeaderPair> headers, int64_t now_wall_ns,
                                    const RateLimitParseOptions& options) {
  RateLimitInfo info;
  if (const auto ra = Field(headers, "Retry-After")) {
    info.retry_after = ParseRetryAfter(*ra, now_wall_ns);
  }
  const auto ratelimit = Field(headers, "RateLimit");
  const auto policy = Field(headers, "RateLimit-Policy");
  if (ParseDraft11(ratelimit, policy, info)) return info;
  info.quotas.clear();
  if (ParseDraft07(ratelimit, info)) return info;
  if (ParseDraft03(headers, policy, info)) return info;
  ParseXRateLimit(headers, now_wall_ns, options.x_reset, info);
  return info;
}

}  // namespace tollgate
