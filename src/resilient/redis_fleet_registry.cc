// The fleet registry: instances register in one Redis sorted set, scored by
// Redis TIME in ms; the live count is the members seen within the TTL. It owns
// no connection: its commands go through a store's command function (the
// Redis stores' Command, see src/runtime), so connections, AUTH, TLS, db and
// cluster redirections are the store's (src/redis).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/instance_id.h"
#include "tollgate/resilient_store.h"

namespace tollgate {
namespace {

// Registers ARGV[1] at the server's time and returns the members seen within
// ARGV[2] ms. One script, so the three steps happen atomically.
constexpr const char* kHeartbeatScript =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl = tonumber(ARGV[2])\n"
    "redis.call('ZADD', KEYS[1], now, ARGV[1])\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)\n"
    "redis.call('PEXPIRE', KEYS[1], ttl * 2)\n"
    "return redis.call('ZCARD', KEYS[1])\n";

constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxKeyBytes = 512;

class CommandFleetRegistry final : public FleetRegistry {
 public:
  CommandFleetRegistry(RedisFleetOptions o, FleetCommand command)
      : options_(std::move(o)), command_(std::move(command)) {
    if (options_.instance_id.empty()) options_.instance_id = DefaultInstanceId();
  }

  ~CommandFleetRegistry() override {
    // Best effort, and only once registered: leave the fleet now rather than after the TTL.
    if (registered_) (void)command_({"ZREM", options_.key, options_.instance_id});
  }

  Result<int64_t> Heartbeat() override {
    const std::string ttl_ms =
        std::to_string(std::max<int64_t>(1, options_.ttl.count() / 1'000'000));
    Result<int64_t> n =
        command_({"EVAL", kHeartbeatScript, "1", options_.key, options_.instance_id, ttl_ms});
    if (!n.ok()) return Status(n.status().code(), "fleet heartbeat: " + n.status().message());
    registered_ = true;
    return n;
  }

 private:
  RedisFleetOptions options_;
  FleetCommand command_;
  bool registered_ = false;  // used only from the thread calling Heartbeat (see FleetRegistry)
};

Status ValidateFleet(const RedisFleetOptions& options) {
  if (options.key.empty() || options.key.size() > kMaxKeyBytes)
    return InvalidArgument("fleet.key: must be 1..512 bytes");
  if (options.instance_id.size() > kMaxIdBytes)
    return InvalidArgument("fleet.instance_id: at most 256 bytes");
  if (options.ttl < std::chrono::milliseconds(10))
    return InvalidArgument("fleet.ttl: must be at least 10ms");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<FleetRegistry>> CreateRedisFleetRegistry(RedisFleetOptions options,
                                                                FleetCommand command) {
  if (!command) return InvalidArgument("fleet: no command function");
  if (Status s = ValidateFleet(options); !s.ok()) return s;
  return std::unique_ptr<FleetRegistry>(
      new CommandFleetRegistry(std::move(options), std::move(command)));
}

}  // namespace tollgate
