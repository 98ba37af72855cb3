// Test helper: the real tollgated binary as a child process (killed with the
// test), its stderr and stdout in files of the test's directory, its ports
// read from the "started" log line.
#ifndef TOLLGATE_TESTS_SERVER_TOLLGATED_PROCESS_H_
#define TOLLGATE_TESTS_SERVER_TOLLGATED_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "testing/timing.h"

namespace tollgate::testing {

// Where the binary is: $TOLLGATE_BINARY_DIR/server/tollgated (ctest sets it).
inline std::string Binary() {
  const char* dir = std::getenv("TOLLGATE_BINARY_DIR");
  return std::string(dir ? dir : "build") + "/server/tollgated";
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline int PortOf(const std::string& address) {
  return std::atoi(address.substr(address.rfind(':') + 1).c_str());
}

// What the child gets besides its arguments: `env` entries ("NAME=value")
// added to the test's environment, where "LISTEN_PID=$PID" becomes the
// child's own pid, and `pass_fd` (>= 0) as its descriptor 3, as systemd
// passes a listening socket.
struct TollgatedInherit {
  std::vector<std::string> env;
  int pass_fd = -1;
};

class Tollgated {
 public:
  using Inherit = TollgatedInherit;
  Tollgated(std::vector<std::string> args, std::string dir, Inherit inherit = {})
      : dir_(std::move(dir)) {
    log_ = dir_ + "/stderr.log";
    // Everything the child needs is built before the fork: no allocation after it.
    std::string bin = Binary();
    std::vector<char*> argv;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env = std::move(inherit.env);
    char* pid_digits = nullptr;
    for (auto& e : env) {
      if (e == "LISTEN_PID=$PID") {
        e = "LISTEN_PID=" + std::string(20, '\0');
        pid_digits = e.data() + 11;
      }
    }
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a killed test
      // A child that cannot open its log files exits at once (126), which the test sees.
      if (std::freopen(log_.c_str(), "w", stderr) == nullptr) ::_exit(126);
      if (std::freopen((dir_ + "/stdout.log").c_str(), "w", stdout) == nullptr) ::_exit(126);
      if (pid_digits != nullptr) {
        char reversed[20];
        int n = 0;
        for (pid_t p = ::getpid(); p > 0 && n < 20; p /= 10) reversed[n++] = char('0' + p % 10);
        for (int i = 0; i < n; ++i) pid_digits[i] = reversed[n - 1 - i];
      }
      if (inherit.pass_fd >= 0) {
        if (inherit.pass_fd == 3) {
          ::fcntl(3, F_SETFD, 0);
        } else if (::dup2(inherit.pass_fd, 3) != 3) {
          ::_exit(125);
        }
      }
      ::execve(bin.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
  }
  ~Tollgated() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Waits (scaled) for the "started" line and fills the ports; false when
  // the process exits first or does not start in time.
  bool WaitStarted() {
    bool started = false;
    WaitFor(
        [&] {
          started = Started();
          return started || Reaped();
        },
        std::chrono::seconds(10));
    return started;
  }
  void Signal(int sig) { ::kill(pid_, sig); }
  // The exit code, or -1 if it did not exit in time (scaled).
  int WaitExit(std::chrono::milliseconds within) {
    WaitFor([&] { return Reaped(); }, within);
    return exit_code_;
  }
  // Its stderr, and how it ended once it has: a test that fails on a dead tollgated says whether
  // it exited with an error or was killed by a signal (an empty log alone cannot tell).
  std::string Log() const {
    std::string text = ReadAll(log_);
    if (exited_) {
      text += signal_ != 0 ? "[tollgated killed by signal " + std::to_string(signal_) + "]\n"
                           : "[tollgated exited with code " + std::to_string(exit_code_) + "]\n";
    }
    return text;
  }
  std::string Stdout() const { return ReadAll(dir_ + "/stdout.log"); }
  int port() const { return port_; }
  int admin_port() const { return admin_port_; }
  int grpc_port() const { return grpc_port_; }
  pid_t pid() const { return pid_; }

 private:
  bool Started() {
    std::istringstream lines(ReadAll(log_));
    std::string line;
    while (std::getline(lines, line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("msg", "") == "started") {
        port_ = PortOf(j["listen"]);
        if (j.contains("admin")) admin_port_ = PortOf(j["admin"]);
        if (j.contains("grpc")) grpc_port_ = PortOf(j["grpc"]);
        return true;
      }
    }
    return false;
  }
  // Whether the process has exited (reaps it and keeps its exit code).
  bool Reaped() {
    int status;
    if (!exited_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    return exited_;
  }

  std::string dir_;
  std::string log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  int signal_ = 0;  // what killed it, when a signal did
  int port_ = 0;
  int admin_port_ = 0;
  int grpc_port_ = 0;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_SERVER_TOLLGATED_PROCESS_H_
