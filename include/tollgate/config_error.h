// ConfigError: one problem found in a configuration document, named by where it
// is ("rules[1].algorithm_config.burst") and what is wrong with it ("must be >=
// tokens_per_second (100)"). Every parser in tollgate (policy, tollgated's
// config, the Envoy ratelimit YAML import) reports errors in this shape.
//
// Thread safety: a plain value.
#ifndef TOLLGATE_CONFIG_ERROR_H_
#define TOLLGATE_CONFIG_ERROR_H_

#include <string>

namespace tollgate {

struct ConfigError {
  std::string path;  // "" when the error is about the whole document
  std::string message;
  std::string ToString() const { return path.empty() ? message : path + ": " + message; }
};

}  // namespace tollgate

#endif  // TOLLGATE_CONFIG_ERROR_H_
