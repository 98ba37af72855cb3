// The `tollgate` CLI's subcommand registry. Each cmd_*.cc file registers one
// subcommand with a static Registration; main.cc dispatches on argv[1].
#ifndef TOLLGATE_TOOLS_COMMAND_H_
#define TOLLGATE_TOOLS_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

namespace tollgate::cli {

struct Command {
  std::string name;     // "check-config", "bench", "explain"
  std::string summary;  // one line for `tollgate --help`
  // Receives the arguments after the subcommand name; returns the exit code.
  std::function<int(std::vector<std::string> args)> run;
};

std::vector<Command>& Registry();

struct Registration {
  explicit Registration(Command c) { Registry().push_back(std::move(c)); }
};

}  // namespace tollgate::cli

#endif  // TOLLGATE_TOOLS_COMMAND_H_
