// Redis Cluster slot math and topology parsing (pure functions, no I/O).
//
// KeySlot() is CRC16-CCITT (XMODEM) mod 16384 of the key, or of the text
// between the first '{' and the next '}' when that text is non-empty (a hash
// tag), exactly as Redis computes it.
//
// A SlotMap maps every slot to a master endpoint "host:port" (or to nothing
// while the cluster has unassigned slots). It is parsed from CLUSTER SHARDS
// (Redis 7) or CLUSTER SLOTS (older) replies; replicas are recorded but never
// used for writes.
#ifndef TOLLGATE_SRC_REDIS_CLUSTER_SLOTS_H_
#define TOLLGATE_SRC_REDIS_CLUSTER_SLOTS_H_

#include <hiredis/hiredis.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/status.h"

namespace tollgate::redis {

inline constexpr int kClusterSlots = 16384;

uint16_t Crc16(std::string_view data);
int KeySlot(std::string_view key);

struct SlotMap {
  std::vector<std::string> masters;                // endpoints, "host:port"
  std::vector<std::vector<std::string>> replicas;  // per master
  std::array<int16_t, kClusterSlots> owner;        // index into masters, -1 = unassigned
  SlotMap() { owner.fill(-1); }
  int covered() const;
};

// The longest host name a topology reply or a redirection may name (a DNS name
// is at most 253 bytes).
inline constexpr size_t kMaxHostBytes = 255;
// A host as a topology or a redirection names it: 1 to kMaxHostBytes printable
// bytes without space, '/', '@' or ',' (a name, an IPv4 or a bracketless IPv6 address).
bool ValidHost(std::string_view host);

// Topology replies are type-checked throughout and bounded by the protocol:
// at most 16384 ranges (shards), every slot range within [0, 16383] with
// start <= end, every port in [1, 65535], every host ValidHost. A reply that
// breaks any of these is refused whole (kServer naming the entry and why),
// never partly applied.
//
// Parses a CLUSTER SHARDS reply (RESP2: arrays of flat key/value arrays).
// A node that does not know its own address (a lone node reports ip "") is
// given `asked_host`, the host the reply came from. `tls`: use a node's
// "tls-port" (present when the cluster runs with tls-cluster yes), else "port".
Result<SlotMap> ParseClusterShards(const redisReply* reply, const std::string& asked_host = "",
                                   bool tls = false);
// Parses a CLUSTER SLOTS reply.
Result<SlotMap> ParseClusterSlots(const redisReply* reply, const std::string& asked_host = "");

// Error replies after which the same call may succeed later (bounded retry
// with backoff): TRYAGAIN, CLUSTERDOWN, MASTERDOWN, LOADING, READONLY. None of
// them ran the script. READONLY means a demoted master: the map is stale.
bool RetryableClusterError(std::string_view error);

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": slot and endpoint.
// False unless the slot is in [0, 16383] and the endpoint is ValidHost:port.
bool ParseRedirect(std::string_view error, std::string_view kind, int* slot, std::string* endpoint);

}  // namespace tollgate::redis

#endif  // TOLLGATE_SRC_REDIS_CLUSTER_SLOTS_H_
