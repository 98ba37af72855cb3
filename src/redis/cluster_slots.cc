#include "redis/cluster_slots.h"

#include <charconv>
#include <unordered_map>
#include <utility>

namespace tollgate::redis {

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

int KeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

int SlotMap::covered() const {
  int n = 0;
  for (int16_t o : owner) n += o >= 0 ? 1 : 0;
  return n;
}

namespace {

std::string_view Str(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return std::string_view(r->str, r->len);
}

// An element of an array reply, or null when `r` is not an array that long.
const redisReply* At(const redisReply* r, size_t i) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || i >= r->elements) return nullptr;
  return r->element[i];
}

// A flat RESP2 map: key, value, key, value...
const redisReply* Field(const redisReply* map, std::string_view name) {
  if (map == nullptr || map->type != REDIS_REPLY_ARRAY) return nullptr;
  for (size_t i = 0; i + 1 < map->elements; i += 2) {
    if (Str(map->element[i]) == name) return map->element[i + 1];
  }
  return nullptr;
}

// Where a malformed topology reply went wrong: "CLUSTER SLOTS: range 3: ...".
Status Malformed(std::string_view reply, const std::string& where, std::string_view why) {
  return Status(StatusCode::kServer,
                std::string(reply) + ": " + where + ": " + std::string(why) + " (reply ignored)");
}

// A slot range [lo, hi] as two integer replies, within [0, 16383], lo <= hi.
bool SlotRange(const redisReply* lo, const redisReply* hi, int* first, int* last,
               std::string* why) {
  if (lo == nullptr || hi == nullptr || lo->type != REDIS_REPLY_INTEGER ||
      hi->type != REDIS_REPLY_INTEGER) {
    *why = "slot range is not two integers";
    return false;
  }
  if (lo->integer < 0 || hi->integer < lo->integer || hi->integer >= kClusterSlots) {
    *why = "slot range " + std::to_string(lo->integer) + "-" + std::to_string(hi->integer) +
           " is not within 0-" + std::to_string(kClusterSlots - 1);
    return false;
  }
  *first = static_cast<int>(lo->integer);
  *last = static_cast<int>(hi->integer);
  return true;
}

// A node's "host:port": the host as the reply gives it (a string, or nil or ""
// for "the node you asked"), the port an integer in [1, 65535].
bool NodeEndpoint(const redisReply* host, const redisReply* port, const std::string& asked_host,
                  std::string* endpoint, std::string* why) {
  std::string_view h;
  if (host != nullptr && host->type != REDIS_REPLY_NIL) {
    if (host->type != REDIS_REPLY_STRING && host->type != REDIS_REPLY_STATUS) {
      *why = "host is not a string";
      return false;
    }
    h = Str(host);
  }
  if (h.empty()) h = asked_host;
  if (!ValidHost(h)) {
    *why = "host is not a host name or address";
    return false;
  }
  if (port == nullptr || port->type != REDIS_REPLY_INTEGER || port->integer < 1 ||
      port->integer > 65535) {
    *why = "port is not an integer in 1-65535";
    return false;
  }
  *endpoint = std::string(h) + ":" + std::to_string(port->integer);
  return true;
}

// Masters by endpoint, in first-seen order.
class Masters {
 public:
  explicit Masters(SlotMap* map) : map_(map) {}
  int Index(const std::string& endpoint) {
    auto [it, added] = index_.try_emplace(endpoint, static_cast<int>(map_->masters.size()));
    if (added) {
      map_->masters.push_back(endpoint);
      map_->replicas.emplace_back();
    }
    return it->second;
  }

 private:
  SlotMap* map_;
  std::unordered_map<std::string, int> index_;
};

}  // namespace

bool ValidHost(std::string_view host) {
  if (host.empty() || host.size() > kMaxHostBytes) return false;
  for (unsigned char c : host) {
    if (c <= 0x20 || c >= 0x7f || c == '/' || c == '@' || c == ',') return false;
  }
  return true;
}

