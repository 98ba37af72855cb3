#include <unordered_set>

#include "tollgate/redis_hash.h"

namespace tollgate {
namespace {

bool IsCursor(const std::string& s) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string_view RedisReplyTypeName(RedisReply::Type type) {
  switch (type) {
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

Status ScanRedisHash(const RedisCommand& command, std::string_view key,
                     std::vector<std::pair<std::string, std::string>>* entries,
                     const HashScanLimits& limits) {
  entries->clear();
  std::unordered_set<std::string> seen;
  std::string cursor = "0";
  for (size_t page = 0;; ++page) {
    if (page == limits.max_pages) {
      entries->clear();
      return UnavailableError("HSCAN did not finish after " + std::to_string(page) + " pages");
    }
    Result<RedisReply> reply =
        command({"HSCAN", std::string(key), cursor, "COUNT", std::to_string(limits.page)});
    Status bad = Status::Ok();
    if (!reply.ok()) {
      bad = reply.status();
    } else if (reply->type == RedisReply::Type::kError) {
      bad = InvalidArgument("HSCAN: " + reply->str.substr(0, 200));
    } else if (reply->type != RedisReply::Type::kArray || reply->elements.size() != 2 ||
               reply->elements[0].type != RedisReply::Type::kString ||
               reply->elements[1].type != RedisReply::Type::kArray) {
      bad = InvalidArgument("HSCAN answered " + std::string(RedisReplyTypeName(reply->type)) +
                            ", not [cursor, [field, value, ...]]");
    } else if (!IsCursor(reply->elements[0].str)) {
      bad = InvalidArgument("HSCAN: the cursor is not a number");
    } else if (reply->elements[1].elements.size() % 2 != 0) {
      bad = InvalidArgument("HSCAN: a field without a value");
    }
    if (!bad.ok()) {
      entries->clear();
      return bad;
    }
    const std::vector<RedisReply>& items = reply->elements[1].elements;
    for (size_t i = 0; i < items.size(); i += 2) {
      const RedisReply& field = items[i];
      const RedisReply& value = items[i + 1];
      if (field.type != RedisReply::Type::kString || value.type != RedisReply::Type::kString) {
        bad = InvalidArgument(
            "HSCAN: a field or value is " +
            std::string(RedisReplyTypeName(field.type != RedisReply::Type::kString ? field.type
                                                                                   : value.type)) +
            ", not a string");
      } else if (field.str.size() > limits.max_field_bytes) {
        bad = InvalidArgument("field \"" + field.str.substr(0, 64) + "...\" is longer than " +
                              std::to_string(limits.max_field_bytes) + " bytes");
      } else if (value.str.size() > limits.max_value_bytes) {
        bad =
            InvalidArgument("field \"" + field.str.substr(0, 64) + "\": the value is longer than " +
                            std::to_string(limits.max_value_bytes) + " bytes");
      } else if (!seen.insert(field.str).second) {
        continue;  // HSCAN may repeat a field
      } else if (entries->size() == limits.max_entries) {
        bad = InvalidArgument("more than " + std::to_string(limits.max_entries) + " fields");
      }
      if (!bad.ok()) {
        entries->clear();
        return bad;
      }
      entries->emplace_back(field.str, value.str);
    }
    cursor = reply->elements[0].str;
    if (cursor == "0") break;
  }
  return Status::Ok();
}

}  // namespace tollgate
