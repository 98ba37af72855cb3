#include "redis/sentinel_reply.h"

#include <charconv>
#include <vector>

namespace tollgate::redis {
namespace {

std::string_view Text(const redisReply* r) { return std::string_view(r->str, r->len); }

bool IsBulk(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

std::string TypeName(const redisReply* r) {
  if (r == nullptr) return "no reply";
  switch (r->type) {
    case REDIS_REPLY_STRING:
      return "a string";
    case REDIS_REPLY_STATUS:
      return "a status";
    case REDIS_REPLY_INTEGER:
      return "an integer";
    case REDIS_REPLY_NIL:
      return "nil";
    case REDIS_REPLY_ARRAY:
      return "an array of " + std::to_string(r->elements);
    case REDIS_REPLY_ERROR:
      return "an error";
    default:
      return "an unknown type";
  }
}

Status Bad(std::string_view what) { return Status(StatusCode::kServer, std::string(what)); }

Result<MasterAddress> Address(std::string_view host, std::string_view port, std::string_view what) {
  if (!ValidSentinelHost(host)) {
    return Bad(std::string(what) + ": bad host '" + Printable(host) + "'");
  }
  MasterAddress out;
  if (!ParsePort(port, &out.port)) {
    return Bad(std::string(what) + ": bad port '" + Printable(port) + "'");
  }
  out.host = std::string(host);
  return out;
}

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 64) out += "...";
  return out;
}

bool ValidSentinelHost(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == ':' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ParsePort(std::string_view text, int* port) {
  if (text.empty() || text.size() > 5) return false;
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 1 || v > 65535) return false;
  *port = v;
  return true;
}

std::string MasterAddress::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<MasterAddress> ParseMasterAddrReply(const redisReply* r, std::string_view master) {
  if (r != nullptr && r->type == REDIS_REPLY_NIL) {
    return Bad("sentinel does not know a master named '" + Printable(master) + "'");
  }
  if (r != nullptr && r->type == REDIS_REPLY_ERROR) {
    return Bad("get-master-addr-by-name: " + Printable(Text(r)));
  }
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !IsBulk(r->element[0]) ||
      !IsBulk(r->element[1])) {
    return Bad("get-master-addr-by-name: expected an array of host and port, got " + TypeName(r));
  }
  return Address(Text(r->element[0]), Text(r->element[1]), "get-master-addr-by-name");
}

Result<std::string> ParseRoleReply(const redisReply* r) {
  if (r != nullptr && r->type == REDIS_REPLY_ERROR) return Bad("ROLE: " + Printable(Text(r)));
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !IsBulk(r->element[0])) {
    return Bad("ROLE: expected an array naming the role, got " + TypeName(r));
  }
  const std::string_view role = Text(r->element[0]);
  if (role != "master" && role != "slave" && role != "sentinel") {
    return Bad("ROLE: unknown role '" + Printable(role) + "'");
  }
  return std::string(role);
}

Status CheckSubscribeReply(const redisReply* r) {
  if (r != nullptr && r->type == REDIS_REPLY_ERROR) return Bad("SUBSCRIBE: " + Printable(Text(r)));
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !IsBulk(r->element[0]) ||
      Text(r->element[0]) != "subscribe" || !IsBulk(r->element[1]) ||
      Text(r->element[1]) != "+switch-master") {
    return Bad("SUBSCRIBE +switch-master: unexpected confirmation, " + TypeName(r));
  }
  return Status::Ok();
}

Result<std::optional<MasterAddress>> ParseSwitchMaster(const redisReply* r,
                                                       std::string_view master) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !IsBulk(r->element[0]) ||
      Text(r->element[0]) != "message" || !IsBulk(r->element[1]) ||
      Text(r->element[1]) != "+switch-master" || !IsBulk(r->element[2])) {
    return Bad("+switch-master: expected a message, got " + TypeName(r));
  }
  std::string_view text = Text(r->element[2]);
  if (text.size() > 1024) return Bad("+switch-master: message longer than 1024 bytes");
  std::vector<std::string_view> words;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    words.push_back(text.substr(0, space));
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
    if (words.size() > 5) break;
  }
  if (words.size() != 5) {
    return Bad("+switch-master: expected 5 words, got '" + Printable(Text(r->element[2])) + "'");
  }
  if (words[0] != master) return std::optional<MasterAddress>();
  auto address = Address(words[3], words[4], "+switch-master");
  if (!address.ok()) return address.status();
  return std::optional<MasterAddress>(std::move(address).value());
}

}  // namespace tollgate::redis
