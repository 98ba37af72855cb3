// ParsePolicy: JSON text -> validated Policy, collecting every error with its
// path. Exceptions from the JSON library are caught here (configuration load
// only, never the request path).
#include <openssl/sha.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "base/config_errors.h"
#include "base/json_depth.h"
#include "base/json_fields.h"
#include "base/names.h"
#include "policy/policy_impl.h"
#include "policy/value_file.h"
#include "policy/value_sets.h"
#include "tollgate/calendar.h"
#include "tollgate/http_text.h"
#include "tollgate/period.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

using nlohmann::json;

using base::ConfigErrors;
using base::FieldPath;
using base::IndexPath;
using base::JsonFields;
using base::JsonTypeName;
using base::NumberText;

bool ValidName(std::string_view name) { return base::IsPolicyName(name); }

bool IsWhole(double v) { return std::floor(v) == v; }

// "500ms", "10s", "1m", "1h", "1d" or a number of seconds.
std::optional<int64_t> DurationNs(const json& v, const std::string& path, ConfigErrors& e) {
  double seconds = 0;
  if (v.is_number()) {
    seconds = v.get<double>();
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    size_t unit_at = 0;
    while (unit_at < s.size() && ((s[unit_at] >= '0' && s[unit_at] <= '9') || s[unit_at] == '.'))
      ++unit_at;
    const std::string number = s.substr(0, unit_at);
    const std::string unit = s.substr(unit_at);
    double scale = 0;
    if (unit == "ms") scale = 1e-3;
    if (unit == "s") scale = 1;
    if (unit == "m") scale = 60;
    if (unit == "h") scale = 3600;
    if (unit == "d") scale = 86400;
    char* end = nullptr;
    const double n = number.empty() ? -1 : std::strtod(number.c_str(), &end);
    if (scale == 0 || number.empty() || end != number.c_str() + number.size()) {
      e.Add(path, "must be a duration like \"500ms\", \"10s\", \"1m\", \"1h\", \"1d\" (got \"" +
                      s.substr(0, 32) + "\")");
      return std::nullopt;
    }
    seconds = n * scale;
  } else {
    e.Add(path, "must be a number of seconds or a duration string (got " + JsonTypeName(v) + ")");
    return std::nullopt;
  }
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 366.0 * 86400) {
    e.Add(path, "must be > 0 and at most 366 days (got " + NumberText(seconds) + "s)");
    return std::nullopt;
  }
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

// A limit's period: a period string ("1h", "30d", "1h30m": tollgate/period.h)
// or a whole number of seconds. Exact: no fractions, no rounding.
std::optional<int64_t> PeriodNs(const json& v, const std::string& path, ConfigErrors& e) {
  if (v.is_string()) {
    auto p = ParsePeriod(v.get<std::string>());
    if (!p.ok()) {
      e.Add(path, p.status().message());
      return std::nullopt;
    }
    return p->count();
  }
  if (v.is_number()) {
    const double seconds = v.get<double>();
    if (!IsWhole(seconds) || seconds <= 0 || seconds > 366.0 * 86400) {
      e.Add(path,
            "must be a whole number of seconds from 1 to 366 days, or a period string like "
            "\"1h\" (got " +
                NumberText(seconds) + ")");
      return std::nullopt;
    }
    return static_cast<int64_t>(seconds) * 1'000'000'000;
  }
  e.Add(path, "must be a period string like \"1h\", \"30d\", \"1w\" or a number of seconds (got " +
                  JsonTypeName(v) + ")");
  return std::nullopt;
}

std::string ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();  // numbers and booleans as JSON writes them, like claims
}

bool IsScalar(const json& v) { return v.is_string() || v.is_number() || v.is_boolean(); }

// Where a policy's value files are read from, and a rule's match-tree budget.
struct MatchCtx {
  const PolicyParseOptions* options;
  ConfigErrors* e;
  size_t nodes = 0;  // conditions built for the current rule (kMaxMatchNodes)
};

// {"file": "<path>"} at `path`: the file name (1 to 4096 characters), or
// nullopt after reporting why not. `what` names the form for the message
// ("an array of values or ").
std::optional<std::string> FileRef(const json& v, const std::string& path, std::string_view what,
                                   MatchCtx& m) {
  if (!v.is_object() || !v.contains("file")) {
    m.e->Add(path, "must be " + std::string(what) + "{\"file\": \"<path>\"} (got " +
                       JsonTypeName(v) + ")");
    return std::nullopt;
  }
  JsonFields f(v, path, *m.e);
  const size_t before = m.e->count();
  auto file = f.String("file");
  f.RejectUnknown();
  if (m.e->count() != before || !file) return std::nullopt;
  if (file->empty() || file->size() > 4096) {
    f.Error("file", "must be a path of 1 to 4096 characters");
    return std::nullopt;
  }
  if (!m.options->files) {
    f.Error("file", "files are not read here (the policy was given as text without files)");
    return std::nullopt;
  }
  return file;
}

// Reads the value file `file` named at `path`; reports errors at `path` and
// returns nullopt when the file is unusable. `lines` (optional) receives each
// value's line number.
std::optional<std::vector<std::string>> ValueFile(const std::string& file, const std::string& path,
                                                  MatchCtx& m,
                                                  std::vector<size_t>* lines = nullptr) {
  std::string text, why;
  if (!ReadConfinedFile(m.options->base_dir, file, &text, &why)) {
    m.e->Add(FieldPath(path, "file"), why);
    return std::nullopt;
  }
  std::vector<LineError> errors;
  auto values = ParseValueLines(text, &errors, lines);
  for (const LineError& le : errors) {
    m.e->Add(path, file + " line " + std::to_string(le.line) + ": " + le.message);
  }
  if (!errors.empty()) return std::nullopt;
  return values;
}

// "cidr": ["10.0.0.0/8", ...], "10.0.0.0/8" or {"file": "allow.txt"}.
bool ParseCidrs(const json& v, const std::string& p, MatchCtx& m, Condition* c) {
  std::vector<std::string> texts;
  std::vector<size_t> lines;
  std::string file;
  if (v.is_array()) {
    if (v.empty() || v.size() > kMaxInlineCidrs) {
      m.e->Add(p, "must be an array of 1 to " + std::to_string(kMaxInlineCidrs) +
                      " CIDRs, or {\"file\": \"<path>\"}");
      return false;
    }
    bool bad = false;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        m.e->Add(IndexPath(p, i), "must be a string (got " + JsonTypeName(v[i]) + ")");
        bad = true;
      } else {
        texts.push_back(v[i].get<std::string>());
      }
    }
    if (bad) return false;
  } else if (v.is_string()) {
    texts.push_back(v.get<std::string>());
  } else {
    auto name = FileRef(v, p, "a CIDR, an array of CIDRs or ", m);
    if (!name) return false;
    auto values = ValueFile(*name, p, m, &lines);
    if (!values) return false;
    if (values->empty()) {
      m.e->Add(p, *name + ": no CIDRs in the file");
      return false;
    }
    texts = std::move(*values);
    file = *name;
  }
  const size_t before = m.e->count();
  size_t reported = 0;
  c->cidrs = CidrSet::Build(texts, [&](size_t i, const std::string& why) {
    if (++reported > 20) return;  // one bad file must not flood the log
    if (!file.empty()) {          // the line, never its bytes (a file may hold secrets)
      m.e->Add(p, file + " line " + std::to_string(lines[i]) + ": " + why);
    } else {
      m.e->Add(v.is_array() ? IndexPath(p, i) : p, why + ": \"" + texts[i].substr(0, 64) + "\"");
    }
  });
  if (m.e->count() != before) return false;
  c->op = Condition::Op::kCidr;
  c->text = c->source.spec + " cidr " +
            (file.empty() ? "[" + std::to_string(texts.size()) + " ranges]"
                          : file + " (" + std::to_string(texts.size()) + " ranges)");
  return true;
}

