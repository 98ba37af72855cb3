// `tollgate check-config FILE...`: validates policy files.
// Prints every error one a line ("rules[1].algorithm_config.burst: must be >=
// tokens_per_second (100)"), prefixed with the file name when several files
// are given. Exit status: 0 all valid, 2 any invalid or unreadable.
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "tollgate/policy.h"

namespace tollgate::cli {
namespace {

void Help(FILE* out) {
  std::fprintf(out,
               "usage: tollgate check-config [--quiet] [--summary] FILE...\n\n"
               "Validates policy files (docs/configuration.md). Prints every error one a line\n"
               "as <json path>: <reason>; exits 0 when every file is valid, 2 otherwise.\n\n"
               "  --quiet     print nothing for valid files\n"
               "  --summary   print one line per rule of valid files\n");
}

int CheckConfigMain(std::vector<std::string> args) {
  bool quiet = false;
  bool summary = false;
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
