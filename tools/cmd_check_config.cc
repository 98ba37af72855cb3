// `tollgate check-config FILE...`: validates policy files.
// Prints every error one a line ("rules[1].algorithm_config.burst: must be >=
// tokens_per_second (100)"), prefixed with the file name when several files
// are given. Rules that can never apply (PolicyWarnings) are printed as
// "warning: rules[1]: never applies: ..." and do not make a file invalid,
// unless --strict. Exit status: 0 all valid, 2 any invalid or unreadable (or,
// with --strict, any warning).
// `tollgate check-config --server CONFIG` runs tollgated's startup checks on a
// server config (the same function as `tollgated --config CONFIG --check`).
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "tollgate/policy.h"
#if TOLLGATE_CLI_HAVE_SERVER
#include "server/startup_check.h"
#endif

namespace tollgate::cli {
namespace {

void Help(FILE* out) {
  std::fprintf(out,
               "usage: tollgate check-config [--quiet] [--summary] [--strict] FILE...\n"
               "       tollgate check-config --server TOLLGATED_CONFIG\n\n"
               "Validates policy files (docs/configuration.md). Prints every error one a line\n"
               "as <json path>: <reason>; exits 0 when every file is valid, 2 otherwise.\n\n"
               "  --quiet     print nothing for valid files\n"
               "  --summary   print one line per rule of valid files\n"
               "  --strict    a warning (a rule that can never apply) fails the file too\n"
               "  --server    FILE is a tollgated config: run exactly the checks a tollgated\n"
               "              start runs (as tollgated --config FILE --check)\n");
}

int CheckServerConfigFile(const std::string& path, bool quiet) {
#if TOLLGATE_CLI_HAVE_SERVER
  server::ServerConfig config;
  std::vector<ConfigError> errors = server::LoadServerConfigFile(path, &config);
  if (errors.empty()) errors = server::CheckServerConfig(config);
  for (const ConfigError& e : errors) std::printf("%s\n", e.ToString().c_str());
  if (errors.empty() && !quiet) std::printf("%s: ok (tollgated config)\n", path.c_str());
  return errors.empty() ? 0 : 2;
#else
  std::fprintf(stderr, "tollgate check-config: --server needs tollgated, not part of this build\n");
  return 2;
#endif
}

int CheckConfigMain(std::vector<std::string> args) {
  bool quiet = false;
  bool summary = false;
  bool strict = false;
  bool server_config = false;
  std::vector<std::string> files;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      Help(stdout);
      return 0;
    }
    if (a == "--quiet" || a == "-q") {
      quiet = true;
    } else if (a == "--summary") {
      summary = true;
    } else if (a == "--strict") {
      strict = true;
    } else if (a == "--server") {
      server_config = true;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "tollgate check-config: unknown option '%s'\n", a.c_str());
      Help(stderr);
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    Help(stderr);
    return 2;
  }
  if (server_config) {
    if (files.size() != 1) {
      Help(stderr);
      return 2;
    }
    return CheckServerConfigFile(files[0], quiet);
  }
  bool all_ok = true;
  for (const std::string& f : files) {
    const std::string prefix = files.size() > 1 ? f + ": " : "";
    ParsedPolicy p = ParsePolicyFile(f);
    if (!p.policy) {
      all_ok = false;
      for (const ConfigError& e : p.errors) {
        std::printf("%s%s\n", prefix.c_str(), e.ToString().c_str());
      }
      continue;
    }
    const auto rules = SummarizePolicy(*p.policy);
    const std::vector<ConfigError> warnings = PolicyWarnings(*p.policy);
    for (const ConfigError& w : warnings) {
      std::printf("%swarning: %s\n", prefix.c_str(), w.ToString().c_str());
    }
    if (strict && !warnings.empty()) {
      all_ok = false;
      continue;
    }
    if (!quiet) {
      std::printf("%s: ok (%zu rule%s)\n", f.c_str(), rules.size(), rules.size() == 1 ? "" : "s");
    }
    if (summary) {
      for (const RuleSummary& r : rules) {
        std::printf("  %s: %s\n", r.name.c_str(), r.description.c_str());
      }
    }
  }
  return all_ok ? 0 : 2;
}

const Registration kCheckConfig({"check-config", "validate policy files (exit 0 valid, 2 invalid)",
                                 CheckConfigMain});

}  // namespace
}  // namespace tollgate::cli