std::vector<Condition> ParseMatch(const json& m, const std::string& path, MatchCtx& ctx, int depth);

void ParseConditionObject(const json& ops, const Source& source, const std::string& path,
                          std::vector<Condition>& out, MatchCtx& m) {
  ConfigErrors& e = *m.e;
  if (ops.empty()) e.Add(path, "needs at least one operator");
  for (const auto& [op, v] : ops.items()) {
    const std::string p = FieldPath(path, op);
    Condition c;
    c.source = source;
    if (op == "equals" || op == "prefix" || op == "suffix") {
      if (!IsScalar(v)) {
        e.Add(p, "must be a string (got " + JsonTypeName(v) + ")");
        continue;
      }
      c.op = op == "equals"   ? Condition::Op::kEquals
             : op == "prefix" ? Condition::Op::kPrefix
                              : Condition::Op::kSuffix;
      c.values.push_back(ScalarText(v));
      c.text = source.spec + " " + op + " " + c.values.front();
    } else if (op == "one_of" && v.is_object()) {
      auto file = FileRef(v, p, "an array of values or ", m);
      if (!file) continue;
      auto values = ValueFile(*file, p, m);
      if (!values) continue;
      c.op = Condition::Op::kInSet;
      c.set = std::make_shared<ValueSet>(std::move(*values));
      c.text = source.spec + " one_of " + *file + " (" + std::to_string(c.set->size()) + " values)";
    } else if (op == "one_of") {
      if (!v.is_array() || v.empty() || v.size() > kMaxMatchValues) {
        e.Add(p, "must be an array of 1 to " + std::to_string(kMaxMatchValues) +
                     " strings, or {\"file\": \"<path>\"}");
        continue;
      }
      bool bad = false;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!IsScalar(v[i])) {
          e.Add(IndexPath(p, i), "must be a string (got " + JsonTypeName(v[i]) + ")");
          bad = true;
        } else {
          c.values.push_back(ScalarText(v[i]));
        }
      }
      if (bad) continue;
      c.op = Condition::Op::kOneOf;
      c.text = source.spec + " one_of [" + std::to_string(c.values.size()) + " values]";
    } else if (op == "cidr") {
      if (!ParseCidrs(v, p, m, &c)) continue;
    } else if (op == "regex") {
      if (!v.is_string()) {
        e.Add(p, "must be a string (got " + JsonTypeName(v) + ")");
        continue;
      }
      const std::string pattern = v.get<std::string>();
      if (pattern.empty() || pattern.size() > kMaxRegexLength) {
        e.Add(p, "must be 1 to " + std::to_string(kMaxRegexLength) + " characters");
        continue;
      }
      RE2::Options options;
      options.set_log_errors(false);
      options.set_max_mem(1 << 20);
      auto re = std::make_shared<RE2>(pattern, options);
      if (!re->ok()) {
        e.Add(p, "invalid regular expression: " + re->error());
        continue;
      }
      c.op = Condition::Op::kRegex;
      c.regex = std::move(re);
      c.text = source.spec + " regex " + pattern;
    } else if (op == "template") {
      auto t = ParseTemplateCondition(v, source, p, e);
      if (!t) continue;
      c = std::move(*t);
    } else if (op == "present" || op == "absent") {
      if (!v.is_boolean()) {
        e.Add(p, "must be true or false (got " + JsonTypeName(v) + ")");
        continue;
      }
      const bool want_present = (op == "present") == v.get<bool>();
      c.op = want_present ? Condition::Op::kPresent : Condition::Op::kAbsent;
      c.text = source.spec + (want_present ? " present" : " absent");
    } else {
      e.Add(p,
            "unknown operator (expected equals, one_of, prefix, suffix, regex, cidr, present, "
            "absent, template)");
      continue;
    }
    out.push_back(std::move(c));
  }
}

// Joins the children's texts: "any of (a; b)".
std::string GroupText(const char* word, const std::vector<Condition>& children) {
  std::string t = std::string(word) + " (";
  for (size_t i = 0; i < children.size(); ++i) t += (i ? "; " : "") + children[i].text;
  if (t.size() > 400) t = t.substr(0, 400) + "...";
  return t + ")";
}

// Several conditions of one match object as one condition (all must hold).
Condition AllOf(std::vector<Condition> inner) {
  if (inner.size() == 1) return std::move(inner.front());
  Condition all;
  all.op = Condition::Op::kAll;
  all.children = std::move(inner);
  all.text = GroupText("all of", all.children);
  return all;
}

// "any": [match, ...] / "all": [match, ...] / "not": match.
std::optional<Condition> ParseComposite(const std::string& word, const json& v,
                                        const std::string& p, MatchCtx& m, int depth) {
  if (depth >= kMaxMatchDepth) {
    m.e->Add(p, "any / all / not nested deeper than " + std::to_string(kMaxMatchDepth) + " levels");
    return std::nullopt;
  }
  Condition c;
  const size_t before = m.e->count();
  if (word == "not") {
    c.op = Condition::Op::kNot;
    std::vector<Condition> inner = ParseMatch(v, p, m, depth + 1);
    if (m.e->count() != before) return std::nullopt;
    c.children.push_back(AllOf(std::move(inner)));
    c.text = "not (" + c.children.front().text + ")";
    return c;
  }
  if (!v.is_array() || v.empty() || v.size() > kMaxConditions) {
    m.e->Add(p, "must be an array of 1 to " + std::to_string(kMaxConditions) +
                    " match objects (got " + JsonTypeName(v) + ")");
    return std::nullopt;
  }
  c.op = word == "any" ? Condition::Op::kAny : Condition::Op::kAll;
  for (size_t i = 0; i < v.size(); ++i) {
    std::vector<Condition> inner = ParseMatch(v[i], IndexPath(p, i), m, depth + 1);
    if (!inner.empty()) c.children.push_back(AllOf(std::move(inner)));
  }
  if (m.e->count() != before) return std::nullopt;
  c.text = GroupText(word == "any" ? "any of" : "all of", c.children);
  return c;
}

