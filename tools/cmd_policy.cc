// `tollgate policy diff OLD NEW`: what changes, rule by rule, when NEW replaces
// OLD; the same summary tollgated's admin API returns for a dry run
// (DiffPolicies). Exit 0 with or without changes, 1 if either file is invalid
// (every error printed, one a line), 2 on a usage error.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "tollgate/policy.h"

namespace tollgate::cli {
namespace {

void Help(FILE* out) {
  std::fprintf(out,
               "usage: tollgate policy diff OLD.json NEW.json\n\n"
               "Prints one line per rule that NEW adds, removes, raises, lowers or otherwise\n"
               "changes relative to OLD (rules are matched by name), or \"no changes\".\n");
}

bool Load(const std::string& path, std::shared_ptr<const Policy>* out) {
  ParsedPolicy parsed = ParsePolicyFile(path);
  for (const ConfigError& e : parsed.errors) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), e.ToString().c_str());
  }
  *out = std::move(parsed.policy);
  return *out != nullptr;
}

int Run(std::vector<std::string> args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    Help(stdout);
    return 0;
  }
  if (args.size() != 3 || args[0] != "diff") {
    Help(stderr);
    return 2;
  }
  std::shared_ptr<const Policy> before, after;
  const bool ok_before = Load(args[1], &before);
  const bool ok_after = Load(args[2], &after);
  if (!ok_before || !ok_after) return 1;
  std::fputs(FormatPolicyDiff(DiffPolicies(*before, *after)).c_str(), stdout);
  return 0;
}

const Registration kPolicy{
    {"policy", "diff two policy files: rules added, removed, raised, lowered", Run}};

}  // namespace
}  // namespace tollgate::cli
