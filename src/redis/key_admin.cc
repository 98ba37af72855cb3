#include "redis/key_admin.h"

#include <type_traits>

#include "redis/gcra_script.h"
#include "redis/node_client.h"

namespace tollgate::redis {
namespace {

Status UnexpectedReply(const Result<RedisReply>& reply, std::string_view what) {
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) {
    return Status(StatusCode::kServer, "redis: " + reply->str.substr(0, 200));
  }
  return Status(StatusCode::kScript, "redis: " + std::string(what) + " got a malformed reply");
}

}  // namespace

const std::string& OverwriteScript() {
  // Scripts replicate their effects: on Redis < 5 that must be asked for
  // before the first write (the script's own first line asks again, harmlessly).
  static const std::string script =
      "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
      "redis.call('DEL', KEYS[1])\n" +
      std::string(GcraScript());
  return script;
}

std::vector<std::string> ResetCommand(const std::string& state_key) { return {"DEL", state_key}; }

Status CheckResetReply(const Result<RedisReply>& reply) {
  if (reply.ok() && reply->type == RedisReply::Type::kInteger &&
      (reply->integer == 0 || reply->integer == 1)) {
    return Status::Ok();
  }
  return UnexpectedReply(reply, "DEL");
}

std::vector<std::string> OverwriteCommand(const std::string& state_key, const Limit& limit,
                                          int64_t cost, const RedisOptions& options) {
  const ScriptItem item = MakeScriptItem(limit, cost);
  std::vector<std::string> argv = {"EVAL", OverwriteScript(), "1", state_key};
  argv.push_back(options.use_client_clock ? std::to_string(options.clock->WallNow()) : "");
  argv.push_back("0");  // the key is declared in KEYS
  argv.push_back("1");  // one entry
  EmitEntryArgs(item, *options.clock, [&](const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int64_t>) {
      argv.push_back(std::to_string(v));
    } else {
      argv.push_back(std::string(v));
    }
  });
  std::string groups;  // one group of the one item, charged
  AppendMsgpackArrayHeader(groups, 1);
  AppendMsgpackInt(groups, 1 * kPackedItemBase + 1);
  argv.push_back(std::move(groups));
  return argv;
}

Result<Decision> DecodeOverwriteReply(const Result<RedisReply>& reply, const Limit& limit,
                                      int64_t cost) {
  std::vector<int64_t> v;
  const ScriptItem item = MakeScriptItem(limit, cost);
  if (!reply.ok() || reply->type != RedisReply::Type::kString ||
      !ParseMsgpackInts(reply->str, &v) || v.size() != 3 ||
      !ValidScriptTriple(item, v[0], v[1], v[2])) {
    return UnexpectedReply(reply, "the key's overwrite");
  }
  const int64_t code = v[0] & 7;
  if (code != 1) {
    return Status(StatusCode::kScript,
                  "redis: the key's overwrite was not applied (code " + std::to_string(code) + ")");
  }
  return DecodeDecision(limit, item, code, v[1] * 1'000'000'000 + v[2], v[0] >> 3);
}

}  // namespace tollgate::redis