std::vector<Condition> ParseMatch(const json& mj, const std::string& path, MatchCtx& m, int depth) {
  ConfigErrors& e = *m.e;
  std::vector<Condition> out;
  if (!mj.is_object()) {
    e.Add(path, "must be an object of {\"<source>\": condition} (got " + JsonTypeName(mj) + ")");
    return out;
  }
  if (mj.empty()) {
    if (depth > 0) e.Add(path, "needs at least one condition");
    return out;
  }
  if (mj.size() > kMaxConditions) {
    e.Add(path, "at most " + std::to_string(kMaxConditions) + " conditions");
    return out;
  }
  m.nodes += mj.size();
  if (m.nodes > kMaxMatchNodes) {
    // Reported once per rule: the count only grows.
    if (m.nodes - mj.size() <= kMaxMatchNodes) {
      e.Add(path, "the rule's match has more than " + std::to_string(kMaxMatchNodes) +
                      " conditions in all");
    }
    return out;
  }
  for (const auto& [spec, v] : mj.items()) {
    const std::string p = FieldPath(path, spec.size() > 64 ? spec.substr(0, 64) + "..." : spec);
    if (spec == "any" || spec == "all" || spec == "not") {
      if (auto c = ParseComposite(spec, v, p, m, depth)) out.push_back(std::move(*c));
      continue;
    }
    Source source;
    std::string why;
    if (spec == "cidr") {
      // Shorthand: the client address ("cidr": [...] is "ip:address": {"cidr": [...]}).
      ParseSource("ip:address", &source, &why);
      Condition c;
      c.source = source;
      if (ParseCidrs(v, p, m, &c)) out.push_back(std::move(c));
      continue;
    }
    if (!ParseSource(spec, &source, &why)) {
      e.Add(p, why);
      continue;
    }
    if (IsScalar(v)) {
      Condition c;
      c.source = source;
      c.op = Condition::Op::kEquals;
      c.values.push_back(ScalarText(v));
      c.text = spec + " equals " + c.values.front();
      out.push_back(std::move(c));
    } else if (v.is_array()) {
      json ops = {{"one_of", v}};
      ParseConditionObject(ops, source, p, out, m);
    } else if (v.is_object()) {
      ParseConditionObject(v, source, p, out, m);
    } else {
      e.Add(p, "must be a string, an array of strings or an object of operators (got " +
                   JsonTypeName(v) + ")");
    }
  }
  return out;
}

struct CostConfig {
  Rule::CostKind kind = Rule::CostKind::kFixed;
  std::string arg;
  int64_t fixed_cost = 1;
  int64_t default_cost = 1;
  std::optional<int64_t> cost_estimate;
  std::optional<int64_t> max_response_cost;
  std::optional<int64_t> abort_cost;
};

// "response_header:<name>" (a response header, or a trailer of that name) or
// "handler"; false when `src` is neither, with *why set when it is a bad one.
bool ParseResponseCostSource(std::string_view src, CostConfig* cost, std::string* why) {
  constexpr std::string_view kPrefix = "response_header:";
  if (src == "handler") {
    cost->kind = Rule::CostKind::kHandler;
    return true;
  }
  if (src.substr(0, kPrefix.size()) != kPrefix) {
    if (src.substr(0, 9) == "response:" || src.substr(0, 9) == "response_") {
      *why = "a response cost is \"response_header:<name>\" (got \"" +
             std::string(src.substr(0, 64)) + "\")";
    }
    return false;
  }
  std::string name(src.substr(kPrefix.size()));
  const bool token = !name.empty() && name.size() <= kMaxResponseFieldLength &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
                     });
  if (!token) {
    *why = "the response field must be 1 to " + std::to_string(kMaxResponseFieldLength) +
           " characters of A-Z a-z 0-9 - _ (got \"" + name.substr(0, 64) + "\")";
    return false;
  }
  cost->kind = Rule::CostKind::kResponse;
  cost->arg = AsciiLowered(name);
  return true;
}

// algorithm_config's "calendar" ("day", "week", "month") and "time_zone" (an
// IANA name, default "UTC", read from /usr/share/zoneinfo now, at load).
std::shared_ptr<const Calendar> ParseCalendar(const json& c, Algorithm algorithm,
                                              const std::string& path, ConfigErrors& e) {
  const size_t before = e.count();
  JsonFields f(c, path, e);
  auto unit_name = f.String("calendar");
  auto zone_name = c.contains("time_zone") ? f.String("time_zone") : "UTC";
  if (algorithm != Algorithm::kFixedWindow) {
    e.Add(FieldPath(path, "calendar"),
          "is only used by fixed_window (got " + std::string(AlgorithmName(algorithm)) + ")");
  }
  CalendarUnit unit{};
  if (unit_name && !ParseCalendarUnit(*unit_name, &unit)) {
    e.Add(FieldPath(path, "calendar"),
          "must be \"day\", \"week\" or \"month\" (got \"" + unit_name->substr(0, 64) + "\")");
  }
  if (e.count() != before || !zone_name) return nullptr;
  auto zone = TimeZone::Load(*zone_name);
  if (!zone.ok() && *zone_name == "UTC") zone = TimeZone::Fixed("UTC", 0);  // no tzdata
  if (!zone.ok()) {
    e.Add(FieldPath(path, "time_zone"), zone.status().message());
    return nullptr;
  }
  return std::make_shared<const Calendar>(unit, std::move(*zone));
}

// algorithm_config.max_delay_ms (leaky_bucket only): ms, or -1 for burst * interval.
void ParseMaxDelay(JsonFields& f, Algorithm algorithm, const std::string& path, LimitSpec* spec,
                   ConfigErrors& e) {
  auto md = f.Number("max_delay_ms");
  if (algorithm != Algorithm::kLeakyBucket) {
    e.Add(FieldPath(path, "max_delay_ms"), "is only used by leaky_bucket");
  } else if (md) {
    if (*md == -1) {
      spec->max_delay = Nanos(-1);
    } else if (*md < 0 || *md > 366.0 * 86400 * 1000) {
      e.Add(FieldPath(path, "max_delay_ms"),
            "must be between 0 and 366 days, or -1 for burst * interval (got " + NumberText(*md) +
                ")");
    } else {
      spec->max_delay = Nanos(static_cast<int64_t>(std::llround(*md * 1e6)));
    }
  }
}

// algorithm_config's cost fields: cost_source (fixed, a request header or
// query parameter, a response header or the handler), fixed_cost,
// default_cost, and for a cost after the response cost_estimate,
// max_response_cost and abort_cost.
void ParseCostFields(JsonFields& f, const json& c, Algorithm algorithm, const std::string& path,
                     CostConfig* cost, ConfigErrors& e) {
  if (auto src = f.String("cost_source")) {
    std::string why;
    if (*src == "fixed") {
      cost->kind = Rule::CostKind::kFixed;
    } else if (ParseResponseCostSource(*src, cost, &why)) {
      if (algorithm == Algorithm::kSlidingLog || c.contains("calendar")) {
        e.Add(FieldPath(path, "cost_source"),
              "a cost after the response needs token_bucket, leaky_bucket, fixed_window "
              "(without calendar) or sliding_window");
      }
    } else if (!why.empty()) {
      e.Add(FieldPath(path, "cost_source"), why);
    } else {
      Source s;
      std::string why;
      if (!ParseSource(*src, &s, &why) ||
          (s.kind != Source::Kind::kHeader && s.kind != Source::Kind::kQuery)) {
        e.Add(FieldPath(path, "cost_source"),
              "must be \"fixed\", \"header:<name>\", \"query:<name>\", "
              "\"response_header:<name>\" or \"handler\" (got \"" +
                  src->substr(0, 64) + "\")");
      } else {
        cost->kind =
            s.kind == Source::Kind::kHeader ? Rule::CostKind::kHeader : Rule::CostKind::kQuery;
        cost->arg = s.arg;
      }
    }
  }
  if (auto fc = f.Whole("fixed_cost", kMaxCost)) cost->fixed_cost = *fc;
  if (auto dc = f.Whole("default_cost", kMaxCost)) cost->default_cost = *dc;
  cost->cost_estimate = f.Whole("cost_estimate", kMaxCost);
  cost->max_response_cost = f.Whole("max_response_cost", kMaxCost);
  cost->abort_cost = f.Whole("abort_cost", kMaxCost);
  const bool after =
      cost->kind == Rule::CostKind::kResponse || cost->kind == Rule::CostKind::kHandler;
  for (const char* field : {"cost_estimate", "max_response_cost", "abort_cost"}) {
    if (!after && c.contains(field)) {
      e.Add(FieldPath(path, field),
            "is only used with a cost after the response (cost_source \"response_header:<name>\" "
            "or \"handler\")");
    }
  }
}

