// ConfigError: one problem found in a configuration document, named by where it
// is ("rules[1].algorithm_config.burst") and what is wrong with it ("must be >=
// tokens_per_second (100)"). Every parser in tollgate (policy, tollgated's
// config, the Envoy ratelimit YAML import) reports errors in this shape.
//
// ConfigErrors: the collector every configuration parser reports through, so
// that all of them name problems the same way: a path built from field names
// and indexes (`rules[2].algorithm_config.burst`, `store.breaker.cooldown_ms`)
// and a message. Parsers collect every error, never only the first.
//
// Error text quotes user input (field names, values): control bytes in a path
// or message are written as \xNN so that one error stays on one line of a log
// or a terminal.
//
// Thread safety: ConfigError is a plain value; the path helpers are pure
// functions; a ConfigErrors belongs to one parse. Ownership: the collector
// appends to a vector the caller owns and that must outlive it. Implemented in
// tollgate_base (src/base/config_errors.cc).
#ifndef TOLLGATE_CONFIG_ERROR_H_
#define TOLLGATE_CONFIG_ERROR_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {

struct ConfigError {
  std::string path;  // "" when the error is about the whole document
  std::string message;
  std::string ToString() const { return path.empty() ? message : path + ": " + message; }
};

// "a" + "b" -> "a.b"; "" + "b" -> "b".
std::string FieldPath(std::string_view path, std::string_view field);
// "a" + 2 -> "a[2]".
std::string IndexPath(std::string_view path, size_t index);
// `s` with bytes < 0x20 and 0x7f written as \xNN (lower-case hex).
std::string PrintableText(std::string_view s);

class ConfigErrors {
 public:
  explicit ConfigErrors(std::vector<ConfigError>* out) : out_(out) {}
  // For one document of several (a directory of files): every error's path is
  // prefixed with "source: ", so it names the file too.
  ConfigErrors(std::vector<ConfigError>* out, std::string source)
      : out_(out), source_(std::move(source)) {}

  // Appends {PrintableText(path), PrintableText(message)}, path prefixed with the source.
  void Add(std::string_view path, std::string_view message);
  // How many errors the vector holds (including those there before).
  size_t count() const { return out_->size(); }

 private:
  std::vector<ConfigError>* out_;
  std::string source_;
};

}  // namespace tollgate

#endif  // TOLLGATE_CONFIG_ERROR_H_
