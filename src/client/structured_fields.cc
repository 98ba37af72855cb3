#include "client/structured_fields.h"

#include <cctype>

namespace tollgate::sf {
namespace {

bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsTchar(char c) {
  if (IsAlpha(c) || IsDigit(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (IsDigit(c)) return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// A cursor over the field; every Parse* returns false on a syntax error.
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return AtEnd() ? '\0' : s_[pos_]; }
  void SkipSp() {
    while (!AtEnd() && s_[pos_] == ' ') ++pos_;
  }
  void SkipOws() {
    while (!AtEnd() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  bool ParseKey(std::string* key) {
    if (!(IsLcAlpha(Peek()) || Peek() == '*')) return false;
    key->clear();
    while (!AtEnd()) {
      const char c = s_[pos_];
      if (!(IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '.' || c == '*')) break;
      key->push_back(c);
      ++pos_;
    }
    return true;
  }

  bool ParseParams(std::vector<std::pair<std::string, BareItem>>* params) {
    while (Consume(';')) {
      SkipSp();
      std::string key;
      if (!ParseKey(&key)) return false;
      BareItem value;
      value.type = BareItem::Type::kBoolean;
      value.integer = 1;
      if (Consume('=') && !ParseBareItem(&value)) return false;
      bool replaced = false;
      for (auto& [k, v] : *params) {
        if (k == key) {
          v = value;
          replaced = true;
        }
      }
      if (!replaced) {
        if (params->size() >= kMaxParams) return false;
        params->emplace_back(std::move(key), std::move(value));
      }
    }
    return true;
  }

  bool ParseBareItem(BareItem* out) {
    const char c = Peek();
    if (c == '-' || IsDigit(c)) return ParseNumber(out);
    if (c == '"') return ParseString(out);
    if (c == ':') return ParseBytes(out);
    if (c == '?') return ParseBoolean(out);
    if (c == '@') {
      ++pos_;
      if (!ParseNumber(out) || out->type != BareItem::Type::kInteger) return false;
      out->type = BareItem::Type::kDate;
      return true;
    }
    if (c == '%') {  // display string: keep the raw text, we never need it decoded
      ++pos_;
      if (!ParseString(out)) return false;
      out->type = BareItem::Type::kOther;
      return true;
    }
    if (IsAlpha(c) || c == '*') return ParseToken(out);
    return false;
  }

  bool ParseItemOrInnerList(Item* item) {
    if (Consume('(')) {
      item->inner_list = true;
      while (true) {
        SkipSp();
        if (Consume(')')) break;
        Item member;
        if (!ParseBareItem(&member.value) || !ParseParams(&member.params)) return false;
        if (!(Peek() == ' ' || Peek() == ')')) return false;
      }
    } else if (!ParseBareItem(&item->value)) {
      return false;
    }
    return ParseParams(&item->params);
  }

  // After a member: end of input, or OWS "," OWS followed by another member.
  // Returns 1 for "another member follows", 0 for "done", -1 for an error.
  int NextMember() {
    SkipOws();
    if (AtEnd()) return 0;
    if (!Consume(',')) return -1;
    SkipOws();
    return AtEnd() ? -1 : 1;  // a trailing comma is an error
  }

 private:
  bool ParseNumber(BareItem* out) {
    bool negative = Consume('-');
    int64_t integer = 0;
    int digits = 0;
    while (IsDigit(Peek())) {
      if (++digits > 15) return false;
      integer = integer * 10 + (s_[pos_++] - '0');
    }
    if (digits == 0) return false;
    if (Peek() != '.') {
      out->type = BareItem::Type::kInteger;
      out->integer = negative ? -integer : integer;
      return true;
    }
    if (digits > 12) return false;
    ++pos_;
    double frac = 0, scale = 1;
    int frac_digits = 0;
    while (IsDigit(Peek())) {
      if (++frac_digits > 3) return false;
      scale /= 10;
      frac += (s_[pos_++] - '0') * scale;
    }
    if (frac_digits == 0) return false;
    out->type = BareItem::Type::kDecimal;
    out->decimal = (static_cast<double>(integer) + frac) * (negative ? -1 : 1);
    return true;
  }

  bool ParseString(BareItem* out) {
    if (!Consume('"')) return false;
    out->type = BareItem::Type::kString;
    out->text.clear();
    while (!AtEnd()) {
      char c = s_[pos_++];
      if (c == '\\') {
        if (AtEnd()) return false;
        c = s_[pos_++];
        if (c != '"' && c != '\\') return false;
        out->text.push_back(c);
      } else if (c == '"') {
        return true;
      } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
        return false;
      } else {
        out->text.push_back(c);
      }
    }
    return false;  // unterminated
  }

  bool ParseToken(BareItem* out) {
    out->type = BareItem::Type::kToken;
    out->text.clear();
    while (!AtEnd() && (IsTchar(s_[pos_]) || s_[pos_] == ':' || s_[pos_] == '/')) {
      out->text.push_back(s_[pos_++]);
    }
    return true;
  }

  bool ParseBytes(BareItem* out) {
    if (!Consume(':')) return false;
    out->type = BareItem::Type::kByteSequence;
    out->text.clear();
    uint32_t acc = 0;
    int bits = 0;
    bool padding = false;
    while (!AtEnd() && s_[pos_] != ':') {
      const char c = s_[pos_++];
      if (c == '=') {
        padding = true;
        continue;
      }
      const int v = Base64Value(c);
      if (v < 0 || padding) return false;
      acc = (acc << 6) | static_cast<uint32_t>(v);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out->text.push_back(static_cast<char>((acc >> bits) & 0xff));
      }
    }
    return Consume(':');
  }

  bool ParseBoolean(BareItem* out) {
    if (!Consume('?')) return false;
    out->type = BareItem::Type::kBoolean;
    if (Consume('0')) {
      out->integer = 0;
      return true;
    }
    if (Consume('1')) {
      out->integer = 1;
      return true;
    }
    return false;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const BareItem* Item::Param(std::string_view key) const {
  for (const auto& [k, v] : params) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<std::vector<Item>> ParseList(std::string_view field) {
  Parser p(field);
  p.SkipSp();
  std::vector<Item> members;
  if (p.AtEnd()) return members;
  while (true) {
    if (members.size() >= kMaxMembers) return std::nullopt;
    Item item;
    if (!p.ParseItemOrInnerList(&item)) return std::nullopt;
    members.push_back(std::move(item));
    const int next = p.NextMember();
    if (next < 0) return std::nullopt;
    if (next == 0) return members;
  }
}

std::optional<std::vector<std::pair<std::string, Item>>> ParseDictionary(std::string_view field) {
  Parser p(field);
  p.SkipSp();
  std::vector<std::pair<std::string, Item>> members;
  if (p.AtEnd()) return members;
  while (true) {
    std::string key;
    if (!p.ParseKey(&key)) return std::nullopt;
    Item item;
    if (p.Consume('=')) {
      if (!p.ParseItemOrInnerList(&item)) return std::nullopt;
    } else {
      item.value.type = BareItem::Type::kBoolean;
      item.value.integer = 1;
      if (!p.ParseParams(&item.params)) return std::nullopt;
    }
    bool replaced = false;
    for (auto& [k, v] : members) {
      if (k == key) {
        v = item;
        replaced = true;
      }
    }
    if (!replaced) {
      if (members.size() >= kMaxMembers) return std::nullopt;
      members.emplace_back(std::move(key), std::move(item));
    }
    const int next = p.NextMember();
    if (next < 0) return std::nullopt;
    if (next == 0) return members;
  }
}

}  // namespace tollgate::sf