// algorithm_config's window length: window or window_seconds, required by the
// window algorithms unless count and period (the period is then the window) or
// a calendar give it, refused elsewhere.
std::optional<int64_t> ParseWindowLength(const json& c, Algorithm algorithm,
                                         const std::string& path, bool per_period,
                                         std::optional<int64_t> period_ns, bool has_calendar,
                                         ConfigErrors& e) {
  const bool window = IsWindowAlgorithm(algorithm);
  const bool has_period = c.contains("period");
  std::optional<int64_t> window_ns;
  const bool has_ws = c.contains("window_seconds");
  const bool has_w = c.contains("window");
  if (has_ws && has_w) e.Add(FieldPath(path, "window"), "set window or window_seconds, not both");
  if (has_ws) window_ns = DurationNs(c["window_seconds"], FieldPath(path, "window_seconds"), e);
  if (has_w) window_ns = DurationNs(c["window"], FieldPath(path, "window"), e);
  if (window && per_period && (has_ws || has_w)) {
    e.Add(FieldPath(path, has_ws ? "window_seconds" : "window"),
          "set period or window, not both (a window algorithm's period is its window)");
  }
  if (window && has_period) window_ns = period_ns;
  if (window && !has_ws && !has_w && !per_period && !has_calendar) {
    e.Add(FieldPath(path, "window_seconds"), std::string("is required by ") +
                                                 std::string(AlgorithmName(algorithm)) +
                                                 " (or count and period)");
  }
  if (!window && (has_ws || has_w)) {
    e.Add(FieldPath(path, has_ws ? "window_seconds" : "window"),
          std::string("is only used by the window algorithms, not ") +
              std::string(AlgorithmName(algorithm)));
  }
  return window_ns;
}

// algorithm_config -> LimitSpec + cost settings. Returns false if any error was added.
bool ParseAlgorithmConfig(const json& c, Algorithm algorithm, const std::string& path,
                          LimitSpec* spec, CostConfig* cost, ConfigErrors& e) {
  const size_t before = e.count();
  if (!c.is_object()) {
    e.Add(path, "must be an object (got " + JsonTypeName(c) + ")");
    return false;
  }
  JsonFields f(c, path, e);
  f.RejectUnknown({"tokens_per_second", "rps", "count", "period", "burst", "window_seconds",
                   "window", "calendar", "time_zone", "max_delay_ms", "cost_source", "fixed_cost",
                   "default_cost", "cost_estimate", "max_response_cost", "abort_cost"});
  spec->algorithm = algorithm;
  const bool window = IsWindowAlgorithm(algorithm);

  auto tps = f.Number("tokens_per_second");
  auto rps = f.Number("rps");
  const char* rate_field = rps && !tps ? "rps" : "tokens_per_second";
  // A plain double plus a flag: GCC 12 warns (falsely) about optional<double> here.
  bool has_rate = tps.has_value() || rps.has_value();
  double rate = tps ? *tps : (rps ? *rps : 0.0);
  if (tps && rps) {
    e.Add(FieldPath(path, "rps"), "is an alias of tokens_per_second: set only one");
  }
  if (has_rate && !(rate > 0)) {
    e.Add(FieldPath(path, rate_field), "must be > 0 (got " + NumberText(rate) + ")");
    has_rate = false;
  }
  // A count per period: the exact form of a rate (buckets), or another way to
  // write burst per window (window algorithms).
  const bool has_count = c.contains("count"), has_period = c.contains("period");
  std::optional<int64_t> count;
  std::optional<int64_t> period_ns;
  if (has_count) count = f.Whole("count", Limit::kMaxBurst);
  if (has_period) period_ns = PeriodNs(c["period"], FieldPath(path, "period"), e);
  // A quota per calendar day / week / month in a time zone (fixed_window).
  const bool has_calendar = c.contains("calendar");
  if (has_calendar) {
    spec->calendar = ParseCalendar(c, algorithm, path, e);
  } else if (c.contains("time_zone")) {
    e.Add(FieldPath(path, "time_zone"), "is only used with calendar");
  }
  if (has_calendar && (has_period || c.contains("window") || c.contains("window_seconds"))) {
    e.Add(FieldPath(path, "calendar"),
          "set calendar or a period / window, not both (the calendar is the window)");
  } else if (has_count != has_period && !has_calendar) {
    e.Add(FieldPath(path, has_count ? "period" : "count"),
          std::string("is required with ") + (has_count ? "count" : "period") +
              " (a limit is a count per period, e.g. \"count\": 100, \"period\": \"1h\")");
  }
  const bool per_period = has_count || has_period;
  if (per_period && (tps || rps || c.contains("tokens_per_second") || c.contains("rps"))) {
    e.Add(FieldPath(path, "count"),
          std::string("set count and period, or ") + rate_field + ", not both");
  }

  if (window) {
    if (tps || rps) {
      e.Add(FieldPath(path, rate_field),
            std::string("is not used by ") + std::string(AlgorithmName(algorithm)) +
                ": set burst (the quota per window) and window_seconds");
    }
  } else if (!per_period && !tps && !rps && !c.contains("tokens_per_second") &&
             !c.contains("rps")) {
    e.Add(FieldPath(path, "tokens_per_second"),
          "is required (or its alias rps), or count and period");
  }

  const auto burst_it = c.find("burst");
  std::optional<int64_t> burst;
  if (burst_it == c.end()) {
    if (per_period) {
      burst = count;  // the whole count may be used at once (a window's quota)
    } else {
      e.Add(FieldPath(path, "burst"),
            window ? "is required (the quota per window)" : "is required");
    }
  } else {
    burst = f.Whole("burst", Limit::kMaxBurst);
    if (window && per_period) {
      e.Add(FieldPath(path, "burst"), "set count (the quota per period) or burst, not both");
    }
    if (!window && burst && has_rate && static_cast<double>(*burst) < rate) {
      e.Add(FieldPath(path, "burst"),
            "must be >= " + std::string(rate_field) + " (" + NumberText(rate) + ")");
    }
  }

  const bool has_w = c.contains("window");
  const std::optional<int64_t> window_ns =
      ParseWindowLength(c, algorithm, path, per_period, period_ns, has_calendar, e);

  if (c.contains("max_delay_ms")) ParseMaxDelay(f, algorithm, path, spec, e);
  ParseCostFields(f, c, algorithm, path, cost, e);

  if (e.count() != before) return false;
  spec->rate = window || per_period ? 0 : rate;
  spec->burst = *burst;
  if (window && window_ns) spec->window = Nanos(*window_ns);
  if (!window && per_period) {
    spec->count = *count;
    spec->period = Nanos(*period_ns);
  }
  // Core checks what only it knows (representable constants, window bounds).
  for (const LimitError& le : Limit::Validate(*spec)) {
    std::string field = le.field;
    if (field == "rate") field = rate_field;
    if (field == "window") field = has_period ? "period" : has_w ? "window" : "window_seconds";
    if (field == "burst" && burst_it == c.end()) field = "count";  // burst defaulted to count
    if (field == "max_delay") field = "max_delay_ms";
    e.Add(FieldPath(path, field), le.message);
  }
  return e.count() == before;
}

