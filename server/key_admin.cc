#include "server/key_admin.h"

#include <nlohmann/json.hpp>

#include "server/handlers.h"
#include "tollgate/key_admin.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

int HttpStatusOf(const Status& st) { return st.code() == StatusCode::kInvalidArgument ? 400 : 503; }

// Logs and counts one action; `fields` carries what is known of it.
void Audit(const Runtime& rt, KeyAction action, bool ok, json fields) {
  if (rt.metrics != nullptr) {
    rt.metrics->key_actions[size_t(action)][ok ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
  }
  fields["action"] = KeyActionName(action);
  fields["result"] = ok ? "ok" : "error";
  if (rt.log != nullptr) rt.log->Info("key_admin", std::move(fields));
}

// The problem that answers a failed action.
Response ProblemOf(const KeyAdminResult& result, const KeyRequest& req) {
  switch (result.outcome) {
    case KeyAdminResult::Outcome::kUnknownRule:
      return Problem(404, "No such rule",
                     "the running policy has no rule named '" + Logger::Client(req.rule) + "'");
    case KeyAdminResult::Outcome::kStoreFailed:
      return Problem(HttpStatusOf(result.status), "Store failed", result.status.ToString());
    default:
      return Problem(400, "Invalid key request", "see errors", result.errors);
  }
}

Response KeyAdmin(const Request& request, const Runtime& rt, KeyAction action) {
  const AdminToken* caller = CallerToken(request.view, rt);
  json audit = {{"actor", std::string(request.view.peer_address)},
                {"token", caller ? json(caller->name) : json(nullptr)}};
  // Every refusal and failure is logged and counted like a success.
  auto fail = [&](Response r, const std::string& why) {
    audit["error"] = why;
    Audit(rt, action, false, std::move(audit));
    return r;
  };
  KeyRequest req;
  std::vector<ConfigError> errors = ParseKeyRequest(request.body, action, &req);
  if (!req.rule.empty()) audit["rule"] = Logger::Client(req.rule);
  if (!errors.empty()) {
    return fail(Problem(400, "Invalid key request", "see errors", errors), "invalid request");
  }
  if (req.raw && !MayShowRaw(request.view, rt)) {
    return fail(RawNeedsToken(), "raw without a write-scoped token");
  }
  const KeyAdminResult result = AdministerKey(*rt.engine, action, req);
  if (result.key) audit["key"] = rt.identities.ShowInLog(result.key->identity);
  if (result.before) audit["before"] = KeyStateJson(*result.before);
  if (result.outcome != KeyAdminResult::Outcome::kOk) {
    return fail(ProblemOf(result, req), result.why);
  }
  if (result.after) audit["after"] = KeyStateJson(*result.after);
  Audit(rt, action, true, std::move(audit));
  return JsonResponse(
      200, KeyAdminAnswer(result, action, rt.identities.Show(result.key->identity, req.raw)));
}

}  // namespace

// The store calls wait on the admin executor, never on the worker.
boost::asio::awaitable<Response> KeyGet(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor,
                               [&] { return KeyAdmin(request, rt, KeyAction::kGet); });
}
boost::asio::awaitable<Response> KeyReset(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor,
                               [&] { return KeyAdmin(request, rt, KeyAction::kReset); });
}
boost::asio::awaitable<Response> KeySet(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor,
                               [&] { return KeyAdmin(request, rt, KeyAction::kSet); });
}

}  // namespace tollgate::server
