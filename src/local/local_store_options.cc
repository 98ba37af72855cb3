// ParseLocalStoreQuery: the options of a "local://?..." store URL.
#include <charconv>
#include <string>

#include "tollgate/local_store.h"

namespace tollgate {
namespace {

Result<size_t> ParseCount(std::string_view name, std::string_view value, size_t min) {
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v < min) {
    return InvalidArgument("store url: " + std::string(name) +
                           (min == 0 ? " must be an integer >= 0" : " must be a positive integer"));
  }
  return v;
}

}  // namespace

bool ParseOverflowPolicy(std::string_view text, OverflowPolicy* out) {
  if (text == "evict") {
    *out = OverflowPolicy::kEvict;
  } else if (text == "allow") {
    *out = OverflowPolicy::kAllow;
  } else if (text == "reject") {
    *out = OverflowPolicy::kReject;
  } else {
    return false;
  }
  return true;
}

Result<LocalStoreOptions> ParseLocalStoreQuery(std::string_view query, LocalStoreOptions options) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (name == "max_keys" || name == "shards") {
      auto v = ParseCount(name, value, 1);
      if (!v.ok()) return v.status();
      (name == "max_keys" ? options.max_keys : options.shards) = *v;
    } else if (name == "max_keys_per_rule") {
      auto v = ParseCount(name, value, 0);
      if (!v.ok()) return v.status();
      options.max_keys_per_group = *v;
    } else if (name == "overflow") {
      if (!ParseOverflowPolicy(value, &options.overflow)) {
        return InvalidArgument("store url: overflow must be evict, allow or reject");
      }
    } else {
      // Quoted only when it looks like an option name: anything else may be a mistyped URL's
      // userinfo (a password), which no message repeats (base/redact.h).
      const bool quotable =
          !name.empty() && name.size() <= 64 &&
          name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos;
      return InvalidArgument("store url: unknown local option" +
                             (quotable ? " '" + std::string(name) + "'" : std::string()) +
                             " (max_keys, shards, overflow, max_keys_per_rule)");
    }
  }
  return options;
}

}  // namespace tollgate