std::optional<RollbackConfig> ParseRollback(const json& r, const std::string& path,
                                            ConfigErrors& e) {
  if (!r.is_object()) {
    e.Add(path, "must be an object (got " + JsonTypeName(r) + ")");
    return std::nullopt;
  }
  const size_t before = e.count();
  JsonFields f(r, path, e);
  f.RejectUnknown({"max_reject_ratio", "max_p99_ms", "max_upstream_error_increase",
                   "max_upstream_p99_ms", "window_seconds", "min_requests"});
  RollbackConfig cfg;
  if (auto v = f.Number("max_reject_ratio")) {
    if (!(*v > 0 && *v < 1)) {
      e.Add(FieldPath(path, "max_reject_ratio"),
            "must be > 0 and < 1 (got " + NumberText(*v) + ")");
    }
    cfg.max_reject_ratio = *v;
  }
  if (auto v = f.Number("max_p99_ms")) {
    if (!(*v > 0 && *v <= 3'600'000)) {
      e.Add(FieldPath(path, "max_p99_ms"),
            "must be > 0 and <= 3600000 (got " + NumberText(*v) + ")");
    } else {
      cfg.max_p99_ns = static_cast<int64_t>(std::ceil(*v * 1e6));
    }
  }
  if (auto v = f.Number("max_upstream_p99_ms")) {
    if (!(*v > 0 && *v <= 3'600'000)) {
      e.Add(FieldPath(path, "max_upstream_p99_ms"),
            "must be > 0 and <= 3600000 (got " + NumberText(*v) + ")");
    } else {
      cfg.max_upstream_p99_ns = static_cast<int64_t>(std::ceil(*v * 1e6));
    }
  }
  if (auto v = f.Number("max_upstream_error_increase")) {
    if (!(*v > 0 && *v < 1)) {
      e.Add(FieldPath(path, "max_upstream_error_increase"),
            "must be > 0 and < 1 (a ratio: 0.05 = 5 points; got " + NumberText(*v) + ")");
    }
    cfg.max_upstream_error_increase = *v;
  }
  if (!r.contains("max_reject_ratio") && !r.contains("max_p99_ms") &&
      !r.contains("max_upstream_error_increase") && !r.contains("max_upstream_p99_ms")) {
    e.Add(path,
          "needs at least one trigger: max_reject_ratio, max_p99_ms, "
          "max_upstream_error_increase or max_upstream_p99_ms");
  }
  if (r.contains("window_seconds")) {
    if (auto ns = DurationNs(r["window_seconds"], FieldPath(path, "window_seconds"), e)) {
      cfg.window_ns = *ns;
    }
  }
  if (auto v = f.Whole("min_requests", int64_t{1} << 40)) cfg.min_requests = *v;
  if (e.count() != before) return std::nullopt;
  return cfg;
}

