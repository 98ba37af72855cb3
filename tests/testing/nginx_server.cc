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

#include "testing/child_process.h"

namespace tollgate::testing {

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
  ChildSpec spec;  // nginx writes its own error log (ErrorLog)
  spec.argv = {binary, "-p", dir, "-c", dir + "/nginx.conf", "-g", "daemon off;"};
  result.error = SpawnListening(spec, "nginx", port, deadline, &server->pid_,
                                [&] { return server->ErrorLog(); });
  if (!result.error.empty()) return result;
  result.server = std::move(server);
  return result;
}

std::string NginxServer::ErrorLog() const { return ReadWholeFile(dir_.File("logs/error.log")); }

void NginxServer::Stop() {
  if (pid_ <= 0) return;
  StopChild(pid_, SIGQUIT);
  pid_ = -1;
}

NginxServer::~NginxServer() { Stop(); }  // then dir_ goes

}  // namespace tollgate::testing
