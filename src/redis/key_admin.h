// Key administration on Redis (Store::ResetKey / SetRemaining), as plain
// commands that RedisStore and RedisClusterStore send through their command
// path (the cluster's routes by the key's hash tag and follows redirections).
//
// Reset is a DEL of the key's state key. Set is one EVAL of the batch script
// (gcra_script.h) prefixed with a DEL of its one declared key, charging
// burst - remaining: the key is forgotten and charged in one script, so no
// decision lands in between, and the state written (and its TTL) is exactly
// what a decision would have written, on Redis' clock (or the client's, with
// use_client_clock). Replies are type-checked: anything but what the command
// can answer is kScript / kServer, never a decision.
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_REDIS_KEY_ADMIN_H_
#define TOLLGATE_SRC_REDIS_KEY_ADMIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tollgate/decision.h"
#include "tollgate/limit.h"
#include "tollgate/redis_store.h"
#include "tollgate/status.h"

namespace tollgate::redis {

// The batch script with "DEL KEYS[1]" run first.
const std::string& OverwriteScript();

// {"DEL", state_key}.
std::vector<std::string> ResetCommand(const std::string& state_key);
// ok for an integer reply (0: there was nothing to forget, 1: forgotten).
Status CheckResetReply(const Result<RedisReply>& reply);

// EVAL OverwriteScript() 1 state_key <now> 0 1 <entry of limit, cost> <group>.
// `limit` must pass CheckScriptLimit; 0 <= cost <= limit.burst().
std::vector<std::string> OverwriteCommand(const std::string& state_key, const Limit& limit,
                                          int64_t cost, const RedisOptions& options);
// The key's state after an OverwriteCommand: one valid triple that says the
// charge was made (or, for cost 0, the peek of the fresh key).
Result<Decision> DecodeOverwriteReply(const Result<RedisReply>& reply, const Limit& limit,
                                      int64_t cost);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_KEY_ADMIN_H_