// "tenants": {"redis_hash": "<key>", "refresh": "60s"}: per-identity limits
// read through options.read_tenant_hash (tollgated: the store's Redis).
std::shared_ptr<const TenantTable> ParseTenantHash(const json& t, const std::string& path,
                                                   Algorithm algorithm, MatchCtx& m) {
  const size_t before = m.e->count();
  JsonFields f(t, path, *m.e);
  TenantHashRef ref;
  auto key = f.String("redis_hash");
  if (key && (key->empty() || key->size() > 512)) f.Error("redis_hash", "must be 1 to 512 bytes");
  if (const json* r = f.Find("refresh")) {
    if (auto ns = DurationNs(*r, f.PathOf("refresh"), *m.e)) {
      if (*ns < 1'000'000'000) f.Error("refresh", "must be at least 1s");
      ref.refresh = Nanos(*ns);
    }
  }
  f.RejectUnknown();
  if (m.e->count() != before || !key) return nullptr;
  ref.key = *key;
  if (!m.options->read_tenant_hash) return std::make_shared<TenantTable>();  // checked only
  std::vector<std::pair<std::string, std::string>> entries;
  if (Status read = m.options->read_tenant_hash(ref, &entries); !read.ok()) {
    m.e->Add(path, "redis hash " + ref.key.substr(0, 64) + ": " + read.message());
    return nullptr;
  }
  std::vector<std::string> errors;
  auto table = TenantTable::FromEntries(entries, algorithm, &errors);
  for (const std::string& why : errors) {
    m.e->Add(path, "redis hash " + ref.key.substr(0, 64) + " " + why);
  }
  return table;
}

// "tenants": "file.csv" or {"file": "file.csv"}: the rule's per-identity limits.
std::shared_ptr<const TenantTable> ParseTenants(const json& t, const std::string& path,
                                                Algorithm algorithm, MatchCtx& m) {
  if (t.is_object() && t.contains("redis_hash")) return ParseTenantHash(t, path, algorithm, m);
  std::optional<std::string> file;
  if (t.is_string()) {
    file = t.get<std::string>();
    if (file->empty() || file->size() > 4096) {
      m.e->Add(path, "must be a path of 1 to 4096 characters");
      return nullptr;
    }
    if (!m.options->files) {
      m.e->Add(path, "files are not read here (the policy was given as text without files)");
      return nullptr;
    }
  } else {
    file = FileRef(t, path, "a file path, {\"redis_hash\": \"<key>\"} or ", m);
    if (!file) return nullptr;
  }
  std::string text, why;
  if (!ReadConfinedFile(m.options->base_dir, *file, &text, &why)) {
    m.e->Add(path, why);
    return nullptr;
  }
  std::vector<LineError> errors;
  auto table = TenantTable::Parse(text, algorithm, &errors);
  for (const LineError& le : errors) {
    m.e->Add(path, *file + (le.line ? " line " + std::to_string(le.line) : "") + ": " + le.message);
  }
  return table;
}

// "action": limit (the default), allow, deny or unlimited; the fields an action
// other than limit has no use for are refused, not ignored.
RuleAction ParseAction(JsonFields& f, const json& j) {
  RuleAction action = RuleAction::kLimit;
  if (auto a = f.String("action")) {
    if (*a == "allow") {
      action = RuleAction::kAllow;
    } else if (*a == "deny") {
      action = RuleAction::kDeny;
    } else if (*a == "unlimited") {
      action = RuleAction::kUnlimited;
    } else if (*a != "limit") {
      f.Error("action", "must be one of limit, allow, deny, unlimited");
    }
  }
  if (action == RuleAction::kLimit) return action;
  const std::string name(RuleActionName(action));
  for (const char* field : {"algorithm", "algorithm_config", "tenants", "rollback", "failure_mode",
                            "missing_key", "refund_on"}) {
    if (j.contains(field)) f.Error(field, "is not used by action " + name);
  }
  if (action != RuleAction::kDeny) {
    for (const char* field : {"mode", "enforce_percent"}) {
      if (j.contains(field)) {
        f.Error(field,
                "is not used by action " + name + " (only limit and deny rules can be shadowed)");
      }
    }
  }
  return action;
}

// algorithm_config of a concurrency rule: {"max_in_flight": N, "lease": "30s"}.
std::optional<LeaseLimit> ParseConcurrencyConfig(const json& c, const std::string& path,
                                                 ConfigErrors& e) {
  if (!c.is_object()) {
    e.Add(path, "must be an object (got " + JsonTypeName(c) + ")");
    return std::nullopt;
  }
  const size_t before = e.count();
  JsonFields f(c, path, e);
  f.RejectUnknown({"max_in_flight", "lease"});
  auto max = f.Whole("max_in_flight", LeaseLimit::kMaxInFlight);
  if (!f.Has("max_in_flight")) {
    f.Error("max_in_flight", "is required (requests in flight at once per key)");
  }
  std::optional<int64_t> lease_ns;
  if (const json* l = f.Find("lease"); l == nullptr) {
    f.Error("lease",
            "is required (how long before a slot whose holder never released comes back, "
            "e.g. \"60s\"; longer than the slowest request)");
  } else {
    lease_ns = PeriodNs(*l, f.PathOf("lease"), e);
  }
  if (e.count() != before || !max || !lease_ns) return std::nullopt;
  auto limit = LeaseLimit::Create(*max, Nanos(*lease_ns));
  if (!limit.ok()) {
    f.Error("lease", limit.status().message());
    return std::nullopt;
  }
  return *limit;
}

// A rule's "headers": a style list as a string ("draft11, x-ratelimit") or an
// array of style names, with ParseHeaderStyles' rules; "none" (or []) sends
// no rate-limit headers for the rule. Returns the HeaderStyleMask, or
// kInheritStyles after reporting an error.
uint8_t ParseRuleHeaders(const json& h, const std::string& path, ConfigErrors& e) {
  const std::string where = FieldPath(path, "headers");
  std::string list;
  if (h.is_string()) {
    list = h.get<std::string>();
  } else if (h.is_array() && h.size() <= 8) {
    if (h.empty()) list = "none";
    for (size_t i = 0; i < h.size(); ++i) {
      if (!h[i].is_string()) {
        e.Add(IndexPath(where, i), "must be a string (got " + JsonTypeName(h[i]) + ")");
        return kInheritStyles;
      }
      list += (i ? "," : "") + h[i].get<std::string>();
    }
  } else {
    e.Add(where,
          "must be a style list: a string (\"draft11,x-ratelimit\") or an array of up to "
          "8 style names (got " +
              JsonTypeName(h) + ")");
    return kInheritStyles;
  }
  std::vector<HeaderStyle> styles;
  std::string why;
  if (!ParseHeaderStyles(list, &styles, &why)) {
    e.Add(where, why);
    return kInheritStyles;
  }
  return HeaderStyleMask(styles);
}

std::string ParseRuleName(JsonFields& f, const json& j, const std::string& path, ConfigErrors& e) {
  std::string name;
  if (auto n = f.String("name")) {
    if (!ValidName(*n)) {
      e.Add(FieldPath(path, "name"), "must be 1 to 64 characters of A-Z a-z 0-9 - _ . :");
    } else {
      name = *n;
    }
  } else if (!j.contains("name")) {
    e.Add(FieldPath(path, "name"), "is required");
  }
  return name;
}

// "limit_keys": 1 to kMaxLimitKeys sources; required for a limit rule.
std::vector<Source> ParseLimitKeys(const json& j, const std::string& path, bool limited,
                                   ConfigErrors& e) {
  std::vector<Source> keys;
  auto lk = j.find("limit_keys");
  if (lk == j.end()) {
    if (limited) e.Add(FieldPath(path, "limit_keys"), "is required (e.g. [\"ip:address\"])");
    return keys;
  }
  if (!lk->is_array() || lk->empty() || lk->size() > kMaxLimitKeys) {
    e.Add(FieldPath(path, "limit_keys"),
          "must be an array of 1 to " + std::to_string(kMaxLimitKeys) + " sources");
    return keys;
  }
  for (size_t i = 0; i < lk->size(); ++i) {
    const json& s = (*lk)[i];
    const std::string p = IndexPath(FieldPath(path, "limit_keys"), i);
    if (!s.is_string()) {
      e.Add(p, "must be a string (got " + JsonTypeName(s) + ")");
      continue;
    }
    Source src;
    std::string why;
    if (!ParseSource(s.get<std::string>(), &src, &why)) {
      e.Add(p, why);
    } else {
      keys.push_back(std::move(src));
    }
  }
  return keys;
}

// A limit rule's numbers: "algorithm" and "algorithm_config" (for a
// concurrency rule, its lease limit, and a fixed_window spec of max_in_flight
// per lease time that only describes it in headers and summaries).
struct RuleLimitFields {
  Algorithm algorithm = Algorithm::kTokenBucket;
  bool concurrency = false;
  LimitSpec spec;
  CostConfig cost;
  std::optional<LeaseLimit> lease;
  bool ok = false;  // the config parsed (always true for allow / deny / unlimited)
};

RuleLimitFields ParseRuleLimit(JsonFields& f, const json& j, const std::string& path, bool limited,
                               ConfigErrors& e) {
  RuleLimitFields out;
  if (auto a = f.String("algorithm")) {
    if (*a == "concurrency") {
      out.concurrency = true;
    } else if (!ParseAlgorithm(*a, &out.algorithm)) {
      e.Add(FieldPath(path, "algorithm"), "unknown algorithm \"" + a->substr(0, 64) +
                                              "\" (expected " + std::string(AlgorithmNameList()) +
                                              " or concurrency)");
    }
  }
  if (!limited) {
    out.ok = true;
    return out;
  }
  auto ac = j.find("algorithm_config");
  if (ac == j.end()) {
    e.Add(FieldPath(path, "algorithm_config"), "is required");
    return out;
  }
  if (!out.concurrency) {
    out.ok = ParseAlgorithmConfig(*ac, out.algorithm, FieldPath(path, "algorithm_config"),
                                  &out.spec, &out.cost, e);
    return out;
  }
  for (const char* field : {"tenants", "refund_on"}) {
    if (j.contains(field)) {
      e.Add(FieldPath(path, field),
            "is not used by a concurrency rule (it holds leases, not tokens)");
    }
  }
  out.lease = ParseConcurrencyConfig(*ac, FieldPath(path, "algorithm_config"), e);
  out.ok = out.lease.has_value();
  if (out.lease) {
    out.spec.algorithm = Algorithm::kFixedWindow;
    out.spec.burst = out.lease->max_in_flight();
    out.spec.window = Nanos(out.lease->lease_ns());
  }
  return out;
}

// "mode", "enforce_percent", "missing_key" and "failure_mode" onto `rule`.
void ParseRuleModes(JsonFields& f, const std::string& path, Rule* rule, ConfigErrors& e) {
  if (auto mode = f.String("mode")) {
    if (*mode == "shadow") {
      rule->shadow = true;
    } else if (*mode != "enforce") {
      e.Add(FieldPath(path, "mode"), "must be \"enforce\" or \"shadow\"");
    }
  }
  if (auto p = f.Number("enforce_percent")) {
    if (*p < 0 || *p > 100) {
      e.Add(FieldPath(path, "enforce_percent"),
            "must be between 0 and 100 (got " + NumberText(*p) + ")");
    }
    rule->enforce_percent = *p;
  }
  if (auto mk = f.String("missing_key")) {
    if (*mk == "shared") {
      rule->missing_key = MissingKey::kShared;
    } else if (*mk != "skip") {
      e.Add(FieldPath(path, "missing_key"), "must be \"skip\" or \"shared\"");
    }
  }
  if (auto fm = f.String("failure_mode")) {
    FailureMode m;
    if ((*fm == "open" || *fm == "closed" || *fm == "degrade") && ParseFailureMode(*fm, &m)) {
      rule->failure_mode = *fm;
      rule->failure_mode_tag = m;
    } else {
      e.Add(FieldPath(path, "failure_mode"), "must be one of open, closed, degrade");
    }
  }
}

// The rule's tier group: "group" if given; otherwise its limit keys (rules
// with the same keys are tiers: the first that matches applies), and for
// allow / deny / unlimited rules the rule alone.
std::string RuleGroup(JsonFields& f, const std::string& path, bool limited, const std::string& name,
                      const std::vector<Source>& keys, ConfigErrors& e) {
  if (auto g = f.String("group")) {
    if (!ValidName(*g)) {
      e.Add(FieldPath(path, "group"), "must be 1 to 64 characters of A-Z a-z 0-9 - _ . :");
    }
    return "group:" + *g;
  }
  if (!limited) return "rule:" + name;  // never a tier of keyed rules
  std::string group = "keys:";
  for (const Source& s : keys) group += s.spec + ",";
  return group;
}

// The cost and refund fields of a parsed limit onto `rule`, with the checks
// that need its limit (a response cost's estimate and bounds, which
// algorithms can refund).
void SetRuleCost(const CostConfig& cost, std::optional<RefundOn> refund_on, const std::string& path,
                 Rule* rule, ConfigErrors& e) {
  rule->cost_kind = cost.kind;
  rule->cost_arg = cost.arg;
  rule->fixed_cost = cost.fixed_cost;
  rule->default_cost = cost.default_cost;
  if (cost.kind == Rule::CostKind::kResponse || cost.kind == Rule::CostKind::kHandler) {
    rule->cost_estimate = cost.cost_estimate.value_or(1);
    rule->max_response_cost = cost.max_response_cost.value_or(
        std::min(kMaxCost, rule->limit.burst() * kDefaultMaxResponseCostBursts));
    const std::string ac = FieldPath(path, "algorithm_config");
    if (rule->cost_estimate > rule->limit.burst()) {
      e.Add(FieldPath(ac, "cost_estimate"),
            "must be at most burst (" + std::to_string(rule->limit.burst()) +
                "): it is charged up front, so a larger one could never be admitted");
    }
    if (rule->default_cost > rule->max_response_cost) {
      e.Add(FieldPath(ac, "default_cost"),
            "must be at most max_response_cost (" + std::to_string(rule->max_response_cost) + ")");
    }
    rule->abort_cost = cost.abort_cost.value_or(rule->max_response_cost);
    if (rule->abort_cost > rule->max_response_cost) {
      e.Add(FieldPath(ac, "abort_cost"),
            "must be at most max_response_cost (" + std::to_string(rule->max_response_cost) + ")");
    }
  }
  rule->refund_on = std::move(refund_on);
  if (rule->refund_on &&
      (rule->limit.algorithm() == Algorithm::kSlidingLog || rule->limit.calendar() != nullptr)) {
    e.Add(FieldPath(path, "refund_on"),
          "refunds need token_bucket, leaky_bucket, fixed_window (without calendar) or "
          "sliding_window");
  }
}

std::optional<Rule> ParseRule(const json& j, const std::string& path, MatchCtx& mctx) {
  ConfigErrors& e = *mctx.e;
  mctx.nodes = 0;
  if (!j.is_object()) {
    e.Add(path, "a rule must be an object (got " + JsonTypeName(j) + ")");
    return std::nullopt;
  }
  const size_t before = e.count();
  JsonFields f(j, path, e);
  f.RejectUnknown({"name",      "description",      "action",    "limit_keys",   "match",
                   "algorithm", "algorithm_config", "tenants",   "mode",         "enforce_percent",
                   "rollback",  "missing_key",      "group",     "failure_mode", "headers",
                   "refund_on", "count_on",         "block_for", "soft",         "response"});
  const RuleAction action = ParseAction(f, j);
  const bool limited = action == RuleAction::kLimit;
  std::string name = ParseRuleName(f, j, path, e);
  (void)f.String("description");
  std::vector<Source> keys = ParseLimitKeys(j, path, limited, e);
  std::vector<Condition> match;
  if (auto m = j.find("match"); m != j.end()) {
    match = ParseMatch(*m, FieldPath(path, "match"), mctx, 0);
  }
  RuleLimitFields lim = ParseRuleLimit(f, j, path, limited, e);
  // A placeholder until the limit is known; the fields below are checked now
  // so that every error of the rule is reported at once.
  Rule rule(PlaceholderLimit());
  ParseRuleModes(f, path, &rule, e);
  if (auto r = j.find("rollback"); r != j.end()) {
    rule.rollback = ParseRollback(*r, FieldPath(path, "rollback"), e);
  }
  if (const json* h = f.Find("headers")) rule.header_styles = ParseRuleHeaders(*h, path, e);
  std::optional<RefundOn> refund_on;
  if (const json* r = f.Find("refund_on"); r != nullptr && !lim.concurrency) {
    refund_on = ParseRefundOn(*r, FieldPath(path, "refund_on"), e);
  }
  ParseAbuseFields(j, path, limited, lim.concurrency, &rule, e);
  ParseAnswerFields(j, path, action, lim.concurrency, &rule, e);
  rule.group = RuleGroup(f, path, limited, name, keys, e);
  // Soft rules are tiers among themselves: a soft rule beside a hard one on
  // the same keys (warn at 1000/day, refuse at 1200/day) is evaluated too.
  if (rule.soft && !j.contains("group")) rule.group.insert(0, "soft,");
  if (auto t = j.find("tenants"); t != j.end() && limited && !lim.concurrency) {
    if (keys.size() != 1) {
      e.Add(FieldPath(path, "tenants"),
            "needs exactly one limit key (the identity the table is keyed by)");
    } else if (lim.ok && e.count() == before) {
      rule.tenants = ParseTenants(*t, FieldPath(path, "tenants"), lim.algorithm, mctx);
    }
  }

  if (e.count() != before || !lim.ok) return std::nullopt;
  auto limit = limited ? Limit::Create(lim.spec) : Result<Limit>(PlaceholderLimit());
  if (!limit.ok()) {
    e.Add(FieldPath(path, "algorithm_config"), limit.status().message());
    return std::nullopt;
  }
  rule.limit = *limit;
  rule.lease = lim.lease;
  rule.name = std::move(name);
  rule.action = action;
  rule.keys = std::move(keys);
  rule.match = std::move(match);
  SetRuleCost(lim.cost, std::move(refund_on), path, &rule, e);
  CheckAbuseFields(path, &rule, e);
  LinkPathParams(path, &rule, e);
  if (e.count() != before) return std::nullopt;
  rule.fingerprint = j.dump();
  return rule;
}

}  // namespace

