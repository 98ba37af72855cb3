#include "rls/rls_wildcard.h"

namespace tollgate::rls {

bool IsWildcard(std::string_view value) { return value.find('*') != std::string_view::npos; }

bool WildcardMatch(std::string_view pattern, std::string_view value) {
  const size_t first_star = pattern.find('*');
  if (first_star == std::string_view::npos) return pattern == value;
  const size_t last_star = pattern.rfind('*');
  const std::string_view head = pattern.substr(0, first_star);
  const std::string_view tail = pattern.substr(last_star + 1);
  if (value.size() < head.size() + tail.size()) return false;
  if (!value.starts_with(head) || !value.ends_with(tail)) return false;
  // The pieces between the first and the last star, each at its leftmost
  // place in what head and tail leave over.
  std::string_view rest = value.substr(head.size(), value.size() - head.size() - tail.size());
  std::string_view middle = first_star == last_star
                                ? std::string_view()
                                : pattern.substr(first_star + 1, last_star - first_star - 1);
  while (!middle.empty()) {
    const size_t star = middle.find('*');
    const std::string_view piece = middle.substr(0, star);
    if (!piece.empty()) {
      const size_t at = rest.find(piece);
      if (at == std::string_view::npos) return false;
      rest.remove_prefix(at + piece.size());
    }
    if (star == std::string_view::npos) break;
    middle.remove_prefix(star + 1);
  }
  return true;
}

}  // namespace tollgate::rls
