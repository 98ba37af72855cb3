// Internal: the response fields a settlement asked for
// (Settlement::response_fields), captured from an upstream response as the
// gateway relays it (server/proxy.cc), for ResponseOutcome::fields.
//
// A wanted field is matched case-insensitively and recorded under the
// settlement's (lower-case) name; a later value (a repeated field, or the
// trailer's after the head's) replaces an earlier one, so one value a name is
// kept, cut to kMaxCapturedValue bytes. The values are hostile: the
// settlement parses them strictly (ParseResponseCost).
//
// Beast's response parser adds a chunked body's trailer fields to the head's,
// and keeps fields of one name together in the order they came (a trailer
// field whose name the head had goes right after the head's last one, not at
// the end): Head() remembers how many of each wanted name the head had,
// Trailer() captures, per name, the ones after them. Not thread-safe; one per
// exchange. `wanted` and `out` must outlive the object.
#ifndef TOLLGATE_SERVER_RESPONSE_CAPTURE_H_
#define TOLLGATE_SERVER_RESPONSE_CAPTURE_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/http_text.h"
#include "tollgate/request.h"

namespace tollgate::server {

inline constexpr size_t kMaxCapturedValue = 64;

class ResponseCapture {
 public:
  ResponseCapture(std::span<const std::string> wanted, std::vector<HeaderField>* out)
      : wanted_(wanted), out_(out) {}

  bool empty() const { return wanted_.empty(); }

  // Records `value` when `name` is wanted.
  void Field(std::string_view name, std::string_view value) {
    const std::string* want = Wanted(name);
    if (want == nullptr) return;
    std::string v(value.substr(0, kMaxCapturedValue));
    for (HeaderField& f : *out_) {
      if (f.name == *want) {
        f.value = std::move(v);
        return;
      }
    }
    out_->push_back({*want, std::move(v)});
  }

  // The head's fields (a Beast header), before any trailer was parsed.
  template <class Fields>
  void Head(const Fields& fields) {
    if (empty()) return;
    in_head_.assign(wanted_.size(), 0);
    for (const auto& f : fields) {
      const std::string* want = Wanted(NameOf(f));
      if (want == nullptr) continue;
      ++in_head_[static_cast<size_t>(want - wanted_.data())];
      Field(NameOf(f), ValueOf(f));
    }
  }

  // The same fields once the body is done: of each wanted name, the ones after
  // the head's. Once per exchange, after Head().
  template <class Fields>
  void Trailer(const Fields& fields) {
    if (empty()) return;
    in_head_.resize(wanted_.size(), 0);
    for (const auto& f : fields) {
      const std::string* want = Wanted(NameOf(f));
      if (want == nullptr) continue;
      size_t& head_left = in_head_[static_cast<size_t>(want - wanted_.data())];
      if (head_left > 0) {
        --head_left;  // the head's, captured already
        continue;
      }
      Field(NameOf(f), ValueOf(f));
    }
  }

 private:
  const std::string* Wanted(std::string_view name) const {
    for (const std::string& want : wanted_) {
      if (EqualsIgnoreCase(name, want)) return &want;
    }
    return nullptr;
  }
  static std::string_view NameOf(const auto& f) {
    return {f.name_string().data(), f.name_string().size()};
  }
  static std::string_view ValueOf(const auto& f) { return {f.value().data(), f.value().size()}; }

  std::span<const std::string> wanted_;
  std::vector<HeaderField>* out_;
  std::vector<size_t> in_head_;  // per wanted name: how many the head had
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_RESPONSE_CAPTURE_H_
