#include "rls/rls_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "base/config_errors.h"

namespace tollgate::rls {
namespace {

// Every key envoyproxy/ratelimit accepts anywhere in a file.
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?: a plain YAML scalar that is
// a JSON number as written (01, .5, 1. and 0x1f stay strings).
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  const size_t int_start = i;
  const size_t n = digits();
  if (n == 0 || (n > 1 && s[int_start] == '0')) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// (`metadata` is not here: its mapping holds the user's own keys.)
const std::set<std::string, std::less<>> kUpstreamKeys = {"domain",
                                                          "key",
                                                          "value",
                                                          "descriptors",
                                                          "rate_limit",
                                                          "unit",
                                                          "requests_per_unit",
                                                          "unlimited",
                                                          "shadow_mode",
                                                          "name",
                                                          "replaces",
                                                          "detailed_metric",
                                                          "value_to_metric",
                                                          "share_threshold",
                                                          "quota_mode"};

void AppendJsonString(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += ch;
    } else if (c < 0x20) {
      *out += "\\u00";
      *out += kHex[c >> 4];
      *out += kHex[c & 15];
    } else {
      *out += ch;
    }
  }
  *out += '"';
}

// Whether yaml.v2 resolves plain scalar `v` to a number: an integer as
// strconv.ParseInt(v, 0, 64) reads it (`_` allowed; 0x, 0o / 0, 0b), or a
// float as its yamlStyleFloat ([-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?), or
// .inf / .nan. Linear, without a regex (a key may be long).
bool YamlNumber(std::string_view v) {
  auto digits = [](std::string_view s, std::string_view allowed) {
    return !s.empty() && s.find_first_not_of(allowed) == std::string_view::npos &&
           s.find_first_not_of('_') != std::string_view::npos;
  };
  std::string_view body = v;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  for (std::string_view inf : {".inf", ".Inf", ".INF"}) {
    if (body == inf) return true;
  }
  if (v == ".nan" || v == ".NaN" || v == ".NAN") return true;
  if (body.size() > 2 && body[0] == '0') {
    const std::string_view rest = body.substr(2);
    if (body[1] == 'x' || body[1] == 'X') return digits(rest, "0123456789abcdefABCDEF_");
    if (body[1] == 'b' || body[1] == 'B') return digits(rest, "01_");
    if (body[1] == 'o' || body[1] == 'O') return digits(rest, "01234567_");
  }
  if (digits(body, "0123456789_") && body[0] != '_') return true;
  // The float form: mantissa, then an optional exponent.
  const size_t e = body.find_first_of("eE");
  const std::string_view mantissa = body.substr(0, e);
  if (e != std::string_view::npos) {
    std::string_view exp = body.substr(e + 1);
    if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp.remove_prefix(1);
    if (exp.empty() || exp.find_first_not_of("0123456789") != std::string_view::npos) return false;
  }
  const size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view frac =
      dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  auto all_digits = [](std::string_view s) {
    return s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (!all_digits(whole) || !all_digits(frac)) return false;
  if (dot == std::string_view::npos) return !whole.empty();  // d+ with an exponent
  return !whole.empty() || !frac.empty();                    // d+. / d+.d+ / .d+
}

// What gopkg.in/yaml.v2 (envoyproxy/ratelimit's parser) makes of a mapping
// key that is not a string, printed as upstream's error prints it (Go's %v):
// a plain (unquoted) scalar that YAML 1.1 resolves to null, a boolean, an
// integer or a float, or a collection. nullopt: a string key.
std::optional<std::string> NonStringKey(const YAML::Node& key) {
  if (key.IsSequence()) return "a sequence (" + std::to_string(key.size()) + " items)";
  if (key.IsMap()) return "a mapping (" + std::to_string(key.size()) + " keys)";
  if (key.IsNull()) return "<nil>";
  if (!key.IsScalar() || key.Tag() != "?") return std::nullopt;  // quoted or tagged: a string
  static const std::set<std::string, std::less<>> kNull = {"~", "null", "Null", "NULL"};
  static const std::set<std::string, std::less<>> kTrue = {"y",  "Y",  "yes",  "Yes",  "YES", "on",
                                                           "On", "ON", "true", "True", "TRUE"};
  static const std::set<std::string, std::less<>> kFalse = {
      "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"};
  const std::string& v = key.Scalar();
  if (v.empty() || kNull.count(v) != 0) return "<nil>";
  if (kTrue.count(v) != 0) return "true";
  if (kFalse.count(v) != 0) return "false";
  if (YamlNumber(v)) return v;
  return std::nullopt;
}

class Walker {
 public:
  Walker(std::string source, std::vector<ConfigError>* errors)
      : source_(source), errors_(errors, std::move(source)), whole_file_(errors) {}

  void Error(const YAML::Node& node, const std::string& path, const std::string& message) {
    std::string m = message;
    if (node.IsDefined() && node.Mark().line >= 0) {
      m += " (line " + std::to_string(node.Mark().line + 1) + ")";
    }
    // An error of the whole document (a root key) names the file alone.
    if (path.empty() && !source_.empty()) {
      whole_file_.Add(source_, m);
    } else {
      errors_.Add(path, m);
    }
  }

  // Rejects keys that are neither `allowed` here nor accepted by upstream anywhere.
  void CheckKeys(const YAML::Node& map, const std::string& path,
                 std::initializer_list<std::string_view> allowed) {
    for (const auto& kv : map) {
      // Upstream's message: "config error, key is not of type string: 0.25".
      if (const auto what = NonStringKey(kv.first)) {
        Error(kv.first, path, "config error, key is not of type string: " + *what);
        continue;
      }
      const std::string k = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
      if (kUpstreamKeys.count(k) != 0) continue;  // upstream ignores it here; so do we
      Error(kv.first, Join(path, k), "config error, unknown key '" + k + "'");
    }
  }

  static std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  bool String(const YAML::Node& n, const std::string& path, std::string* out) {
    if (!n.IsDefined() || n.IsNull()) return true;
    if (!n.IsScalar()) {
      Error(n, path, "must be a string");
      return false;
    }
    *out = n.Scalar();
    return true;
  }

  bool Bool(const YAML::Node& n, const std::string& path, bool* out) {
    if (!n.IsDefined() || n.IsNull()) return true;
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
      Error(n, path, "must be true or false");
      return false;
    }
    *out = v;
    return true;
  }

  bool Integer(const YAML::Node& n, const std::string& path, uint64_t max, uint64_t* out) {
    if (!n.IsDefined() || n.IsNull()) return true;
    const std::string s = n.IsScalar() ? n.Scalar() : std::string();
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!n.IsScalar() || s.empty() || ec != std::errc() || end != s.data() + s.size() || v > max) {
      Error(n, path, "must be an integer from 0 to " + std::to_string(max));
      return false;
    }
    *out = v;
    return true;
  }

  void RateLimit(const YAML::Node& n, const std::string& path, RlsRateLimitSpec* rl) {
    if (!n.IsMap()) {
      Error(n, path, "must be a mapping");
      return;
    }
    CheckKeys(n, path, {"algorithm", "burst"});
    std::string unit;
    if (String(n["unit"], Join(path, "unit"), &unit) && !unit.empty() &&
        !ParseUnit(unit, &rl->unit)) {
      Error(n["unit"], Join(path, "unit"), "invalid rate limit unit '" + unit + "'");
    }
    uint64_t rpu = 0;
    if (Integer(n["requests_per_unit"], Join(path, "requests_per_unit"), UINT32_MAX, &rpu)) {
      rl->requests_per_unit = static_cast<uint32_t>(rpu);
    }
    String(n["name"], Join(path, "name"), &rl->name);
    Bool(n["unlimited"], Join(path, "unlimited"), &rl->unlimited);
    const YAML::Node replaces = n["replaces"];
    if (replaces.IsDefined() && !replaces.IsNull()) {
      if (!replaces.IsSequence()) {
        Error(replaces, Join(path, "replaces"), "must be a list of {name: ...}");
      } else {
        for (size_t i = 0; i < replaces.size(); ++i) {
          const std::string rp = Join(path, "replaces") + "[" + std::to_string(i) + "]";
          if (!replaces[i].IsMap()) {
            Error(replaces[i], rp, "must be a mapping {name: ...}");
            continue;
          }
          CheckKeys(replaces[i], rp, {});
          std::string name;
          String(replaces[i]["name"], Join(rp, "name"), &name);
          rl->replaces.push_back(std::move(name));
        }
      }
    }
    std::string algorithm;
    if (String(n["algorithm"], Join(path, "algorithm"), &algorithm) && !algorithm.empty()) {
      Algorithm a;
      if (ParseAlgorithm(algorithm, &a)) {
        rl->algorithm = a;
      } else {
        Error(n["algorithm"], Join(path, "algorithm"),
              "unknown algorithm '" + algorithm + "' (" + std::string(AlgorithmNameList()) + ")");
      }
    }
    uint64_t burst = 0;
    if (Integer(n["burst"], Join(path, "burst"), uint64_t{1} << 40, &burst)) {
      rl->burst = static_cast<int64_t>(burst);
    }
  }

  // A `metadata` value as JSON: mappings, lists, and scalars (plain true/false
  // are booleans, plain numbers numbers, `~`/null null, anything else or
  // quoted a string). The document was bounded before the walk.
  bool Json(const YAML::Node& n, const std::string& path, std::string* out) {
    if (n.IsMap()) {
      *out += '{';
      bool first = true;
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {
          Error(kv.first, path, "metadata keys must be strings");
          return false;
        }
        if (!first) *out += ',';
        first = false;
        AppendJsonString(kv.first.Scalar(), out);
        *out += ':';
        if (!Json(kv.second, Join(path, kv.first.Scalar()), out)) return false;
      }
      *out += '}';
    } else if (n.IsSequence()) {
      *out += '[';
      for (size_t i = 0; i < n.size(); ++i) {
        if (i > 0) *out += ',';
        if (!Json(n[i], path + "[" + std::to_string(i) + "]", out)) return false;
      }
      *out += ']';
    } else if (!n.IsDefined() || n.IsNull()) {
      *out += "null";
    } else {
      const std::string& s = n.Scalar();
      bool b = false;
      double d = 0;
      const bool plain = n.Tag() == "?";
      if (plain && YAML::convert<bool>::decode(n, b)) {
        *out += b ? "true" : "false";
      } else if (plain && IsJsonNumber(s) && YAML::convert<double>::decode(n, d) &&
                 std::isfinite(d)) {
        *out += s;
      } else {
        AppendJsonString(s, out);
      }
    }
    return true;
  }

  void Metadata(const YAML::Node& n, const std::string& path, std::string* out) {
    if (!n.IsDefined() || n.IsNull()) return;
    if (!n.IsMap()) {
      Error(n, path, "must be a mapping");
      return;
    }
    std::string json;
    if (Json(n, path, &json)) *out = std::move(json);
  }

  void Descriptors(const YAML::Node& n, const std::string& path,
                   std::vector<RlsDescriptorSpec>* out, size_t depth) {
    if (!n.IsDefined() || n.IsNull()) return;
    if (!n.IsSequence()) {
      Error(n, path, "must be a list of descriptors");
      return;
    }
    if (depth > 64) {
      Error(n, path, "nested too deeply");
      return;
    }
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      const YAML::Node d = n[i];
      if (!d.IsMap()) {
        Error(d, p, "config error, yaml file contains list of type other than map");
        continue;
      }
      CheckKeys(d, p, {"metadata", "charge_only"});
      RlsDescriptorSpec spec;
      String(d["key"], Join(p, "key"), &spec.key);
      String(d["value"], Join(p, "value"), &spec.value);
      Bool(d["shadow_mode"], Join(p, "shadow_mode"), &spec.shadow_mode);
      Bool(d["quota_mode"], Join(p, "quota_mode"), &spec.quota_mode);
      Bool(d["charge_only"], Join(p, "charge_only"), &spec.charge_only);
      Bool(d["share_threshold"], Join(p, "share_threshold"), &spec.share_threshold);
      Bool(d["detailed_metric"], Join(p, "detailed_metric"), &spec.detailed_metric);
      Bool(d["value_to_metric"], Join(p, "value_to_metric"), &spec.value_to_metric);
      Metadata(d["metadata"], Join(p, "metadata"), &spec.metadata_json);
      const YAML::Node rl = d["rate_limit"];
      if (rl.IsDefined() && !rl.IsNull()) {
        spec.rate_limit.emplace();
        RateLimit(rl, Join(p, "rate_limit"), &*spec.rate_limit);
      }
      Descriptors(d["descriptors"], Join(p, "descriptors"), &spec.descriptors, depth + 1);
      out->push_back(std::move(spec));
    }
  }

 private:
  std::string source_;
  base::ConfigErrors errors_;
  base::ConfigErrors whole_file_;  // no source prefix: the path is the file
};

