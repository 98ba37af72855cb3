// A server process started by an integration fixture (nginx, HAProxy, Caddy): forked with its
// output in a file, killed with the test process (PR_SET_PDEATHSIG) when a ctest timeout ends it,
// waited for until it accepts on its loopback port or exits, and stopped with a signal and a
// bounded wait (then SIGKILL). Each fixture keeps only what is its own: the binary's flags, its
// configuration, and where its log is.
#ifndef TOLLGATE_TESTS_TESTING_CHILD_PROCESS_H_
#define TOLLGATE_TESTS_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tollgate::testing {

struct ChildSpec {
  std::vector<std::string> argv;                         // argv[0] is the binary's path
  std::vector<std::pair<std::string, std::string>> env;  // set in the child before exec
  std::string cwd;                                       // "" = the test's
  std::string output;                                    // stdout + stderr; "" = inherited
};

// The child's pid, or -1 when fork failed. The child exits 126 when it cannot enter `cwd`, 127
// when the exec fails.
pid_t SpawnChild(const ChildSpec& spec);

enum class ChildStart { kListening, kExited, kTimedOut };
// Waits (testing/timing.h's WaitFor: scaled for a slow machine) until 127.0.0.1:`port` accepts
// a connection or `pid` exits (then reaped).
ChildStart WaitListening(pid_t pid, int port, std::chrono::milliseconds deadline);

// SpawnChild, then WaitListening: "" once it listens, else why not, naming `label` and ending
// with `log()` (the child's output). *pid is the child's (-1 once it exited or never started).
std::string SpawnListening(const ChildSpec& spec, const std::string& label, int port,
                           std::chrono::milliseconds deadline, pid_t* pid,
                           const std::function<std::string()>& log);

// Whether 127.0.0.1:`port` accepts a TCP connection now.
bool CanConnect(int port);

// Sends `signal`, waits up to 5 s for the exit, then SIGKILL and waits again; reaps the child.
void StopChild(pid_t pid, int signal);

// The whole file, or "" when it cannot be read.
std::string ReadWholeFile(const std::string& path);

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_CHILD_PROCESS_H_