const Limit& PlaceholderLimit() {
  static const Limit limit = *Limit::Create({.rate = 1, .burst = 1});
  return limit;
}

std::string_view RuleActionName(RuleAction action) {
  switch (action) {
    case RuleAction::kLimit:
      return "limit";
    case RuleAction::kAllow:
      return "allow";
    case RuleAction::kDeny:
      return "deny";
    case RuleAction::kUnlimited:
      return "unlimited";
  }
  return "limit";
}

// ParsePolicy without the version and text.
static ParsedPolicy ParseUnversioned(std::string_view text, const PolicyParseOptions& options) {
  ParsedPolicy out;
  ConfigErrors e(&out.errors);
  MatchCtx mctx{&options, &e};
  if (text.size() > kMaxPolicyBytes) {
    e.Add("", "policy is larger than " + std::to_string(kMaxPolicyBytes >> 20) + " MiB");
    return out;
  }
  if (base::JsonNestingDepth(text) > kMaxJsonDepth) {
    e.Add("", "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return out;
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& ex) {
    std::string what = ex.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    e.Add("", "invalid JSON: " + what);
    return out;
  } catch (const std::exception& ex) {
    e.Add("", std::string("cannot parse: ") + ex.what());
    return out;
  }

  // Three accepted shapes: {"rules": [...]}, [rule, ...], a single rule object.
  const json* rules = nullptr;
  json single;
  std::string base = "rules";
  if (doc.is_object() && doc.contains("rules")) {
    JsonFields f(doc, "", e);
    f.RejectUnknown({"rules", "version", "description", "rollback"});
    if (auto v = doc.find("version"); v != doc.end() && !(v->is_number() && *v == 1)) {
      e.Add("version", "must be 1");
    }
    (void)f.String("description");
    rules = &doc["rules"];
    if (!rules->is_array()) {
      e.Add("rules", "must be an array of rules (got " + JsonTypeName(*rules) + ")");
      return out;
    }
  } else if (doc.is_array()) {
    rules = &doc;
  } else if (doc.is_object()) {
    single = json::array({doc});
    rules = &single;
    base = "";
  } else {
    e.Add("", "a policy must be {\"rules\": [...]}, an array of rules or one rule object (got " +
                  JsonTypeName(doc) + ")");
    return out;
  }
  if (rules->size() > kMaxRules) {
    e.Add(base, "at most " + std::to_string(kMaxRules) + " rules");
    return out;
  }

  auto policy = std::make_shared<Policy>();
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < rules->size(); ++i) {
    const std::string path = base.empty() ? std::string() : IndexPath(base, i);
    auto rule = ParseRule((*rules)[i], path, mctx);
    if (!rule) continue;
    auto [it, inserted] = names.emplace(rule->name, i);
    if (!inserted) {
      e.Add(FieldPath(path, "name"), "duplicate rule name \"" + rule->name + "\" (also " +
                                         IndexPath(base, it->second) + ")");
      continue;
    }
    policy->reads_body = policy->reads_body || RuleReadsBody(*rule);
    policy->rules.push_back(std::move(*rule));
  }
  // The policy-wide rollback guard: for every rule without its own.
  if (doc.is_object() && doc.contains("rules") && doc.contains("rollback")) {
    if (auto fallback = ParseRollback(doc["rollback"], "rollback", e)) {
      const std::string text = doc["rollback"].dump();
      for (Rule& rule : policy->rules) {
        if (rule.rollback) continue;
        rule.rollback = fallback;
        rule.fingerprint += "\x1frollback:" + text;  // a change resets the guard like a rule edit
      }
    }
  }
  if (!out.errors.empty()) return out;

  std::map<std::string, int> groups;
  for (const Rule& r : policy->rules) {
    auto [it, inserted] = groups.emplace(r.group, policy->group_count);
    if (inserted) ++policy->group_count;
    policy->group_of.push_back(it->second);
  }
  out.policy = std::move(policy);
  return out;
}

