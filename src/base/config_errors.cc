#include "tollgate/config_error.h"

namespace tollgate {

std::string FieldPath(std::string_view path, std::string_view field) {
  std::string out(path);
  if (!out.empty()) out.push_back('.');
  out.append(field);
  return out;
}

std::string IndexPath(std::string_view path, size_t index) {
  std::string out(path);
  out.push_back('[');
  out.append(std::to_string(index));
  out.push_back(']');
  return out;
}

std::string PrintableText(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void ConfigErrors::Add(std::string_view path, std::string_view message) {
  std::string full = source_.empty() ? std::string(path) : source_ + ": " + std::string(path);
  out_->push_back({PrintableText(full), PrintableText(message)});
}

}  // namespace tollgate
