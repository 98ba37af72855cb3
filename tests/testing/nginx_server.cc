#include "testing/nginx_server.h"

#include <arpa/inet.h>
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
#include <thread>

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

std::string NginxServer::BinaryPath() {
  for (const char* p : {"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

int NginxServer::FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

NginxServer::StartResult NginxServer::Start(const std::string& http_block, int port,
                                            std::chrono::milliseconds deadline) {
  StartResult result;
  std::string binary = BinaryPath();
  if (binary.empty()) {
    result.missing = true;
    result.error = "nginx is not installed (apt-get install nginx-light)";
    return result;
  }
  ScopedTempDir temp("nginx");
  if (temp.path().empty()) {
    result.error = "cannot create a temp dir";
    return result;
  }
  const std::string dir = temp.path();
  std::filesystem::create_directories(dir + "/logs");
  std::filesystem::create_directories(dir + "/tmp");
  std::ofstream conf(dir + "/nginx.conf");
  // One process: a SIGKILL can never leave an orphaned worker holding the port.
  conf << "master_process off;\n"
       << "worker_processes 1;\n"
       << "error_log " << dir << "/logs/error.log info;\n"
       << "pid " << dir << "/nginx.pid;\n"
       << "events { worker_connections 1024; }\n"
       << "http {\n"
       << "  access_log off;\n"
       << "  client_body_temp_path " << dir << "/tmp/body;\n"
       << "  proxy_temp_path " << dir << "/tmp/proxy;\n"
       << "  fastcgi_temp_path " << dir << "/tmp/fastcgi;\n"
       << "  uwsgi_temp_path " << dir << "/tmp/uwsgi;\n"
       << "  scgi_temp_path " << dir << "/tmp/scgi;\n"
       << http_block << "\n}\n";
  conf.close();

  std::unique_ptr<NginxServer> server(new NginxServer(port, std::move(temp)));
  pid_t pid = ::fork();
  if (pid == 0) {
    // If the test process dies (a ctest timeout), nginx goes with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::string conf_path = dir + "/nginx.conf";
    ::execl(binary.c_str(), binary.c_str(), "-p", dir.c_str(), "-c", conf_path.c_str(), "-g",
            "daemon off;", static_cast<char*>(nullptr));
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
    result.error = "nginx exited at startup: " + server->ErrorLog();
    return result;
  }
  if (!listening) {
    result.error =
        "nginx did not listen on port " + std::to_string(port) + ": " + server->ErrorLog();
    return result;
  }
  result.server = std::move(server);
  return result;
}

std::string NginxServer::ErrorLog() const {
  std::ifstream in(dir_.File("logs/error.log"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void NginxServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGQUIT);
  if (!Exited(pid_, std::chrono::seconds(5))) {
    ::kill(pid_, SIGKILL);
    Exited(pid_, std::chrono::seconds(5));
  }
  pid_ = -1;
}

NginxServer::~NginxServer() { Stop(); }  // then dir_ goes

}  // namespace tollgate::testing
