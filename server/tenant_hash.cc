#include "server/tenant_hash.h"

#include <unordered_set>

namespace tollgate::server {
namespace {

std::string_view TypeName(RedisReply::Type t) {
  switch (t) {
    case RedisReply::Type::kString:
      return "a string";
    case RedisReply::Type::kStatus:
      return "a status";
    case RedisReply::Type::kInteger:
      return "an integer";
    case RedisReply::Type::kNil:
      return "nil";
    case RedisReply::Type::kArray:
      return "an array";
    case RedisReply::Type::kError:
      return "an error";
  }
  return "unknown";
}

bool IsCursor(const std::string& s) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

Status ReadTenantHash(const RedisCommand& command, std::string_view key,
                      std::vector<std::pair<std::string, std::string>>* entries,
                      const TenantHashLimits& limits) {
  entries->clear();
  std::unordered_set<std::string> seen;
  std::string cursor = "0";
  for (size_t page = 0;; ++page) {
    if (page == limits.max_pages) {
      return UnavailableError("HSCAN did not finish after " + std::to_string(page) + " pages");
    }
    Result<RedisReply> reply =
        command({"HSCAN", std::string(key), cursor, "COUNT", std::to_string(limits.page)});
    if (!reply.ok()) return reply.status();
    if (reply->type == RedisReply::Type::kError) {
      return InvalidArgument("HSCAN: " + reply->str.substr(0, 200));
    }
    if (reply->type != RedisReply::Type::kArray || reply->elements.size() != 2 ||
        reply->elements[0].type != RedisReply::Type::kString ||
        reply->elements[1].type != RedisReply::Type::kArray) {
      return InvalidArgument("HSCAN answered " + std::string(TypeName(reply->type)) +
                             ", not [cursor, [field, value, ...]]");
    }
    const std::vector<RedisReply>& items = reply->elements[1].elements;
    if (!IsCursor(reply->elements[0].str))
      return InvalidArgument("HSCAN: the cursor is not a number");
    if (items.size() % 2 != 0) return InvalidArgument("HSCAN: a field without a value");
    for (size_t i = 0; i < items.size(); i += 2) {
      const RedisReply& field = items[i];
      const RedisReply& value = items[i + 1];
      if (field.type != RedisReply::Type::kString || value.type != RedisReply::Type::kString) {
        return InvalidArgument(
            "HSCAN: a field or value is " +
            std::string(
                TypeName(field.type != RedisReply::Type::kString ? field.type : value.type)) +
            ", not a string");
      }
      if (field.str.size() > limits.max_field_bytes) {
        return InvalidArgument("field \"" + field.str.substr(0, 64) + "...\" is longer than " +
                               std::to_string(limits.max_field_bytes) + " bytes");
      }
      if (value.str.size() > limits.max_value_bytes) {
        return InvalidArgument("field \"" + field.str.substr(0, 64) +
                               "\": the value is longer than " +
                               std::to_string(limits.max_value_bytes) + " bytes");
      }
      if (!seen.insert(field.str).second) continue;  // HSCAN may repeat a field
      if (entries->size() == limits.max_entries) {
        return InvalidArgument("more than " + std::to_string(limits.max_entries) + " fields");
      }
      entries->emplace_back(field.str, value.str);
    }
    cursor = reply->elements[0].str;
    if (cursor == "0") break;
  }
  if (entries->empty()) return InvalidArgument("does not exist or is empty");
  return Status::Ok();
}

}  // namespace tollgate::server