ParsedPolicy ParsePolicy(std::string_view json_text, const PolicyParseOptions& options) {
  ParsedPolicy out = ParseUnversioned(json_text, options);
  if (!out.policy) return out;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(json_text.data()), json_text.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  out.version = "sha256:";
  for (int i = 0; i < 8; ++i) {
    out.version += kHex[digest[i] >> 4];
    out.version += kHex[digest[i] & 15];
  }
  out.text = std::string(json_text);
  return out;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

ParsedPolicy ParsePolicyFile(const std::string& path, PolicyParseOptions options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ParsedPolicy out;
    out.errors.push_back({"", "cannot read " + path});
    return out;
  }
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPolicyBytes) break;
  }
  if (options.base_dir.empty()) options.base_dir = DirectoryOf(path);
  return ParsePolicy(text, options);
}

std::vector<RuleSummary> SummarizePolicy(const Policy& policy) {
  std::vector<RuleSummary> out;
  for (const Rule& r : policy.rules) {
    RuleSummary s{.name = r.name, .limit = r.limit, .lease = r.lease};
    s.group = r.group;
    for (const Source& k : r.keys) s.limit_keys.push_back(k.spec);
    s.shadow = r.shadow;
    s.enforce_percent = r.enforce_percent;
    s.failure_mode = r.failure_mode;
    s.description = r.lease ? r.lease->ToString()
                    : r.action == RuleAction::kLimit
                        ? r.limit.ToString()
                        : "action=" + std::string(RuleActionName(r.action));
    if (r.tenants) s.description += " tenants=" + std::to_string(r.tenants->size());
    std::string keys;
    for (const Source& k : r.keys) keys += (keys.empty() ? "" : ",") + k.spec;
    s.description += " keys=" + keys;
    if (!r.match.empty()) {
      s.description += " match=";
      for (size_t i = 0; i < r.match.size(); ++i)
        s.description += (i ? " and " : "") + r.match[i].text;
    }
    if (r.shadow) s.description += " mode=shadow";
    s.description += AbuseDescription(r);
    s.description += AnswerDescription(r);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tollgate
