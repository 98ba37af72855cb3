// Fuzz target: Redis Cluster topology replies (src/redis/cluster_slots.cc
// ParseClusterSlots / ParseClusterShards) and MOVED / ASK redirections, from
// structure-aware input: the bytes drive a generator of CLUSTER SLOTS and
// CLUSTER SHARDS replies (RESP text, read by the ReplyReader) whose slot
// numbers, ports and hosts are mostly sane and sometimes hostile (INT64_MAX,
// negative, reversed ranges, wrong types in any position).
//
// Properties: every parse finishes (a hostile range cannot spin it) and a
// parsed map holds CheckSlotMap's invariants; a CLUSTER SLOTS reply the
// generator made entirely sane parses, and its map is exactly the oracle's
// (the last range naming a slot owns it); a MOVED / ASK text with a slot
// outside [0, 16383] or a bad endpoint is refused.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_resp.h"

namespace {

using tollgate::fuzz::Input;
using tollgate::fuzz::RespArray;
using tollgate::fuzz::RespBulk;
using tollgate::fuzz::RespInt;

struct Gen {
  Input& in;
  bool sane = true;  // every element so far is what Redis sends

  // With probability ~1/16, some other RESP value instead of the expected one.
  bool Hostile() {
    if ((in.Byte() & 15) != 0) return false;
    sane = false;
    return true;
  }
  std::string AnyValue(int depth = 0) {
    switch (in.Byte() % 6) {
      case 0:
        return RespInt(in.Int64());
      case 1:
        return RespBulk(in.Short(16));
      case 2:
        return "$-1\r\n";
      case 3:
        return "-ERR " + std::string(in.Short(8)) + "\r\n";
      case 4: {
        if (depth > 2) return "*0\r\n";
        const size_t n = in.Byte() % 4;
        std::string s = RespArray(n);
        for (size_t i = 0; i < n; ++i) s += AnyValue(depth + 1);
        return s;
      }
      default:
        return "+OK\r\n";
    }
  }
  // A slot, usually within [0, 16383], sometimes anything.
  int64_t Slot(bool* in_range) {
    const uint8_t kind = in.Byte();
    if (kind < 224) return in.Range(0, 16383);
    *in_range = false;
    switch (kind % 4) {
      case 0:
        return INT64_MAX;
      case 1:
        return INT64_MIN + in.Range(0, 5);
      case 2:
        return in.Range(-5, -1);
      default:
        return 16384 + in.Range(0, 100000);
    }
  }
  std::string Host() {
    static constexpr std::array<std::string_view, 5> kHosts = {"10.0.0.1", "10.0.0.2",
                                                               "node-c.example", "::1", ""};
    const uint8_t pick = in.Byte();
    if (pick < 250) return std::string(kHosts[pick % kHosts.size()]);
    sane = false;
    return std::string(in.Short(300));  // anything, even too long or with spaces
  }
  std::string Port(int64_t* port) {
    const uint8_t pick = in.Byte();
    if (pick < 250) {
      *port = 7000 + pick % 8;
      return RespInt(*port);
    }
    sane = false;
    return RespInt(in.Int64());
  }
  std::string Node(std::string* endpoint) {
    if (Hostile()) return AnyValue();
    const std::string host = Host();
    int64_t port = 0;
    std::string s = RespArray(3) + RespBulk(host);
    s += Port(&port) + RespBulk("id");
    *endpoint = (host.empty() ? std::string("seed.host") : host) + ":" + std::to_string(port);
    return s;
  }
};

// The expected owner of every slot: an index into `endpoints`, or -1.
struct Oracle {
  std::vector<std::string> endpoints;
  std::array<int16_t, 16384> owner;
  Oracle() { owner.fill(-1); }
};

// CLUSTER SLOTS with its oracle.
std::string ClusterSlots(Gen& g, Oracle* oracle) {
  const size_t ranges = g.in.Byte() % 12;
  std::string s = RespArray(ranges);
  for (size_t r = 0; r < ranges; ++r) {
    if (g.Hostile()) {
      s += g.AnyValue();
      continue;
    }
    const size_t replicas = g.in.Byte() % 3;
    s += RespArray(3 + replicas);
    bool in_range = true;
    const int64_t lo = g.Slot(&in_range);
    const int64_t span = g.in.Range(0, 3000);
    const int64_t hi = (g.in.Byte() & 3) == 0  ? g.Slot(&in_range)
                       : lo > INT64_MAX - span ? INT64_MAX
                                               : lo + span;
    if (!in_range || hi < lo || hi > 16383) g.sane = false;
    s += g.Hostile() ? g.AnyValue() : RespInt(lo);
    s += g.Hostile() ? g.AnyValue() : RespInt(hi);
    std::string master, ignored;
    s += g.Node(&master);
    for (size_t i = 0; i < replicas; ++i) s += g.Node(&ignored);
    if (g.sane) {
      oracle->endpoints.push_back(master);
      const auto index = static_cast<int16_t>(oracle->endpoints.size() - 1);
      for (int64_t x = lo; x <= hi; ++x) oracle->owner[static_cast<size_t>(x)] = index;
    }
  }
  return s;
}

std::string ClusterShards(Gen& g) {
  const size_t shards = g.in.Byte() % 8;
  std::string s = RespArray(shards);
  for (size_t i = 0; i < shards; ++i) {
    if (g.Hostile()) {
      s += g.AnyValue();
      continue;
    }
    const size_t pairs = g.in.Byte() % 4;
    s += RespArray(4) + RespBulk("slots") + RespArray(2 * pairs);
    for (size_t p = 0; p < 2 * pairs; ++p) {
      bool in_range = true;
      s += g.Hostile() ? g.AnyValue() : RespInt(g.Slot(&in_range));
    }
    const size_t nodes = g.in.Byte() % 4;
    s += RespBulk("nodes") + RespArray(nodes);
    for (size_t n = 0; n < nodes; ++n) {
      if (g.Hostile()) {
        s += g.AnyValue();
        continue;
      }
      int64_t port = 0;
      s += RespArray(12) + RespBulk("id") + RespBulk("n") +
           RespBulk(g.in.Bool() ? "port" : "tls-port");
      s += g.Port(&port) + RespBulk(g.in.Bool() ? "ip" : "endpoint") + RespBulk(g.Host());
      s += RespBulk("role") + RespBulk(g.in.Bool() ? "master" : "replica");
      s += RespBulk("health") + RespBulk(g.in.Bool() ? "online" : "fail");
      s += RespBulk("replication-offset") + RespInt(1);
    }
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.Byte();
  Gen g{in};
  if (mode % 3 == 2) {
    // A redirection: "MOVED <slot> <host>:<port>", sometimes hostile.
    bool in_range = true;
    std::string text = (mode & 8) ? "MOVED " : "ASK ";
    text += std::to_string(g.Slot(&in_range)) + " " + g.Host() + ":";
    int64_t port = 0;
    const std::string port_resp = g.Port(&port);
    text += port_resp.substr(1, port_resp.size() - 3) + std::string(in.Short(4));
    tollgate::fuzz::CheckRedirect(text);
    int slot = 0;
    std::string endpoint;
    if (!in_range) {
      FUZZ_CHECK(!tollgate::redis::ParseRedirect(text, "MOVED", &slot, &endpoint) &&
                     !tollgate::redis::ParseRedirect(text, "ASK", &slot, &endpoint),
                 "a redirection to a slot out of range: " + tollgate::fuzz::Quote(text));
    }
    return 0;
  }
  Oracle oracle;
  const std::string resp = mode % 3 == 0 ? ClusterSlots(g, &oracle) : ClusterShards(g);
  std::vector<tollgate::redis::ReplyPtr> replies;
  if (!tollgate::fuzz::ReadAll(
          resp, [] { return size_t{0}; }, &replies))
    return 0;
  FUZZ_CHECK(replies.size() == 1,
             "one reply generated, " + std::to_string(replies.size()) + " read");
  const redisReply* reply = replies[0].get();
  tollgate::fuzz::HandleReply(reply);
  if (mode % 3 != 0 || !g.sane) return 0;
  auto map = tollgate::redis::ParseClusterSlots(reply, "seed.host");
  FUZZ_CHECK(map.ok(), "a sane CLUSTER SLOTS reply refused: " + map.status().ToString());
  for (size_t x = 0; x < 16384; ++x) {
    const int16_t want = oracle.owner[x];
    const int16_t o = map->owner[x];
    FUZZ_CHECK(want < 0 ? o == -1
                        : (o >= 0 && map->masters[static_cast<size_t>(o)] ==
                                         oracle.endpoints[static_cast<size_t>(want)]),
               "slot " + std::to_string(x) + " owned by the wrong master");
  }
  return 0;
}
