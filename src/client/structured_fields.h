// A small parser for RFC 9651 Structured Field Lists and Dictionaries: just
// enough for the RateLimit fields (no inner-list parameters are interpreted,
// dates and display strings parse but are kept as raw text).
//
// Parsing is strict, as the RFC asks: any syntax error fails the whole field
// (the caller then ignores it). Bounded: at most kMaxMembers members and
// kMaxParams parameters per member.
#ifndef TOLLGATE_SRC_CLIENT_STRUCTURED_FIELDS_H_
#define TOLLGATE_SRC_CLIENT_STRUCTURED_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate::sf {

struct BareItem {
  enum class Type { kInteger, kDecimal, kString, kToken, kByteSequence, kBoolean, kDate, kOther };
  Type type = Type::kBoolean;
  int64_t integer = 0;  // kInteger, kDate; kBoolean as 0/1
  double decimal = 0;   // kDecimal
  std::string text;     // kString (unescaped), kToken, kByteSequence (decoded bytes)
};

struct Item {
  BareItem value;
  bool inner_list = false;  // an inner list: value is unset, members are not kept
  std::vector<std::pair<std::string, BareItem>> params;

  const BareItem* Param(std::string_view key) const;
};

inline constexpr size_t kMaxMembers = 64;
inline constexpr size_t kMaxParams = 16;

// sf-list; nullopt on any syntax error or when bounds are exceeded.
std::optional<std::vector<Item>> ParseList(std::string_view field);
// sf-dictionary as (key, item) pairs in order; later duplicates overwrite earlier ones.
std::optional<std::vector<std::pair<std::string, Item>>> ParseDictionary(std::string_view field);

}  // namespace tollgate::sf

#endif  // TOLLGATE_SRC_CLIENT_STRUCTURED_FIELDS_H_
