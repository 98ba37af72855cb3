// The section readers of tollgated's config file, over JsonFields
// (tollgate/json_fields.h): an enum read by its own parser, an object section
// read by a callback with its unknown fields flagged, and a key that takes a
// string or an object. tollgated's listener half (server/config.cc) and the
// engine's half (src/runtime/runtime_config.cc, tollgate/runtime_config.h)
// read one document with them, so both halves report the same shapes of error
// ("store: must be a URL string or an object", "tls: must be an object").
//
// Header-only; needs nlohmann-json as json_fields.h does. Thread safety: none
// (a reader belongs to one parse).
#ifndef TOLLGATE_CONFIG_SECTIONS_H_
#define TOLLGATE_CONFIG_SECTIONS_H_

#include <optional>
#include <string>
#include <string_view>

#include "tollgate/json_fields.h"

namespace tollgate {

// The string at `key` parsed by `parse` into *out; "`key`: `expected`" when it
// names no value (*out then keeps its value).
template <typename Enum>
void ReadEnum(JsonFields& f, std::string_view key, Enum* out,
              bool (*parse)(std::string_view, Enum*), std::string_view expected) {
  const std::optional<std::string> text = f.String(key);
  if (text && !parse(*text, out)) f.Error(key, expected);
}

// Reads the object at `key` with `read(section reader)`, then flags its unknown
// fields; any other JSON type is "<key>: must be an object".
template <typename Read>
void ReadSection(JsonFields& r, std::string_view key, Read read) {
  if (const nlohmann::json* v = r.Find(key)) {
    if (!v->is_object()) return r.Error(key, "must be an object");
    JsonFields section = r.Nested(*v, key);
    read(section);
    section.RejectUnknown();
  }
}

// `key` takes a string (into *as_string: an address, a URL) or an object (read
// as ReadSection does); any other JSON type is "<key>: `type_error`".
template <typename Read>
void ReadStringOrSection(JsonFields& r, std::string_view key, std::string* as_string,
                         std::string_view type_error, Read read) {
  if (const nlohmann::json* v = r.Find(key)) {
    if (v->is_string()) {
      *as_string = v->get<std::string>();
    } else if (v->is_object()) {
      JsonFields section = r.Nested(*v, key);
      read(section);
      section.RejectUnknown();
    } else {
      r.Error(key, type_error);
    }
  }
}

}  // namespace tollgate

#endif  // TOLLGATE_CONFIG_SECTIONS_H_
