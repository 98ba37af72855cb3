// JsonFields: the one typed reader of a JSON object's fields, shared by every
// configuration parser (the policy, src/policy/parse.cc; tollgated's config
// file, server/config.cc; the request bodies of tollgated's decision and admin
// APIs). Each read checks the field's JSON type and range and reports a problem
// through ConfigErrors (tollgate/config_error.h) under the field's path
// (`rules[2].algorithm_config.burst`, `store.breaker.open_ms`), so every parser
// names problems the same way and collects all of them.
//
// A field that is absent is not an error of the reader (the caller decides what
// is required); a field of the wrong type or out of range is reported and the
// output is left as it was. Unknown fields are errors: RejectUnknown() after
// the reads (every field nobody asked for), or RejectUnknown(known) with an
// explicit list.
//
// Messages: kDetailed says what was found ("must be a number (got a string)")
// and lists the expected fields of an unknown one; kShort does neither ("must be
// a number"). Both exist so that the policy's and the config file's messages
// stay as documented and tested; a new parser should use kDetailed.
//
// JsonNestingDepth: how deeply a JSON text nests arrays and objects, found by
// one linear scan that skips strings, so a parser can refuse a document that
// would recurse too deep before it parses it. The text's size should be
// bounded first (the scan is O(n)). Not a validator: malformed text gets a
// depth too, and the parser reports what is wrong with it.
//
// Needs nlohmann-json (header-only) on the include path. Thread safety: none;
// one parse owns its readers; the free functions are pure. Ownership: a reader
// keeps references to the JSON object and the collector, which must outlive
// it. Implemented in tollgate_base (src/base/json_fields.cc, json_depth.cc).
#ifndef TOLLGATE_JSON_FIELDS_H_
#define TOLLGATE_JSON_FIELDS_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/config_error.h"

namespace tollgate {

// The deepest nesting of arrays and objects in `text` (0 for a scalar).
int JsonNestingDepth(std::string_view text);

// "a string", "a number", "an object", "null", ... for "(got ...)" messages.
std::string JsonTypeName(const nlohmann::json& value);
// A double as an error message shows it: up to 15 significant digits ("0.5", "1e+300").
std::string NumberText(double value);

class JsonFields {
 public:
  enum class Messages { kDetailed, kShort };

  JsonFields(const nlohmann::json& object, std::string path, ConfigErrors& errors,
             Messages messages = Messages::kDetailed)
      : object_(object), path_(std::move(path)), errors_(&errors), messages_(messages) {}

  // A reader of `object`, the value of this object's `key` (same collector and messages).
  JsonFields Nested(const nlohmann::json& object, std::string_view key) const {
    return JsonFields(object, PathOf(key), *errors_, messages_);
  }

  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return FieldPath(path_, key); }
  void Error(std::string_view key, std::string_view message) { errors_->Add(PathOf(key), message); }
  bool Has(std::string_view key) const;
  // The field's value or nullptr; marks the field as read either way.
  const nlohmann::json* Find(std::string_view key);

  // Typed reads returning the value (nullopt when absent or reported).
  std::optional<std::string> String(std::string_view key);
  std::optional<bool> Bool(std::string_view key);
  // Any finite JSON number (booleans are not numbers).
  std::optional<double> Number(std::string_view key);
  // A whole number in [1, max] (counts, costs, bursts).
  std::optional<int64_t> Whole(std::string_view key, int64_t max);

  // Typed reads into an output that keeps its value (its default) unless the
  // field is present and valid.
  void String(std::string_view key, std::string* out);
  void Bool(std::string_view key, bool* out);
  // A JSON number in [lo, hi]: "must be in [lo, hi]".
  void Double(std::string_view key, double* out, double lo, double hi);
  // A JSON integer in [lo, hi] (an unsigned value above INT64_MAX counts as INT64_MAX).
  void Integer(std::string_view key, int64_t* out, int64_t lo, int64_t hi);
  template <typename Int>
  void Integer(std::string_view key, Int* out, int64_t lo, int64_t hi) {
    int64_t value = static_cast<int64_t>(*out);
    Integer(key, &value, lo, hi);
    *out = static_cast<Int>(value);
  }
  // Whole milliseconds in [lo_ms, hi_ms].
  void Duration(std::string_view key, std::chrono::milliseconds* out, int64_t lo_ms, int64_t hi_ms);
  // An array of strings; replaces *out when it is one ("key[i]: must be a string").
  void StringList(std::string_view key, std::vector<std::string>* out);

  // Every field not passed to Find() (or a typed read) so far is an error. Call last.
  void RejectUnknown();
  // Every field not in `known` is an error; callable before the reads.
  void RejectUnknown(std::initializer_list<std::string_view> known);

 private:
  // "must be a string" plus " (got an object)" under kDetailed.
  void TypeError(std::string_view key, std::string_view must, const nlohmann::json& got);
  void Unknown(const std::string& key, std::string_view expected);

  const nlohmann::json& object_;
  std::string path_;
  ConfigErrors* errors_;
  Messages messages_;
  std::vector<std::string> seen_;
};

}  // namespace tollgate

#endif  // TOLLGATE_JSON_FIELDS_H_
