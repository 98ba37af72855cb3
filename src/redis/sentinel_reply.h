// Sentinel replies: the checks every answer of a sentinel (or of the server
// it names) passes before the store acts on it. A sentinel is a peer we do
// not trust: its replies are bounded by the ReplyReader (reply_reader.h),
// then type-checked here: an address must be an array of exactly two bulk
// strings, a host 1..253 bytes of [A-Za-z0-9.:_-], a port a decimal number
// 1..65535; anything else is a clear kServer error that quotes at most 64
// printable bytes of what came back (never a crash, never a hang).
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_REDIS_SENTINEL_REPLY_H_
#define TOLLGATE_SRC_REDIS_SENTINEL_REPLY_H_

#include <hiredis/hiredis.h>

#include <optional>
#include <string>
#include <string_view>

#include "tollgate/status.h"

namespace tollgate::redis {

struct MasterAddress {
  std::string host;
  int port = 0;
  std::string ToString() const;  // "host:port", "[v6]:port"
  bool operator==(const MasterAddress&) const = default;
};

// The reply to SENTINEL get-master-addr-by-name <master>: the address, or
// kServer: the sentinel does not know the master (a nil reply), an error
// reply, a wrong type or shape, a bad host or port.
Result<MasterAddress> ParseMasterAddrReply(const redisReply* reply, std::string_view master);

// The reply to ROLE: "master", "slave" (a replica) or "sentinel"; kServer
// for an error reply or any other shape.
Result<std::string> ParseRoleReply(const redisReply* reply);

// The confirmation of SUBSCRIBE +switch-master: ok, or kServer.
Status CheckSubscribeReply(const redisReply* reply);

// A pub/sub message on +switch-master ("<name> <old-ip> <old-port>
// <new-ip> <new-port>"): the new address when it names `master`, nullopt
// for another master's switch; kServer when the message is malformed.
Result<std::optional<MasterAddress>> ParseSwitchMaster(const redisReply* reply,
                                                       std::string_view master);

// Host and port as a sentinel may name them (see above).
bool ValidSentinelHost(std::string_view host);
bool ParsePort(std::string_view text, int* port);

// At most 64 bytes of untrusted text, non-printable bytes as '?'.
std::string Printable(std::string_view text);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_SENTINEL_REPLY_H_
