#include "testing/haproxy_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/timing.h"

namespace tollgate::testing {
namespace {

bool CanConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

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

std::string HaproxyServer::BinaryPath() {
  for (const char* p : {"/usr/sbin/haproxy", "/usr/local/sbin/haproxy", "/usr/bin/haproxy"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

HaproxyServer::StartResult HaproxyServer::Start(const std::string& config, const Env& env, int port,
                                                std::chrono::milliseconds deadline) {
  StartResult result;
  const std::string binary = BinaryPath();
  if (binary.empty()) {
    result.missing = true;
    result.error = "haproxy is not installed (apt-get install haproxy)";
    return result;
  }
  ScopedTempDir temp("haproxy");
  if (temp.path().empty()) {
    result.error = "cannot create a temp dir";
    return result;
  }
  const std::string output = temp.File("output.log");
  const std::filesystem::path config_path = std::filesystem::absolute(config);
  std::unique_ptr<HaproxyServer> server(new HaproxyServer(port, std::move(temp)));
  const pid_t pid = ::fork();
  if (pid == 0) {
    // If the test process dies (a ctest timeout), HAProxy goes with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    if (::chdir(config_path.parent_path().c_str()) != 0) ::_exit(126);
    ::execl(binary.c_str(), binary.c_str(), "-f", config_path.c_str(), "-db",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (pid < 0) {
    result.error = "fork failed";
    return result;
  }
  server->pid_ = pid;
  bool exited = false;
  const bool listening = WaitFor(
      [&] {
        int status;
        exited = ::waitpid(pid, &status, WNOHANG) == pid;
        return exited || CanConnect(port);
      },
      deadline, std::chrono::milliseconds(5));
  if (exited) {
    server->pid_ = -1;
    result.error = "haproxy exited at startup: " + server->Output();
    return result;
  }
  if (!listening) {
    result.error =
        "haproxy did not listen on port " + std::to_string(port) + ": " + server->Output();
    return result;
  }
  result.server = std::move(server);
  return result;
}

std::string HaproxyServer::Output() const {
  std::ifstream in(dir_.File("output.log"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void HaproxyServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (!Exited(pid_, std::chrono::seconds(5))) {
    ::kill(pid_, SIGKILL);
    Exited(pid_, std::chrono::seconds(5));
  }
  pid_ = -1;
}

HaproxyServer::~HaproxyServer() { Stop(); }  // then dir_ goes

}  // namespace tollgate::testing
