// Fuzz target: what a sentinel (or the server it names) sends the Sentinel
// mode of the Redis store (src/redis/sentinel_reply.cc): the replies to
// SENTINEL get-master-addr-by-name, ROLE and SUBSCRIBE +switch-master, and
// the +switch-master messages, read by the bounded ReplyReader.
//
// Input: the bytes a sentinel sends (RESP); every complete reply is handed
// to every parser, for the master name "m".
// Properties: every parse finishes; an address that parses has a host
// ValidSentinelHost accepts and a port in 1..65535, and prints back
// (ToString) to the host and port it holds; a ROLE that parses is one of
// master, slave, sentinel; every error is kServer with a message of printable
// ASCII within 400 bytes (the quoted reply text is bounded).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_resp.h"
#include "redis/sentinel_reply.h"

namespace {

using tollgate::fuzz::Quote;
namespace redis = tollgate::redis;

void CheckError(const tollgate::Status& st, const char* where) {
  FUZZ_CHECK(st.code() == tollgate::StatusCode::kServer,
             std::string(where) + ": not kServer: " + st.ToString());
  FUZZ_CHECK(st.message().size() <= 400, std::string(where) + ": message too long");
  for (char c : st.message()) {
    FUZZ_CHECK(c >= 0x20 && c < 0x7f,
               std::string(where) + ": unprintable message " + Quote(st.message()));
  }
}

void CheckAddress(const redis::MasterAddress& a, const char* where) {
  FUZZ_CHECK(redis::ValidSentinelHost(a.host), std::string(where) + ": bad host " + Quote(a.host));
  FUZZ_CHECK(a.port >= 1 && a.port <= 65535, std::string(where) + ": bad port");
  const std::string printed = a.ToString();
  const size_t colon = printed.rfind(':');
  int port = 0;
  FUZZ_CHECK(colon != std::string::npos &&
                 redis::ParsePort(std::string_view(printed).substr(colon + 1), &port) &&
                 port == a.port,
             std::string(where) + ": does not print back: " + Quote(printed));
}

void Handle(const redisReply* r) {
  auto address = redis::ParseMasterAddrReply(r, "m");
  if (address.ok()) {
    CheckAddress(*address, "get-master-addr-by-name");
  } else {
    CheckError(address.status(), "get-master-addr-by-name");
  }
  auto role = redis::ParseRoleReply(r);
  if (role.ok()) {
    FUZZ_CHECK(*role == "master" || *role == "slave" || *role == "sentinel",
               "ROLE: unknown role accepted: " + Quote(*role));
  } else {
    CheckError(role.status(), "ROLE");
  }
  if (tollgate::Status st = redis::CheckSubscribeReply(r); !st.ok()) CheckError(st, "SUBSCRIBE");
  auto message = redis::ParseSwitchMaster(r, "m");
  if (!message.ok()) {
    CheckError(message.status(), "+switch-master");
  } else if (message->has_value()) {
    CheckAddress(**message, "+switch-master");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<tollgate::redis::ReplyPtr> replies;
  (void)tollgate::fuzz::ReadAll(
      bytes, [] { return size_t{0}; }, &replies);
  for (const auto& r : replies) Handle(r.get());
  return 0;
}
