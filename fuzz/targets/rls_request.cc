// Fuzz target: an Envoy ShouldRateLimit request (the gRPC message body, bytes
// from the Envoy side) decided by the RlsDecider (src/rls/rls_decider.cc)
// against the example configs in examples/envoy/ratelimit/.
//
// Input: a serialized envoy.service.ratelimit.v3.RateLimitRequest.
// Properties: the decider answers Ok or kInvalidArgument (never a crash,
// never kUnavailable on a local store); an Ok answer has one status per
// descriptor, and an overall OVER_LIMIT only with a descriptor OVER_LIMIT
// (shadow-mode descriptors may be over without the answer being so).
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_enforcer.h"
#include "fuzz_input.h"
#include "rls/rls_decider.h"
#include "rls/rls_yaml.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"

namespace {

std::shared_ptr<const tollgate::rls::RlsConfig> ExampleConfig() {
  static const std::shared_ptr<const tollgate::rls::RlsConfig> config = [] {
    tollgate::rls::RlsCompileOptions options;
    options.merge_domains = true;
    auto parsed = tollgate::rls::LoadRlsConfigFiles(
        {tollgate::fuzz::SourcePath("examples/envoy/ratelimit")}, options);
    FUZZ_CHECK(parsed.config != nullptr,
               "examples/envoy/ratelimit: " +
                   (parsed.errors.empty() ? std::string() : parsed.errors[0].ToString()));
    return parsed.config;
  }();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rlspb = tollgate::rls::rlspb;
  rlspb::RateLimitRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;

  tollgate::ManualClock clock;
  const auto store = tollgate::fuzz::SmallStore(&clock);
  tollgate::rls::RlsDecideOptions options;
  if (size % 2) options.header_styles = {tollgate::HeaderStyle::kDraft11};
  // The decider makes no Enforcer: one over an empty policy (every Envoy item names its rule).
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": []})", &clock);
  FUZZ_CHECK(policies.ok(), "empty policy: " + policies.status().ToString());
  auto enforcer = tollgate::Enforcer::Create(*policies, store.get(), &clock);
  FUZZ_CHECK(enforcer.ok(), "enforcer: " + enforcer.status().ToString());
  auto made =
      tollgate::rls::RlsDecider::Standalone(enforcer->get(), ExampleConfig(), &clock, options);
  FUZZ_CHECK(made.ok(), "decider: " + made.status().ToString());
  tollgate::rls::RlsDecider& decider = **made;

  for (int round = 0; round < 2; ++round) {
    rlspb::RateLimitResponse response;
    const tollgate::Status st = decider.DecideSync(request, &response);
    FUZZ_CHECK(st.ok() || st.code() == tollgate::StatusCode::kInvalidArgument,
               "unexpected status " + st.ToString());
    if (!st.ok()) return 0;
    FUZZ_CHECK(response.statuses_size() == request.descriptors_size(),
               "statuses " + std::to_string(response.statuses_size()) + " for " +
                   std::to_string(request.descriptors_size()) + " descriptors");
    bool any_over = false;
    for (const auto& s : response.statuses()) {
      any_over = any_over || s.code() == rlspb::RateLimitResponse::OVER_LIMIT;
    }
    if (response.overall_code() == rlspb::RateLimitResponse::OVER_LIMIT) {
      FUZZ_CHECK(any_over, "OVER_LIMIT overall without an OVER_LIMIT descriptor");
    }
  }
  return 0;
}
