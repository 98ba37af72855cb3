// Fuzz target: the query strings of the admin listener's endpoints, which an
// operator's tool (or anything that reaches the listener) writes:
// ForEachQueryParam (tollgate/http_text.h, percent-decoding), the rollback
// actions' ?rule=NAME&reason=TEXT (server/rollback_admin.h
// ParseRollbackQuery), /v1/explain's query (server/handlers.h
// ParseExplainQuery) and ?raw=1 (RawRequested).
//
// Input: the query, without '?' (the session bounds it by max_header_bytes).
// Properties:
//   - ForEachQueryParam calls back at most once per '&'-separated part, with
//     a decoded name and value no longer than the part;
//   - a rollback query is refused with 1 to kMaxRollbackQueryErrors errors,
//     each with a message, rendered as one well-framed problem response; or
//     it names exactly one rule that is a policy name (base/names.h), and a
//     reason (a trip only) of at most kMaxRollbackReason bytes;
//   - an explain query that parses names a path starting with '/'.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/names.h"
#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/handlers.h"
#include "server/rollback_admin.h"

namespace {

using tollgate::fuzz::Quote;
namespace server = tollgate::server;

void CheckParams(std::string_view query) {
  const size_t parts = static_cast<size_t>(std::count(query.begin(), query.end(), '&')) + 1;
  size_t calls = 0;
  tollgate::ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    ++calls;
    FUZZ_CHECK(name.size() + value.size() <= query.size(),
               "a decoded parameter longer than the query " + Quote(query));
  });
  FUZZ_CHECK(calls <= parts, "more parameters than parts in " + Quote(query));
}

void CheckRollback(std::string_view query, bool trip) {
  server::RollbackQuery q;
  const auto errors = server::ParseRollbackQuery(query, trip, &q);
  FUZZ_CHECK(errors.size() <= server::kMaxRollbackQueryErrors, "errors beyond the bound");
  if (!errors.empty()) {
    for (const auto& e : errors) {
      FUZZ_CHECK(!e.message.empty(), "an error without a message");
      FUZZ_CHECK(e.path.size() <= 1024, "an error path of " + std::to_string(e.path.size()));
    }
    tollgate::fuzz::CheckSerialized(server::Problem(400, "Bad query", "", errors), true, false);
    return;
  }
  FUZZ_CHECK(tollgate::base::IsPolicyName(q.rule), "not a rule name: " + Quote(q.rule));
  FUZZ_CHECK(q.reason.size() <= server::kMaxRollbackReason, "a reason over the bound");
  FUZZ_CHECK(trip || q.reason.empty(), "a reason for a clear");
}

void CheckExplain(std::string_view query) {
  server::DescribedRequest d;
  const auto errors = server::ParseExplainQuery(query, &d);
  (void)server::RawRequested(query);
  if (!errors.empty()) {
    for (const auto& e : errors) FUZZ_CHECK(!e.message.empty(), "an error without a message");
    return;
  }
  FUZZ_CHECK(!d.path.empty() && d.path.front() == '/', "a path without '/': " + Quote(d.path));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view query(reinterpret_cast<const char*>(data), size);
  CheckParams(query);
  CheckRollback(query, true);
  CheckRollback(query, false);
  CheckExplain(query);
  return 0;
}
