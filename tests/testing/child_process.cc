#include "testing/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "testing/timing.h"

namespace tollgate::testing {
namespace {

bool Exited(pid_t pid, std::chrono::milliseconds within) {
  return PollUntil(
      [pid] {
        int status;
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        return r == pid || r < 0;
      },
      within, std::chrono::milliseconds(5));
}

}  // namespace

bool CanConnect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

pid_t SpawnChild(const ChildSpec& spec) {
  // Everything the child needs, prepared before fork (no allocation after it).
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!spec.output.empty()) {
    const int fd = ::open(spec.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
  }
  for (const auto& [name, value] : spec.env) ::setenv(name.c_str(), value.c_str(), 1);
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) ::_exit(126);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

ChildStart WaitListening(pid_t pid, int port, std::chrono::milliseconds deadline) {
  bool exited = false;
  const bool done = WaitFor(
      [&] {
        int status;
        exited = ::waitpid(pid, &status, WNOHANG) == pid;
        return exited || CanConnect(port);
      },
      deadline, std::chrono::milliseconds(5));
  if (exited) return ChildStart::kExited;
  return done ? ChildStart::kListening : ChildStart::kTimedOut;
}

std::string SpawnListening(const ChildSpec& spec, const std::string& label, int port,
                           std::chrono::milliseconds deadline, pid_t* pid,
                           const std::function<std::string()>& log) {
  *pid = SpawnChild(spec);
  if (*pid < 0) return "fork failed";
  switch (WaitListening(*pid, port, deadline)) {
    case ChildStart::kListening:
      return "";
    case ChildStart::kExited:
      *pid = -1;
      return label + " exited at startup: " + log();
    case ChildStart::kTimedOut:
      break;
  }
  return label + " did not listen on port " + std::to_string(port) + ": " + log();
}

void StopChild(pid_t pid, int signal) {
  if (pid <= 0) return;
  ::kill(pid, signal);
  if (!Exited(pid, std::chrono::seconds(5))) {
    ::kill(pid, SIGKILL);
    Exited(pid, std::chrono::seconds(5));
  }
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tollgate::testing
