#include "redis/cluster_slots.h"

#include <charconv>

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

int MasterIndex(SlotMap& map, const std::string& endpoint) {
  for (size_t i = 0; i < map.masters.size(); ++i) {
    if (map.masters[i] == endpoint) return static_cast<int>(i);
  }
  map.masters.push_back(endpoint);
  map.replicas.emplace_back();
  return static_cast<int>(map.masters.size()) - 1;
}

// A flat RESP2 map: key, value, key, value...
const redisReply* Field(const redisReply* map, std::string_view name) {
  if (map == nullptr || map->type != REDIS_REPLY_ARRAY) return nullptr;
  for (size_t i = 0; i + 1 < map->elements; i += 2) {
    if (Str(map->element[i]) == name) return map->element[i + 1];
  }
  return nullptr;
}

}  // namespace

Result<SlotMap> ParseClusterShards(const redisReply* reply, const std::string& asked_host,
                                   bool tls) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return Status(StatusCode::kServer, "CLUSTER SHARDS: not an array");
  }
  SlotMap map;
  for (size_t s = 0; s < reply->elements; ++s) {
    const redisReply* shard = reply->element[s];
    const redisReply* slots = Field(shard, "slots");
    const redisReply* nodes = Field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || nodes->type != REDIS_REPLY_ARRAY) continue;
    std::string master;
    std::vector<std::string> replicas;
    for (size_t n = 0; n < nodes->elements; ++n) {
      const redisReply* node = nodes->element[n];
      std::string host(Str(Field(node, "ip")));
      if (host.empty()) host = std::string(Str(Field(node, "endpoint")));
      if (host.empty()) host = asked_host;
      const redisReply* port = tls ? Field(node, "tls-port") : nullptr;
      if (port == nullptr) port = Field(node, "port");
      if (port == nullptr || port->type != REDIS_REPLY_INTEGER || host.empty()) continue;
      const std::string endpoint = host + ":" + std::to_string(port->integer);
      const std::string_view role = Str(Field(node, "role"));
      const std::string_view health = Str(Field(node, "health"));
      if (role == "master") {
        if (health != "fail") master = endpoint;
      } else if (health == "online") {
        replicas.push_back(endpoint);
      }
    }
    if (master.empty() || slots->type != REDIS_REPLY_ARRAY) continue;
    const int idx = MasterIndex(map, master);
    map.replicas[static_cast<size_t>(idx)] = replicas;
    for (size_t i = 0; i + 1 < slots->elements; i += 2) {
      const int64_t lo = slots->element[i]->integer, hi = slots->element[i + 1]->integer;
      for (int64_t x = lo; x <= hi && x < kClusterSlots; ++x) {
        if (x >= 0) map.owner[static_cast<size_t>(x)] = static_cast<int16_t>(idx);
      }
    }
  }
  return map;
}

Result<SlotMap> ParseClusterSlots(const redisReply* reply, const std::string& asked_host) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return Status(StatusCode::kServer, "CLUSTER SLOTS: not an array");
  }
  SlotMap map;
  for (size_t s = 0; s < reply->elements; ++s) {
    const redisReply* range = reply->element[s];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
    const redisReply* m = range->element[2];
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2) continue;
    std::string host(Str(m->element[0]));
    if (host.empty()) host = asked_host;
    const std::string endpoint = host + ":" + std::to_string(m->element[1]->integer);
    const int idx = MasterIndex(map, endpoint);
    for (size_t r = 3; r < range->elements; ++r) {
      const redisReply* rep = range->element[r];
      if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2) {
        std::string rhost(Str(rep->element[0]));
        if (rhost.empty()) rhost = asked_host;
        map.replicas[static_cast<size_t>(idx)].push_back(rhost + ":" +
                                                         std::to_string(rep->element[1]->integer));
      }
    }
    for (int64_t x = range->element[0]->integer; x <= range->element[1]->integer; ++x) {
      if (x >= 0 && x < kClusterSlots)
        map.owner[static_cast<size_t>(x)] = static_cast<int16_t>(idx);
    }
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
  if (ec != std::errc() || *slot < 0 || *slot >= kClusterSlots) return false;
  *endpoint = std::string(rest.substr(space + 1));
  while (!endpoint->empty() && (endpoint->back() == '\r' || endpoint->back() == '\n')) {
    endpoint->pop_back();
  }
  return !endpoint->empty();
}

}  // namespace tollgate::redis
