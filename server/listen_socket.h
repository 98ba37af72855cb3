// Listening sockets that outlive one tollgated: bound with SO_REUSEPORT, so a
// new process can listen on the same port while the old one drains, or
// passed by systemd (socket activation), so `systemctl restart` keeps the
// accept queue (docs/operations.md, "Restarts and state").
//
//   auto passed = TakeSystemdListeners(SystemdListenEnv::FromProcess(), ::getpid());
//   auto main = passed->Take("listen");                 // the fd systemd passed, or
//   auto bound = OpenListener(ioc, "0.0.0.0:8080", "listen", {.reuse_port = true});
//
// TakeSystemdListeners reads the variables with ParseSystemdListenEnv
// (tollgate/systemd_listen.h: sd_listen_fds(3)'s rules, names "listen" and
// "admin", every value hostile), then refuses a descriptor that is not a
// listening TCP socket with kInvalidArgument naming it; nothing is adopted
// then. Adopted descriptors get FD_CLOEXEC, and the variables are unset when
// they were meant for this process, so that nothing started later inherits
// them.
//
// Ownership: a SystemdListeners owns the descriptors not yet taken and closes
// them when destroyed. Thread safety: none; used once at start.
#ifndef TOLLGATE_SERVER_LISTEN_SOCKET_H_
#define TOLLGATE_SERVER_LISTEN_SOCKET_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/status.h"
#include "tollgate/systemd_listen.h"

namespace tollgate::server {

struct ListenOptions {
  // SO_REUSEPORT: another process of the same user may listen on the port too.
  bool reuse_port = false;
};

// Resolves `address` (HOST:PORT), binds and listens. Errors name `what`
// ("listen", "admin"): kInvalidArgument for a malformed address, kUnavailable
// for a name that does not resolve, kConnectionError for a bind or listen
// that fails (a port in use).
Result<boost::asio::ip::tcp::acceptor> OpenListener(boost::asio::io_context& ioc,
                                                    const std::string& address,
                                                    std::string_view what,
                                                    const ListenOptions& options);

// Accepts what is already queued on `acceptor` (non-blocking, at most `limit`
// connections), so that closing it resets none of them: a listener in a
// SO_REUSEPORT group has its own queue, which dies with it.
std::vector<boost::asio::ip::tcp::socket> AcceptQueued(boost::asio::ip::tcp::acceptor& acceptor,
                                                       boost::asio::io_context& ioc, size_t limit);

class SystemdListeners {
 public:
  SystemdListeners() = default;
  SystemdListeners(SystemdListeners&& other) noexcept;
  SystemdListeners& operator=(SystemdListeners&& other) noexcept;
  ~SystemdListeners();

  // The descriptor named `name` as an acceptor on `ioc`, or nullopt when
  // systemd passed none by that name. Each name is taken once.
  std::optional<boost::asio::ip::tcp::acceptor> Take(std::string_view name,
                                                     boost::asio::io_context& ioc);
  bool empty() const { return sockets_.empty(); }
  // Names not taken (systemd passed a socket nobody uses: a config mistake).
  std::vector<std::string> Untaken() const;
  // Why the variables were ignored ("" when they were used or absent).
  const std::string& ignored() const { return ignored_; }

 private:
  friend Result<SystemdListeners> TakeSystemdListeners(const SystemdListenEnv& env, int pid);
  struct Passed {
    int fd = -1;
    std::string name;
  };
  std::vector<Passed> sockets_;
  std::string ignored_;
};

// Reads `env` as sd_listen_fds does for process `pid`; unsets the variables
// in this process when they were meant for it.
Result<SystemdListeners> TakeSystemdListeners(const SystemdListenEnv& env, int pid);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_LISTEN_SOCKET_H_
