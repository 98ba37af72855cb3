#include "testing/caddy_server.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/child_process.h"

namespace tollgate::testing {

std::string CaddyServer::BinaryPath() {
  for (const char* p : {"/usr/bin/caddy", "/usr/local/bin/caddy"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

CaddyServer::StartResult CaddyServer::Start(const std::string& config, const Env& env, int port,
                                            std::chrono::milliseconds deadline) {
  StartResult result;
  const std::string binary = BinaryPath();
  if (binary.empty()) {
    result.missing = true;
    result.error = "caddy is not installed (apt-get install caddy)";
    return result;
  }
  ScopedTempDir temp("caddy");
  if (temp.path().empty()) {
    result.error = "cannot create a temp dir";
    return result;
  }
  const std::string output = temp.File("output.log");
  const std::string home = temp.path();
  const std::filesystem::path config_path = std::filesystem::absolute(config);
  std::unique_ptr<CaddyServer> server(new CaddyServer(port, std::move(temp)));
  // Nothing written outside the temp dir (XDG_*); run from the config's folder.
  Env child_env = env;
  child_env.emplace_back("XDG_DATA_HOME", home);
  child_env.emplace_back("XDG_CONFIG_HOME", home);
  result.error = SpawnListening(
      {.argv = {binary, "run", "--config", config_path.string(), "--adapter", "caddyfile"},
       .env = std::move(child_env),
       .cwd = config_path.parent_path().string(),
       .output = output},
      "caddy", port, deadline, &server->pid_, [&] { return server->Output(); });
  if (!result.error.empty()) return result;
  result.server = std::move(server);
  return result;
}

std::string CaddyServer::Output() const { return ReadWholeFile(dir_.File("output.log")); }

void CaddyServer::Stop() {
  if (pid_ <= 0) return;
  StopChild(pid_, SIGTERM);
  pid_ = -1;
}

CaddyServer::~CaddyServer() { Stop(); }  // then dir_ goes

}  // namespace tollgate::testing