Result<SlotMap> ParseClusterShards(const redisReply* reply, const std::string& asked_host,
                                   bool tls) {
  constexpr std::string_view kReply = "CLUSTER SHARDS";
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return Status(StatusCode::kServer, "CLUSTER SHARDS: not an array");
  }
  // A shard with slots owns at least one: more shards than slots is not a topology.
  if (reply->elements > static_cast<size_t>(kClusterSlots)) {
    return Malformed(kReply, std::to_string(reply->elements) + " shards",
                     "more than " + std::to_string(kClusterSlots));
  }
  SlotMap map;
  Masters masters(&map);
  std::string why;
  for (size_t s = 0; s < reply->elements; ++s) {
    const std::string where = "shard " + std::to_string(s);
    const redisReply* shard = reply->element[s];
    if (shard == nullptr || shard->type != REDIS_REPLY_ARRAY) {
      return Malformed(kReply, where, "not a map");
    }
    const redisReply* slots = Field(shard, "slots");
    const redisReply* nodes = Field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || slots->type != REDIS_REPLY_ARRAY ||
        nodes->type != REDIS_REPLY_ARRAY) {
      return Malformed(kReply, where, "no slots and nodes arrays");
    }
    if (slots->elements % 2 != 0 || slots->elements > 2 * static_cast<size_t>(kClusterSlots)) {
      return Malformed(kReply, where,
                       std::to_string(slots->elements) + " slot bounds (pairs, at most " +
                           std::to_string(kClusterSlots) + ")");
    }
    std::string master;
    std::vector<std::string> replicas;
    for (size_t n = 0; n < nodes->elements; ++n) {
      const redisReply* node = nodes->element[n];
      const std::string node_where = where + " node " + std::to_string(n);
      if (node == nullptr || node->type != REDIS_REPLY_ARRAY) {
        return Malformed(kReply, node_where, "not a map");
      }
      const redisReply* host = Field(node, "ip");
      if (Str(host).empty()) host = Field(node, "endpoint");
      const redisReply* port = tls ? Field(node, "tls-port") : nullptr;
      if (port == nullptr) port = Field(node, "port");
      // A node without a port for our transport (a TLS-only node seen by a
      // plain client, or the reverse) cannot be reached: not an error.
      if (port == nullptr) continue;
      std::string endpoint;
      if (!NodeEndpoint(host, port, asked_host, &endpoint, &why)) {
        return Malformed(kReply, node_where, why);
      }
      const std::string_view role = Str(Field(node, "role"));
      const std::string_view health = Str(Field(node, "health"));
      if (role == "master") {
        if (health != "fail") master = endpoint;
      } else if (health == "online") {
        replicas.push_back(endpoint);
      }
    }
    std::vector<std::pair<int, int>> ranges;
    for (size_t i = 0; i < slots->elements; i += 2) {
      int first = 0, last = 0;
      if (!SlotRange(slots->element[i], slots->element[i + 1], &first, &last, &why)) {
        return Malformed(kReply, where, why);
      }
      ranges.emplace_back(first, last);
    }
    // A shard whose master failed (or that has none yet) leaves its slots unassigned.
    if (master.empty()) continue;
    const int idx = masters.Index(master);
    map.replicas[static_cast<size_t>(idx)] = std::move(replicas);
    for (const auto& [first, last] : ranges) {
      for (int x = first; x <= last; ++x)
        map.owner[static_cast<size_t>(x)] = static_cast<int16_t>(idx);
    }
  }
  return map;
}

Result<SlotMap> ParseClusterSlots(const redisReply* reply, const std::string& asked_host) {
  constexpr std::string_view kReply = "CLUSTER SLOTS";
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return Status(StatusCode::kServer, "CLUSTER SLOTS: not an array");
  }
  // Every range owns at least one slot: more ranges than slots is not a topology.
  if (reply->elements > static_cast<size_t>(kClusterSlots)) {
    return Malformed(kReply, std::to_string(reply->elements) + " ranges",
                     "more than " + std::to_string(kClusterSlots));
  }
  SlotMap map;
  Masters masters(&map);
  std::string why;
  for (size_t s = 0; s < reply->elements; ++s) {
    const std::string where = "range " + std::to_string(s);
    const redisReply* range = reply->element[s];
    // [start, end, master, replicas...], each node [host, port, id, ...].
    if (range == nullptr || range->type != REDIS_REPLY_ARRAY || range->elements < 3) {
      return Malformed(kReply, where, "not [start, end, master, replicas...]");
    }
    int first = 0, last = 0;
    if (!SlotRange(range->element[0], range->element[1], &first, &last, &why)) {
      return Malformed(kReply, where, why);
    }
    std::string endpoint;
    const redisReply* m = range->element[2];
    if (m == nullptr || m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
        !NodeEndpoint(At(m, 0), At(m, 1), asked_host, &endpoint, &why)) {
      if (m == nullptr || m->type != REDIS_REPLY_ARRAY || m->elements < 2) {
        why = "not [host, port, ...]";
      }
      return Malformed(kReply, where + " master", why);
    }
    const int idx = masters.Index(endpoint);
    for (size_t r = 3; r < range->elements; ++r) {
      const redisReply* rep = range->element[r];
      if (rep == nullptr || rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
          !NodeEndpoint(At(rep, 0), At(rep, 1), asked_host, &endpoint, &why)) {
        if (rep == nullptr || rep->type != REDIS_REPLY_ARRAY || rep->elements < 2) {
          why = "not [host, port, ...]";
        }
        return Malformed(kReply, where + " replica " + std::to_string(r - 3), why);
      }
      map.replicas[static_cast<size_t>(idx)].push_back(endpoint);
    }
    for (int x = first; x <= last; ++x)
      map.owner[static_cast<size_t>(x)] = static_cast<int16_t>(idx);
  }
  return map;
}

bool RetryableClusterError(std::string_view error) {
  return error.starts_with("TRYAGAIN") || error.starts_with("CLUSTERDOWN") ||
         error.starts_with("MASTERDOWN") || error.starts_with("LOADING") ||
         error.starts_with("READONLY");
}

bool ParseRedirect(std::string_view error, std::string_view kind, int* slot,
                   std::string* endpoint) {
  if (!error.starts_with(kind) || error.size() <= kind.size() || error[kind.size()] != ' ') {
    return false;
  }
  std::string_view rest = error.substr(kind.size() + 1);
  const size_t space = rest.find(' ');
  if (space == std::string_view::npos) return false;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + space, *slot);
  if (ec != std::errc() || p != rest.data() + space || *slot < 0 || *slot >= kClusterSlots) {
    return false;
  }
  std::string_view target = rest.substr(space + 1);
  while (!target.empty() && (target.back() == '\r' || target.back() == '\n')) {
    target.remove_suffix(1);
  }
  // "host:port" (Redis 7 may send ":port" for "the node you asked": refused,
  // the caller then refreshes the topology instead).
  const size_t colon = target.rfind(':');
  if (colon == std::string_view::npos || !ValidHost(target.substr(0, colon))) return false;
  int port = 0;
  const std::string_view digits = target.substr(colon + 1);
  auto [q, pec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (pec != std::errc() || q != digits.data() + digits.size() || port < 1 || port > 65535) {
    return false;
  }
  *endpoint = std::string(target);
  return true;
}

}  // namespace tollgate::redis
