#include "redis/lease_script.h"

#include <algorithm>

#include "base/lease_id.h"

namespace tollgate::redis {
namespace {

// `now` in microseconds: ARGV[now_arg] when the caller passed its clock, else Redis TIME.
std::string ScriptWithNow(int now_arg, std::string_view body) {
  const std::string arg = "ARGV[" + std::to_string(now_arg) + "]";
  return "local now\nif " + arg + " then\n  now = tonumber(" + arg +
         ")\nelse\n  local t = redis.call('TIME')\n"
         "  now = tonumber(t[1]) * 1000000 + tonumber(t[2])\nend" +
         std::string(body);
}

// KEYS[1]: the lease set. ARGV: max_in_flight, lease_us, lease_id[, now_us].
// Returns {1, live after, 0} or {0, live, us until the soonest expiry}.
constexpr std::string_view kAcquireBody = R"lua(
local max = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local live = redis.call('ZCARD', KEYS[1])
if live >= max then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, live, tonumber(first[2]) - now}
end
if redis.call('ZADD', KEYS[1], 'NX', now + lease, ARGV[3]) == 0 then
  return redis.error_reply('duplicate lease id')
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.floor((tonumber(last[2]) - now) / 1000) + 1)
return {1, live + 1, 0}
)lua";

// KEYS[1]: the lease set. ARGV: lease_id[, now_us]. Returns 1 when the lease
// was live, 0 when unknown or already expired (removed either way).
constexpr std::string_view kReleaseBody = R"lua(
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expires then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(expires) > now then return 1 end
return 0
)lua";

const std::string& AcquireScript() {
  static const std::string script = ScriptWithNow(4, kAcquireBody);
  return script;
}

const std::string& ReleaseScript() {
  static const std::string script = ScriptWithNow(2, kReleaseBody);
  return script;
}

bool IsInteger(const RedisReply& r) { return r.type == RedisReply::Type::kInteger; }

std::optional<int64_t> ClientNowUs(const RedisOptions& options) {
  if (!options.use_client_clock) return std::nullopt;
  return options.clock->WallNow() / 1000;
}

}  // namespace

std::vector<std::string> AcquireLeaseArgv(const std::string& redis_key, const LeaseLimit& limit,
                                          const std::string& lease_id,
                                          std::optional<int64_t> now_us) {
  // Round the lease up to whole microseconds: never shorter than asked.
  const int64_t lease_us = (limit.lease_ns() + 999) / 1000;
  std::vector<std::string> argv{"EVAL",
                                AcquireScript(),
                                "1",
                                redis_key,
                                std::to_string(limit.max_in_flight()),
                                std::to_string(lease_us),
                                lease_id};
  if (now_us) argv.push_back(std::to_string(*now_us));
  return argv;
}

std::vector<std::string> ReleaseLeaseArgv(const std::string& redis_key, std::string_view lease_id,
                                          std::optional<int64_t> now_us) {
  std::vector<std::string> argv{"EVAL", ReleaseScript(), "1", redis_key, std::string(lease_id)};
  if (now_us) argv.push_back(std::to_string(*now_us));
  return argv;
}

Result<LeaseDecision> ParseAcquireLeaseReply(Result<RedisReply> reply, const LeaseLimit& limit,
                                             std::string lease_id) {
  if (!reply.ok()) return reply.status();
  if (reply->type == RedisReply::Type::kError) {
    return Status(StatusCode::kServer, reply->str.substr(0, 200));
  }
  if (reply->type != RedisReply::Type::kArray || reply->elements.size() != 3 ||
      !IsInteger(reply->elements[0]) || !IsInteger(reply->elements[1]) ||
      !IsInteger(reply->elements[2])) {
    return Status(StatusCode::kScript, "lease script: expected an array of 3 integers");
  }
  const int64_t allowed = reply->elements[0].integer;
  const int64_t live = reply->elements[1].integer;
  const int64_t wait_us = reply->elements[2].integer;
  if ((allowed != 0 && allowed != 1) || live < 0 || wait_us < 0) {
    return Status(StatusCode::kScript, "lease script: reply out of range");
  }
  LeaseDecision d;
  d.allowed = allowed == 1;
  d.limit = limit.max_in_flight();
  d.remaining = std::max<int64_t>(limit.max_in_flight() - live, 0);
  if (d.allowed) {
    d.expires_in = Nanos(limit.lease_ns());
    d.lease_id = std::move(lease_id);
  } else {
    // A clock that stepped back can make the wait look longer than a lease.
    d.retry_after = Nanos(std::min(wait_us, LeaseLimit::kMaxLeaseNs / 1000) * 1000);
  }
  return d;
}

void AcquireLease(const LeaseCommand& command, const std::string& redis_key,
                  const LeaseLimit& limit, const RedisOptions& options, Store::LeaseCallback done) {
  std::optional<std::string> drawn = RandomLeaseId();
  if (!drawn) {
    done(InternalError("lease: no random id (RAND_bytes failed)"));
    return;
  }
  std::string id = std::move(*drawn);
  auto argv = AcquireLeaseArgv(redis_key, limit, id, ClientNowUs(options));
  command(std::move(argv),
          [limit, id = std::move(id), done = std::move(done)](Result<RedisReply> reply) mutable {
            done(ParseAcquireLeaseReply(std::move(reply), limit, std::move(id)));
          });
}

void ReleaseLease(const LeaseCommand& command, const std::string& redis_key,
                  std::string_view lease_id, const RedisOptions& options,
                  Store::ReleaseCallback done) {
  if (!ValidLeaseId(lease_id)) {
    done(InvalidArgument("lease_id: must be 1 to 32 lowercase hex digits"));
    return;
  }
  command(ReleaseLeaseArgv(redis_key, lease_id, ClientNowUs(options)),
          [done = std::move(done)](Result<RedisReply> reply) {
            auto released = IntegerReply(std::move(reply));
            if (!released.ok()) {
              done(released.status());
              return;
            }
            done(*released == 1);
          });
}

}  // namespace tollgate::redis
