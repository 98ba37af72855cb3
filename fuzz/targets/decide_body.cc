// Fuzz target: the body of POST /v1/decide (server/handlers.cc
// ParseDecideBody), then the decision it asks for against
// fuzz/policies/request.json and the rendered answer.
//
// Input: the JSON body (the session bounds it by max_body_bytes, 64 KiB).
// Properties: a body is either refused with errors (rendered as one
// well-framed problem response) or decided; a decided request or item list
// holds CheckOutcome's invariants, and its answer is one well-framed message.
#include <cstdint>
#include <string_view>

#include "fuzz_enforcer.h"
#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/handlers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  tollgate::server::DecideInput input;
  const auto errors = tollgate::server::ParseDecideBody(body, &input);
  if (!errors.empty()) {
    for (const auto& e : errors) FUZZ_CHECK(!e.message.empty(), "an error without a message");
    tollgate::fuzz::CheckSerialized(
        tollgate::server::Problem(400, "Invalid decision request", "see errors", errors), true,
        false);
    return 0;
  }
  FUZZ_CHECK(input.request.has_value() != !input.items.empty(),
             "neither (or both) a request and items without an error");
  auto env = tollgate::fuzz::FreshEnforcer();
  if (input.request) {
    const tollgate::RequestView view = input.request->View();
    const tollgate::CheckOutcome outcome = env->enforcer->Check(view);
    tollgate::fuzz::CheckOutcome(outcome);
    tollgate::fuzz::CheckSerialized(tollgate::server::RenderDecision(outcome), true, false);
    return 0;
  }
  const auto outcome = env->enforcer->CheckItems(input.items);
  if (!outcome.ok()) {
    const std::string m = outcome.status().message();
    const auto errors = tollgate::server::ItemErrors(m);
    FUZZ_CHECK(
        errors.size() == 1 && errors[0].path.starts_with("items") && !errors[0].message.empty(),
        "a refusal's error names no item");
    tollgate::fuzz::CheckSerialized(
        tollgate::server::Problem(400, "Invalid decision request", m, errors), true, false);
    return 0;
  }
  tollgate::fuzz::CheckOutcome(*outcome);
  tollgate::fuzz::CheckSerialized(tollgate::server::RenderDecision(*outcome), true, false);
  return 0;
}
