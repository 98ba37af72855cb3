#include "server/listen_socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <cstdlib>

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

SystemdListenEnv SystemdListenEnv::FromProcess() {
  auto get = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  return {get("LISTEN_PID"), get("LISTEN_FDS"), get("LISTEN_FDNAMES")};
}

namespace {

// A decimal number without sign, spaces or leading junk, at most `max`.
std::optional<long long> SmallDecimal(const std::string& text, long long max) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, err] = std::from_chars(text.data(), end, v);
  if (text.empty() || err != std::errc() || ptr != end || v < 0 || v > max) return std::nullopt;
  return v;
}

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
  SystemdListeners out;
  if (!env.listen_fds) return out;
  if (!env.listen_pid) {
    out.ignored_ = "LISTEN_FDS is set without LISTEN_PID";
    return out;
  }
  std::optional<long long> for_pid = SmallDecimal(*env.listen_pid, 0x7fffffff);
  if (!for_pid) {
    return InvalidArgument("LISTEN_PID: \"" + env.listen_pid->substr(0, 32) +
                           "\" is not a process id");
  }
  if (*for_pid != pid) {
    // sd_listen_fds: the sockets were passed to another process (this one inherited them).
    out.ignored_ =
        "LISTEN_PID " + *env.listen_pid + " is not this process (" + std::to_string(pid) + ")";
    return out;
  }
  UnsetListenEnv();
  std::optional<long long> count = SmallDecimal(*env.listen_fds, kMaxSystemdListenFds);
  if (!count) {
    return InvalidArgument("LISTEN_FDS: \"" + env.listen_fds->substr(0, 32) +
                           "\" must be a number from 0 to " + std::to_string(kMaxSystemdListenFds));
  }
  std::vector<std::string> names;
  if (env.listen_fdnames) {
    std::string_view rest = *env.listen_fdnames;
    for (size_t colon; (colon = rest.find(':')) != std::string_view::npos;) {
      names.emplace_back(rest.substr(0, colon));
      rest.remove_prefix(colon + 1);
    }
    names.emplace_back(rest);
    if (names.size() != size_t(*count)) {
      return InvalidArgument("LISTEN_FDNAMES: " + std::to_string(names.size()) +
                             " names for LISTEN_FDS=" + std::to_string(*count));
    }
  } else {
    // No names: the order of the socket unit's ListenStream= lines.
    const char* by_order[] = {"listen", "admin"};
    for (long long i = 0; i < *count && i < 2; ++i) names.emplace_back(by_order[i]);
    if (*count > 2)
      return InvalidArgument("LISTEN_FDS: more than 2 sockets without LISTEN_FDNAMES");
  }
  for (long long i = 0; i < *count; ++i) {
    const int fd = kSystemdListenFdsStart + int(i);
    const std::string& name = names[size_t(i)];
    const std::string where =
        "systemd socket " + std::to_string(fd) + " (\"" + name.substr(0, 64) + "\")";
    if (name != "listen" && name != "admin") {
      return InvalidArgument(where +
                             ": name it FileDescriptorName=listen or FileDescriptorName=admin");
    }
    for (const auto& p : out.sockets_) {
      if (p.name == name) return InvalidArgument(where + ": the name is passed twice");
    }
    if (std::string what = NotAListeningTcpSocket(fd); !what.empty()) {
      return InvalidArgument(where + " " + what);
    }
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    out.sockets_.push_back({fd, name});
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
