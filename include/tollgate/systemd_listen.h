// systemd socket activation's environment, read as sd_listen_fds(3) reads it
// (no libsystemd): which descriptors a service manager passed and under which
// names. A pure function over the three variables: it opens, checks and
// changes no descriptor and no environment, so the caller decides what to do
// with the plan (tollgated: server/listen_socket.h checks each descriptor is a
// listening TCP socket, then adopts it).
//
//   SystemdListenPlan plan = ParseSystemdListenEnv(SystemdListenEnv::FromProcess(), ::getpid(),
//                                                  {"listen", "admin"});
//   if (plan.for_this_process) unset LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES;
//   if (!plan.error.empty()) refuse to start; plan.fds: {3, "listen"}, {4, "admin"}
//
// The rules: without LISTEN_FDS nothing was passed. LISTEN_PID must be a
// decimal process id; when it names another process the variables were
// inherited and are ignored (`ignored` says why). LISTEN_FDS counts
// descriptors from kSystemdListenFdsStart (at most kMaxSystemdListenFds);
// LISTEN_FDNAMES names them, one colon-separated name each
// (FileDescriptorName= in the socket unit); without it they take the
// accepted names in order. Every value is hostile: a number that is not plain
// decimal or is out of range, a name list of the wrong length, a name that is
// not accepted or is passed twice, is refused with `error` naming the
// variable or the descriptor, and no descriptor is offered then. Quoted input
// in a message is cut (32 bytes of a number, 64 of a name) and its control
// bytes written as \xNN.
//
// Thread safety: pure functions (FromProcess reads the environment).
// Implemented in tollgate_base (src/base/systemd_listen.cc).
#ifndef TOLLGATE_SYSTEMD_LISTEN_H_
#define TOLLGATE_SYSTEMD_LISTEN_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

// The three variables as the process received them (nullopt: unset).
struct SystemdListenEnv {
  std::optional<std::string> listen_pid;
  std::optional<std::string> listen_fds;
  std::optional<std::string> listen_fdnames;
  static SystemdListenEnv FromProcess();
};

// The first descriptor systemd passes.
inline constexpr int kSystemdListenFdsStart = 3;
// More than this many passed descriptors is refused.
inline constexpr int kMaxSystemdListenFds = 16;

struct SystemdListenFd {
  int fd = -1;
  std::string name;  // one of the accepted names
  // "systemd socket 3 (\"listen\")": how messages name it.
  std::string Describe() const;
};

struct SystemdListenPlan {
  // LISTEN_PID named this process: the variables were meant for it (and should
  // be unset, so that nothing it starts inherits them), even when refused.
  bool for_this_process = false;
  std::vector<SystemdListenFd> fds;  // in descriptor order; empty on an error
  std::string ignored;               // why the variables were ignored; "" otherwise
  std::string error;                 // why they were refused; "" when accepted
};

// Reads `env` for process `pid`. `names`: the names the caller accepts, in the
// order given to unnamed descriptors (at most that many without
// LISTEN_FDNAMES).
SystemdListenPlan ParseSystemdListenEnv(const SystemdListenEnv& env, long long pid,
                                        std::initializer_list<std::string_view> names);

}  // namespace tollgate

#endif  // TOLLGATE_SYSTEMD_LISTEN_H_
