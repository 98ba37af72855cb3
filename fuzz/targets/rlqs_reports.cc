// Fuzz target: an Envoy RLQS usage report (a StreamRateLimitQuotas message,
// bytes from the data plane) fed to RlqsQuota's bounded accounting
// (src/rls/rlqs_quota.cc) on a local store and a manual clock.
//
// Input: a serialized envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports.
// Properties: OnReports answers Ok or kInvalidArgument; an Ok answer has one
// action per reported bucket, each with an assignment; token buckets hold
// between 1 and the rule's burst tokens with a fill interval and a TTL in
// [min_round, ttl_rounds * max_round]; over three rounds on two streams the
// tokens assigned never exceed the rule's burst plus its rate over the time
// passed; a closed stream's reporters leave the counters' split.
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_enforcer.h"
#include "fuzz_input.h"
#include "rls/rlqs_quota.h"
#include "rls/rls_yaml.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"

namespace {

namespace rls = tollgate::rls;

// 60 a second (burst 60) per user under name=api; 0 for name=closed; open unlimited.
std::shared_ptr<const rls::RlsConfig> Config() {
  static const std::shared_ptr<const rls::RlsConfig> config = [] {
    auto parsed = rls::LoadRlsConfigYaml(R"(domain: edge
descriptors:
  - key: name
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 60}
  - key: name
    value: closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: name
    value: open
    rate_limit: {unlimited: true}
)");
    FUZZ_CHECK(parsed.config != nullptr,
               "config: " + (parsed.errors.empty() ? std::string() : parsed.errors[0].ToString()));
    return parsed.config;
  }();
  return config;
}

int64_t Ns(const google::protobuf::Duration& d) { return d.seconds() * 1'000'000'000 + d.nanos(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rls::rlqspb::RateLimitQuotaUsageReports reports;
  if (!reports.ParseFromArray(data, static_cast<int>(size))) return 0;

  tollgate::ManualClock clock;
  const auto store = tollgate::fuzz::SmallStore(&clock);
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": []})", &clock);
  FUZZ_CHECK(policies.ok(), "empty policy: " + policies.status().ToString());
  auto enforcer = tollgate::Enforcer::Create(*policies, store.get(), &clock);
  FUZZ_CHECK(enforcer.ok(), "enforcer: " + enforcer.status().ToString());
  rls::RlqsOptions options;
  options.max_buckets = 16;
  options.max_streams = 2;
  auto made = rls::RlqsQuota::Create(
      enforcer->get(), [] { return Config(); }, &clock, options);
  FUZZ_CHECK(made.ok(), "quota: " + made.status().ToString());
  rls::RlqsQuota& quota = **made;

  const int64_t start = clock.Now();
  uint64_t streams[2] = {0, 0};
  for (uint64_t& s : streams) {
    auto id = quota.OpenStream();
    FUZZ_CHECK(id.ok(), "open: " + id.status().ToString());
    s = *id;
  }
  FUZZ_CHECK(!quota.OpenStream().ok(), "a third stream beyond max_streams = 2");
  for (int round = 0; round < 3; ++round) {
    for (uint64_t s : streams) {
      rls::rlqspb::RateLimitQuotaResponse response;
      const tollgate::Status st = quota.OnReports(s, reports, &response);
      FUZZ_CHECK(st.ok() || st.code() == tollgate::StatusCode::kInvalidArgument,
                 "unexpected status " + st.ToString());
      if (!st.ok()) {
        FUZZ_CHECK(response.bucket_action_size() == 0, "actions beside an error");
        continue;
      }
      FUZZ_CHECK(response.bucket_action_size() == reports.bucket_quota_usages_size(),
                 "one action per bucket");
      for (const auto& a : response.bucket_action()) {
        FUZZ_CHECK(a.has_quota_assignment_action(), "an assignment for every bucket");
        const auto& q = a.quota_assignment_action();
        const int64_t ttl = Ns(q.assignment_time_to_live());
        FUZZ_CHECK(ttl >= options.min_round.count() &&
                       ttl <= options.ttl_rounds * options.max_round.count(),
                   "ttl " + std::to_string(ttl));
        if (q.rate_limit_strategy().has_token_bucket()) {
          const auto& tb = q.rate_limit_strategy().token_bucket();
          FUZZ_CHECK(tb.max_tokens() >= 1 && tb.max_tokens() <= 60, "tokens within the burst");
          FUZZ_CHECK(tb.tokens_per_fill().value() == tb.max_tokens(), "fill = max");
          FUZZ_CHECK(Ns(tb.fill_interval()) >= options.min_round.count(), "fill interval");
        }
      }
    }
    clock.Advance(std::chrono::milliseconds(250 * (round + 1)));
  }
  uint64_t assigned = 0;
  for (const auto& c : quota.Counters()) assigned += c.assigned;
  // Each user's bucket: 60 to start, 60 a second after. At most 16 users a
  // stream (max_buckets), the same users on both streams.
  const uint64_t seconds_ceil = static_cast<uint64_t>((clock.Now() - start) / 1'000'000'000 + 1);
  FUZZ_CHECK(assigned <= 16 * (60 + 60 * seconds_ceil),
             "assigned " + std::to_string(assigned) + " beyond the buckets");
  for (uint64_t s : streams) quota.CloseStream(s);
  FUZZ_CHECK(quota.open_streams() == 0, "streams left open");
  for (const auto& c : quota.Counters()) FUZZ_CHECK(c.streams == 0, "reporters after close");
  return 0;
}
