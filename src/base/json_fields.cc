#include "tollgate/json_fields.h"

#include <cmath>
#include <cstdio>

namespace tollgate {

using Json = nlohmann::json;

std::string JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::discarded:
      return "invalid";
    default:
      return "a number";
  }
}

std::string NumberText(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", value);
  return buf;
}

bool JsonFields::Has(std::string_view key) const {
  return object_.find(std::string(key)) != object_.end();
}

const Json* JsonFields::Find(std::string_view key) {
  seen_.emplace_back(key);
  auto it = object_.find(std::string(key));
  return it == object_.end() ? nullptr : &*it;
}

void JsonFields::TypeError(std::string_view key, std::string_view must, const Json& got) {
  std::string message(must);
  if (messages_ == Messages::kDetailed) message += " (got " + JsonTypeName(got) + ")";
  Error(key, message);
}

std::optional<std::string> JsonFields::String(std::string_view key) {
  const Json* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    TypeError(key, "must be a string", *v);
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> JsonFields::Bool(std::string_view key) {
  const Json* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    TypeError(key, "must be true or false", *v);
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<double> JsonFields::Number(std::string_view key) {
  const Json* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    TypeError(key, "must be a number", *v);
    return std::nullopt;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d)) {
    Error(key, "must be a finite number");
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> JsonFields::Whole(std::string_view key, int64_t max) {
  auto v = Number(key);
  if (!v) return std::nullopt;
  if (!(*v > 0)) {
    Error(key, "must be > 0 (got " + NumberText(*v) + ")");
    return std::nullopt;
  }
  if (std::floor(*v) != *v) {
    Error(key, "must be a whole number (got " + NumberText(*v) + ")");
    return std::nullopt;
  }
  if (*v > static_cast<double>(max)) {
    Error(key, "must be at most " + std::to_string(max) + " (got " + NumberText(*v) + ")");
    return std::nullopt;
  }
  return static_cast<int64_t>(*v);
}

void JsonFields::String(std::string_view key, std::string* out) {
  if (auto v = String(key)) *out = std::move(*v);
}

void JsonFields::Bool(std::string_view key, bool* out) {
  if (auto v = Bool(key)) *out = *v;
}

void JsonFields::Double(std::string_view key, double* out, double lo, double hi) {
  const Json* v = Find(key);
  if (v == nullptr) return;
  if (!v->is_number()) return TypeError(key, "must be a number", *v);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    return Error(key, "must be in [" + NumberText(lo) + ", " + NumberText(hi) + "]");
  }
  *out = d;
}

void JsonFields::Integer(std::string_view key, int64_t* out, int64_t lo, int64_t hi) {
  const Json* v = Find(key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) return TypeError(key, "must be an integer", *v);
  const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX
                        : v->get<int64_t>();
  if (i < lo || i > hi) {
    return Error(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = i;
}

void JsonFields::Duration(std::string_view key, std::chrono::milliseconds* out, int64_t lo_ms,
                          int64_t hi_ms) {
  int64_t ms = out->count();
  Integer(key, &ms, lo_ms, hi_ms);
  *out = std::chrono::milliseconds(ms);
}

void JsonFields::StringList(std::string_view key, std::vector<std::string>* out) {
  const Json* v = Find(key);
  if (v == nullptr) return;
  if (!v->is_array()) return TypeError(key, "must be an array of strings", *v);
  out->clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    if (!item.is_string()) {
      TypeError(IndexPath(key, i), "must be a string", item);
      continue;
    }
    out->push_back(item.get<std::string>());
  }
}

void JsonFields::Unknown(const std::string& key, std::string_view expected) {
  if (messages_ == Messages::kShort) return Error(key, "unknown field");
  Error(key.size() > 64 ? key.substr(0, 64) + "..." : key,
        "unknown field (expected one of: " + std::string(expected) + ")");
}

void JsonFields::RejectUnknown() {
  std::string expected;
  for (const auto& s : seen_) expected += (expected.empty() ? "" : ", ") + s;
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    bool known = false;
    for (const auto& s : seen_) known = known || s == it.key();
    if (!known) Unknown(it.key(), expected);
  }
}

void JsonFields::RejectUnknown(std::initializer_list<std::string_view> known) {
  std::string expected;
  for (std::string_view k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    bool found = false;
    for (std::string_view k : known) found = found || it.key() == k;
    if (!found) Unknown(it.key(), expected);
  }
}

}  // namespace tollgate
