// Internal: tollgated's endpoint logic that does not touch the network.
//
// Front ends hold no rate-limit logic: these functions translate between
// HTTP/JSON and the Enforcer (policy layer) and render its CheckOutcome. They
// read a Runtime snapshot (server/runtime.h); server/endpoints.h adapts them
// to the session's handler table.
#ifndef TOLLGATE_SERVER_HANDLERS_H_
#define TOLLGATE_SERVER_HANDLERS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_util.h"
#include "server/runtime.h"
#include "tollgate/policy.h"

namespace tollgate::server {

// A request described in JSON (POST /v1/decide) or in a query (GET /v1/explain),
// owning the strings a RequestView points to.
struct DescribedRequest {
  std::string method = "GET";
  std::string path = "/";
  std::string query;
  std::string client_ip = "127.0.0.1";
  std::vector<std::pair<std::string, std::string>> header_storage;
  std::vector<HeaderPair> headers;
  RequestView View();  // valid while this object lives and is not modified
};

// The parsed body of POST /v1/decide: either a request or explicit items.
struct DecideInput {
  std::optional<DescribedRequest> request;
  std::vector<std::string> item_storage;  // rule and key strings the items point to
  std::vector<std::vector<std::optional<std::string>>> value_storage;  // items' "values"
  std::vector<ExplicitItem> items;
  bool has_limits = false;  // an item carries its own "limit" (needs the admin token)
};
// Returns errors (with JSON paths) when the body is not a valid decide request.
std::vector<ConfigError> ParseDecideBody(std::string_view body, DecideInput* out);
// Enforcer::CheckItems' refusal ("items[i]: <field>: <why>") as a problem's
// errors: the path names the item's field (items[0].values[2]) when the
// message does, else the item.
std::vector<ConfigError> ItemErrors(std::string_view message);

// The body of /v1/release: {"leases": ["<lease token>", ...]}, at most
// kMaxReleaseLeases tokens, each checked by Enforcer::ParseLeaseToken.
inline constexpr size_t kMaxReleaseLeases = 64;
std::vector<ConfigError> ParseReleaseBody(std::string_view body, const Enforcer& enforcer,
                                          std::vector<HeldLease>* out);

// {"released": n, "not_held": m}: leases that were live, and the others
// (expired, released already, or never granted).
Response RenderRelease(int64_t released, int64_t not_held);

// The JSON answer of /v1/decide: decision, per-rule state, headers to send.
Response RenderDecision(const CheckOutcome& outcome);

// The response a gateway or any direct caller gets for a not-allowed outcome.
Response RejectionResponse(const CheckOutcome& outcome);

Response HandleHealthz(const Runtime& s);
// {"ready", "draining"}; with `detail` (the admin listener) also the policy's
// version and source, the store and its health, the failure mode and the
// rolled-back rules, which the public listener does not show.
Response HandleReadyz(const Runtime& s, bool detail);
Response HandleMetrics(const Runtime& s);

// Admin.
Response HandleReload(const Runtime& s);
// GET /v1/policy: the running policy (rules, text, version, source, last
// reload). PUT /v1/policy: `body` is a policy document, validated like a file
// reload; with ?dry_run=1 the answer lists what would change and nothing is
// applied, else it is written back to the source and applied
// (ServerState::put_policy), audit-logged with `actor`. policy_api.cc.
Response HandlePolicy(const Runtime& s);
Response HandlePolicyPut(const Runtime& s, std::string_view body, std::string_view query,
                         std::string_view actor);
// A JSON body (one line, invalid UTF-8 replaced) with Content-Type JSON.
Response JsonResponse(int status, const nlohmann::json& j);
// `may_show_raw`: MayShowRaw of the request (server/endpoints.h).
Response HandleTop(const Runtime& s, std::string_view query, bool may_show_raw);
// Parses ?method=&path=&query=&header=name:value&ip= into a request.
std::vector<ConfigError> ParseExplainQuery(std::string_view query, DescribedRequest* out);
// Identities (rule keys, addresses, header values, the trace's keys) are shown
// through `ids`: hashed unless it is raw or `raw` (?raw=1) asks for them.
Response RenderExplain(const CheckOutcome& outcome, const DescribedRequest& request,
                       std::string_view client_ip, const IdentityRedactor& ids, bool raw);
// Whether an admin query asks for raw identities (raw=1 or raw=true), and the
// 403 when it does on an admin listener without a token.
bool RawRequested(std::string_view query);
Response RawNeedsToken();

// One "shadow_rejected" line for a shadow rule's would-be rejection, when the
// shadow gate admits it: rule, why it is shadow, the key (redacted as every
// log's), limit, cost, remaining, the Retry-After a 429 would have carried,
// the request, and how many such lines the gate suppressed since the last one.
void LogShadowRejection(const Runtime& s, const RuleOutcome& r, int64_t now_ns,
                        const RequestView* request, std::string_view trace_id);

// Counts the outcome, feeds /v1/top and emits (gated) rejection and shadow
// rejection log lines.
void RecordOutcome(const Runtime& s, ServerMetrics::Shard& shard, const CheckOutcome& outcome,
                   int64_t elapsed_ns, const RequestView* request, std::string_view trace_id);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_HANDLERS_H_
