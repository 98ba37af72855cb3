#include "server/listen_socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>

#include "server/config.h"

namespace tollgate::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Result<tcp::acceptor> OpenListener(net::io_context& ioc, const std::string& address,
                                   std::string_view what, const ListenOptions& options) {
  HostPort hp;
  std::string why;
  if (!ParseHostPort(address, &hp, &why)) return InvalidArgument(std::string(what) + ": " + why);
  boost::system::error_code ec;
  net::ip::address ip = net::ip::make_address(hp.host, ec);
  tcp::endpoint endpoint;
  if (ec) {
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
    if (ec || results.empty()) {
      return UnavailableError(std::string(what) + ": cannot resolve " + hp.host);
    }
    endpoint = results.begin()->endpoint();
  } else {
    endpoint = tcp::endpoint(ip, hp.port);
  }
  tcp::acceptor acceptor(ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec && options.reuse_port) {
    const int on = 1;
    if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
      ec.assign(errno, boost::system::system_category());
    }
  }
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return ConnectionError(std::string(what) + ": cannot listen on " + address + ": " +
                           ec.message() +
                           (options.reuse_port ? ""
                                               : " (reuse_port is off: is another tollgated "
                                                 "running on it?)"));
  }
  return acceptor;
}

std::vector<tcp::socket> AcceptQueued(tcp::acceptor& acceptor, net::io_context& ioc, size_t limit) {
  std::vector<tcp::socket> out;
  boost::system::error_code ec;
  acceptor.non_blocking(true, ec);
  while (!ec && out.size() < limit) {
    tcp::socket socket(ioc);
    acceptor.accept(socket, ec);
    if (!ec) out.push_back(std::move(socket));
  }
  return out;
}

namespace {

// "" when `fd` is a listening TCP socket, else what it is instead.
std::string NotAListeningTcpSocket(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "is not open";
  if (!S_ISSOCK(st.st_mode)) return "is not a socket";
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) != 0 ||
      (value != AF_INET && value != AF_INET6)) {
    return "is not an IPv4 or IPv6 socket";
  }
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 || value != SOCK_STREAM) {
    return "is not a TCP (stream) socket";
  }
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value != 1) {
    return "is not listening (ListenStream= in the socket unit)";
  }
  return "";
}

void UnsetListenEnv() {
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
}

}  // namespace

Result<SystemdListeners> TakeSystemdListeners(const SystemdListenEnv& env, int pid) {
  SystemdListenPlan plan = ParseSystemdListenEnv(env, pid, {"listen", "admin"});
  if (plan.for_this_process) UnsetListenEnv();
  if (!plan.error.empty()) return InvalidArgument(plan.error);
  SystemdListeners out;
  out.ignored_ = std::move(plan.ignored);
  for (SystemdListenFd& passed : plan.fds) {
    if (std::string what = NotAListeningTcpSocket(passed.fd); !what.empty()) {
      return InvalidArgument(passed.Describe() + " " + what);
    }
    ::fcntl(passed.fd, F_SETFD, FD_CLOEXEC);
    out.sockets_.push_back({passed.fd, std::move(passed.name)});
  }
  return out;
}

SystemdListeners::SystemdListeners(SystemdListeners&& other) noexcept
    : sockets_(std::move(other.sockets_)), ignored_(std::move(other.ignored_)) {
  other.sockets_.clear();
}

SystemdListeners& SystemdListeners::operator=(SystemdListeners&& other) noexcept {
  if (this != &other) {
    for (auto& p : sockets_) ::close(p.fd);
    sockets_ = std::move(other.sockets_);
    ignored_ = std::move(other.ignored_);
    other.sockets_.clear();
  }
  return *this;
}

SystemdListeners::~SystemdListeners() {
  for (auto& p : sockets_) ::close(p.fd);
}

std::optional<tcp::acceptor> SystemdListeners::Take(std::string_view name, net::io_context& ioc) {
  for (auto it = sockets_.begin(); it != sockets_.end(); ++it) {
    if (it->name != name) continue;
    const int fd = it->fd;
    sockets_.erase(it);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const tcp protocol = addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4();
    boost::system::error_code ec;
    tcp::acceptor acceptor(ioc);
    acceptor.assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      return std::nullopt;
    }
    return acceptor;
  }
  return std::nullopt;
}

std::vector<std::string> SystemdListeners::Untaken() const {
  std::vector<std::string> out;
  for (const auto& p : sockets_) out.push_back(p.name);
  return out;
}

}  // namespace tollgate::server
