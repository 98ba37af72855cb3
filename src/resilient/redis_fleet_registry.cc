// RedisFleetRegistry: instances register in one Redis sorted set, scored by
// Redis TIME in ms; the live count is the members seen within the TTL.
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

std::string DefaultInstanceId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ":%d:%08x", static_cast<int>(getpid()), rd());
  return std::string(host) + suffix;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;
struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

timeval ToTimeval(Nanos d) {
  const int64_t us = std::max<int64_t>(1000, d.count() / 1000);
  return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

class RedisFleetRegistry final : public FleetRegistry {
 public:
  explicit RedisFleetRegistry(RedisFleetOptions o) : options_(std::move(o)) {
    if (options_.instance_id.empty()) options_.instance_id = DefaultInstanceId();
    host_ = options_.host;
    port_ = options_.port;
  }

  ~RedisFleetRegistry() override {
    // Best effort: leave the fleet now rather than after the TTL.
    if (context_ != nullptr) {
      ReplyPtr r(Command({"ZREM", options_.key, options_.instance_id}));
    }
  }

  Result<int64_t> Heartbeat() override {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (context_ == nullptr) {
        Status s = Connect();
        if (!s.ok()) return s;
      }
      const std::string ttl_ms =
          std::to_string(std::max<int64_t>(1, options_.ttl.count() / 1'000'000));
      ReplyPtr reply(
          Command({"EVAL", kHeartbeatScript, "1", options_.key, options_.instance_id, ttl_ms}));
      if (reply == nullptr) {
        const bool timeout = context_ != nullptr && context_->err == REDIS_ERR_IO;
        std::string why = context_ != nullptr ? context_->errstr : "no context";
        context_.reset();  // reconnect next time
        return Status(timeout ? StatusCode::kTimeout : StatusCode::kConnection,
                      "fleet heartbeat: " + why);
      }
      if (reply->type == REDIS_REPLY_INTEGER) return static_cast<int64_t>(reply->integer);
      if (reply->type == REDIS_REPLY_ERROR) {
        std::string err(reply->str, reply->len);
        if (attempt == 0 && FollowMoved(err)) continue;
        return Status(StatusCode::kServer, "fleet heartbeat: " + err.substr(0, 200));
      }
      return Status(StatusCode::kServer, "fleet heartbeat: unexpected reply type");
    }
    return Status(StatusCode::kServer, "fleet heartbeat: redirected twice");
  }

 private:
  Status Connect() {
    ContextPtr c(redisConnectWithTimeout(host_.c_str(), port_, ToTimeval(options_.timeout)));
    if (c == nullptr) return ConnectionError("fleet: cannot allocate a redis context");
    if (c->err) return ConnectionError(std::string("fleet: connect: ") + c->errstr);
    if (redisSetTimeout(c.get(), ToTimeval(options_.timeout)) != REDIS_OK)
      return ConnectionError("fleet: cannot set the command timeout");
    context_ = std::move(c);
    if (!options_.password.empty()) {
      ReplyPtr r(options_.username.empty()
                     ? Command({"AUTH", options_.password})
                     : Command({"AUTH", options_.username, options_.password}));
      if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
        context_.reset();
        return ConnectionError("fleet: AUTH failed");
      }
    }
    if (options_.db != 0) {
      ReplyPtr r(Command({"SELECT", std::to_string(options_.db)}));
      if (r == nullptr || r->type == REDIS_REPLY_ERROR) {
        context_.reset();
        return ConnectionError("fleet: SELECT failed");
      }
    }
    return Status::Ok();
  }

  // "MOVED <slot> <host>:<port>": reconnect there (an empty host means the same host).
  bool FollowMoved(const std::string& err) {
    std::string host;
    int port = 0;
    if (!ParseMovedTarget(err, &host, &port)) return false;
    if (!host.empty()) host_ = std::move(host);
    port_ = port;
    context_.reset();
    return true;
  }

  redisReply* Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
  }

  RedisFleetOptions options_;
  std::string host_;
  int port_;
  ContextPtr context_;  // used only from the thread calling Heartbeat (see FleetRegistry)
};

// The same registry over a caller's command function (e.g. the store's own
// connections): no connection, AUTH or redirection of its own.
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

bool ParseMovedTarget(std::string_view error, std::string* host, int* port) {
  if (!error.starts_with("MOVED ")) return false;
  const size_t sp = error.rfind(' ');
  const size_t colon = error.rfind(':');
  if (colon == std::string_view::npos || colon < sp) return false;
  int p = 0;
  const char* end = error.data() + error.size();
  const auto [last, ec] = std::from_chars(error.data() + colon + 1, end, p);
  if (ec != std::errc() || last != end || p <= 0 || p > 65535) return false;
  *host = std::string(error.substr(sp + 1, colon - sp - 1));
  *port = p;
  return true;
}

Result<std::unique_ptr<FleetRegistry>> CreateRedisFleetRegistry(RedisFleetOptions options,
                                                                FleetCommand command) {
  if (!command) return InvalidArgument("fleet: no command function");
  if (Status s = ValidateFleet(options); !s.ok()) return s;
  return std::unique_ptr<FleetRegistry>(
      new CommandFleetRegistry(std::move(options), std::move(command)));
}

Result<std::unique_ptr<FleetRegistry>> CreateRedisFleetRegistry(RedisFleetOptions options) {
  if (options.host.empty()) return InvalidArgument("fleet.host: must not be empty");
  if (options.port <= 0 || options.port > 65535) return InvalidArgument("fleet.port: out of range");
  if (Status s = ValidateFleet(options); !s.ok()) return s;
  if (options.timeout <= Nanos(0)) return InvalidArgument("fleet.timeout: must be positive");
  // Connecting is lazy: the registry works with a Redis that starts later.
  return std::unique_ptr<FleetRegistry>(new RedisFleetRegistry(std::move(options)));
}

Status ParseFleetUrl(std::string_view url, RedisFleetOptions* options) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return InvalidArgument("fleet url: must start with redis://");
  std::string_view rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('?'));  // store options (prefix, timeouts) are not ours
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      options->password = std::string(userinfo);
    } else {
      options->username = std::string(userinfo.substr(0, colon));
      options->password = std::string(userinfo.substr(colon + 1));
    }
    authority = authority.substr(at + 1);
  }
  const size_t colon = authority.rfind(':');
  std::string_view host = authority.substr(0, colon);
  if (host.empty()) return InvalidArgument("fleet url: missing host");
  options->host = std::string(host);
  if (colon != std::string_view::npos) {
    std::string_view p = authority.substr(colon + 1);
    int port = 0;
    if (std::from_chars(p.data(), p.data() + p.size(), port).ec != std::errc() || port <= 0 ||
        port > 65535)
      return InvalidArgument("fleet url: bad port");
    options->port = port;
  }
  if (slash != std::string_view::npos && slash + 1 < rest.size()) {
    std::string_view d = rest.substr(slash + 1);
    int db = 0;
    if (std::from_chars(d.data(), d.data() + d.size(), db).ec != std::errc() || db < 0)
      return InvalidArgument("fleet url: bad db");
    options->db = db;
  }
  return Status::Ok();
}

}  // namespace tollgate
