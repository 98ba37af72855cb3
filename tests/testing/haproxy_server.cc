#include "testing/haproxy_server.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/child_process.h"

namespace tollgate::testing {

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
  // HAProxy runs from the config's folder, as the example's README says (relative paths in it).
  result.error =
      SpawnListening({.argv = {binary, "-f", config_path.string(), "-db"},
                      .env = env,
                      .cwd = config_path.parent_path().string(),
                      .output = output},
                     "haproxy", port, deadline, &server->pid_, [&] { return server->Output(); });
  if (!result.error.empty()) return result;
  result.server = std::move(server);
  return result;
}

std::string HaproxyServer::Output() const { return ReadWholeFile(dir_.File("output.log")); }

void HaproxyServer::Stop() {
  if (pid_ <= 0) return;
  StopChild(pid_, SIGTERM);
  pid_ = -1;
}

HaproxyServer::~HaproxyServer() { Stop(); }  // then dir_ goes

}  // namespace tollgate::testing