// YAML aliases make a document a graph: a 2 KB file of anchors, each used ten
// times by the next, is 10^9 nodes to a walk. Before walking, count the nodes
// as a walk sees them (an alias once per use), up to a budget a document
// without aliases never needs (it spends at least two bytes a node), and
// bound the nesting (an alias cannot refer to itself in yaml-cpp, but stay safe).
constexpr size_t kMinYamlNodeBudget = 65536;
constexpr size_t kMaxYamlDepth = 256;

bool WithinBounds(const YAML::Node& n, size_t depth, size_t* budget) {
  if (*budget == 0 || depth > kMaxYamlDepth) return false;
  --*budget;
  if (n.IsSequence()) {
    for (const auto& child : n) {
      if (!WithinBounds(child, depth + 1, budget)) return false;
    }
  } else if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!WithinBounds(kv.first, depth + 1, budget) ||
          !WithinBounds(kv.second, depth + 1, budget)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

RlsYamlResult ParseRlsYaml(std::string_view text, const std::string& source) {
  RlsYamlResult out;
  Walker w(source, &out.errors);
  if (text.size() > kMaxRlsYamlBytes) {
    out.errors.push_back({source, "larger than " + std::to_string(kMaxRlsYamlBytes) + " bytes"});
    return out;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    out.errors.push_back({source, "error loading config file: " + e.msg + " (line " +
                                      std::to_string(e.mark.line + 1) + ")"});
    return out;
  }
  const size_t node_budget = std::max(kMinYamlNodeBudget, text.size());
  size_t budget = node_budget;
  if (!WithinBounds(root, 0, &budget)) {
    out.errors.push_back({source, "expands to more than " + std::to_string(node_budget) +
                                      " nodes or nests deeper than " +
                                      std::to_string(kMaxYamlDepth) +
                                      " levels (YAML aliases used many times over?)"});
    return out;
  }
  RlsDomainSpec spec;
  spec.source = source;
  if (root.IsNull() || !root.IsDefined()) {
    w.Error(root, "domain", "config file cannot have empty domain");
    return out;
  }
  if (!root.IsMap()) {
    w.Error(root, "", "must be a mapping with domain and descriptors");
    return out;
  }
  w.CheckKeys(root, "", {});
  w.String(root["domain"], "domain", &spec.domain);
  w.Descriptors(root["descriptors"], "descriptors", &spec.descriptors, 0);
  if (out.errors.empty()) out.domains.push_back(std::move(spec));
  return out;
}

RlsYamlResult ReadRlsYamlFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  RlsYamlResult out;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& entry : fs::directory_iterator(p, ec)) {
        const std::string ext = entry.path().extension().string();
        if (entry.is_regular_file(ec) && (ext == ".yaml" || ext == ".yml")) {
          in_dir.push_back(entry.path().string());
        }
      }
      if (ec) out.errors.push_back({p, "cannot list directory: " + ec.message()});
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.push_back(p);
    }
  }
  for (const std::string& f : files) {
    std::error_code ec;
    const auto size = fs::file_size(f, ec);
    if (ec) {
      out.errors.push_back({f, "cannot read: " + ec.message()});
      continue;
    }
    if (size > kMaxRlsYamlBytes) {
      out.errors.push_back({f, "larger than " + std::to_string(kMaxRlsYamlBytes) + " bytes"});
      continue;
    }
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) {
      out.errors.push_back({f, "cannot read"});
      continue;
    }
    RlsYamlResult one = ParseRlsYaml(ss.str(), f);
    out.errors.insert(out.errors.end(), one.errors.begin(), one.errors.end());
    for (auto& d : one.domains) out.domains.push_back(std::move(d));
  }
  return out;
}

namespace {

ParsedRlsConfig Compile(RlsYamlResult r, const RlsCompileOptions& options,
                        std::shared_ptr<RlsCounters> counters) {
  if (!r.errors.empty()) {
    ParsedRlsConfig out;
    out.errors = std::move(r.errors);
    return out;
  }
  return CompileRlsConfig(r.domains, options, std::move(counters));
}

}  // namespace

ParsedRlsConfig LoadRlsConfigFiles(const std::vector<std::string>& paths,
                                   const RlsCompileOptions& options,
                                   std::shared_ptr<RlsCounters> counters) {
  return Compile(ReadRlsYamlFiles(paths), options, std::move(counters));
}

ParsedRlsConfig LoadRlsConfigYaml(std::string_view text, const RlsCompileOptions& options,
                                  std::shared_ptr<RlsCounters> counters) {
  return Compile(ParseRlsYaml(text, ""), options, std::move(counters));
}

}  // namespace tollgate::rls
