// tollgate: check configs, explain decisions, benchmark stores.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

namespace tollgate::cli {
std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace tollgate::cli

namespace {
void Usage(FILE* out) {
  std::fprintf(out, "usage: tollgate <command> [options]\n\ncommands:\n");
  auto commands = tollgate::cli::Registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : commands)
    std::fprintf(out, "  %-14s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(out, "\n`tollgate <command> --help` explains a command's options.\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& c : tollgate::cli::Registry()) {
    if (c.name == name) return c.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::fprintf(stderr, "tollgate: unknown command '%s'\n\n", name.c_str());
  Usage(stderr);
  return 2;
}
