#include "testing/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "testing/timing.h"

namespace tollgate::testing {
namespace {

std::string RenderReply(const redisReply* r) {
  if (r == nullptr) return "";
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out;
      for (size_t i = 0; i < r->elements; ++i) {
        if (i) out += '\n';
        out += RenderReply(r->element[i]);
      }
      return out;
    }
    default:
      return "";
  }
}

// Reaps `pid` if it has exited; true when it is gone.
bool Reaped(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

// Waits (bounded) for the child to exit, polling waitpid.
bool WaitExit(pid_t pid, std::chrono::milliseconds deadline) {
  return PollUntil([pid] { return Reaped(pid); }, deadline);
}

}  // namespace

// The test PKI for Options::tls, written into `dir` by the openssl CLI: EC
// P-256 keys (fast to generate), valid for two days.
std::string MakeTestCertificates(const std::string& dir) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + dir + "'\n" + "openssl req -x509 " + key +
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=tollgate-test-ca\n" + "openssl req -x509 " +
      key + " -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=tollgate-other-ca\n" +
      "printf 'basicConstraints=CA:FALSE\\nsubjectAltName=IP:127.0.0.1,DNS:localhost\\n"
      "extendedKeyUsage=serverAuth\\n' > server.ext\n" +
      "openssl req " + key + " -keyout server.key -out server.csr -subj /CN=localhost\n" +
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile server.ext -out server.pem\n" +
      "printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > client.ext\n" +
      "openssl req " + key +
      " -keyout client.key -out client.csr -subj /CN=tollgate-test-client\n" +
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile client.ext -out client.pem\n";
  const std::string path = dir + "/make-certs.sh";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(script.c_str(), f);
    std::fclose(f);
  } else {
    return "cannot write " + path;
  }
  const std::string cmd = "sh '" + path + "' >'" + dir + "/make-certs.log' 2>&1";
  if (std::system(cmd.c_str()) != 0) return "openssl failed, see " + dir + "/make-certs.log";
  return "";
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

namespace {
bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}
}  // namespace

int FreeClusterPort() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int p = FreeLoopbackPort();
    if (p > 0 && p <= 55535 && PortFree(p + 10000)) return p;
  }
  return -1;
}

std::string RedisServer::BinaryPath() {
  if (const char* env = std::getenv("TOLLGATE_REDIS_SERVER"); env && access(env, X_OK) == 0) {
    return env;
  }
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
    if (access(p, X_OK) == 0) return p;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string all(path);
    size_t start = 0;
    while (start <= all.size()) {
      size_t end = all.find(':', start);
      if (end == std::string::npos) end = all.size();
      std::string candidate = all.substr(start, end - start) + "/redis-server";
      if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  }
  return "";
}

bool RedisServer::Installed() { return !BinaryPath().empty(); }

std::string RedisServer::SentinelBinaryPath() {
  if (const char* env = std::getenv("TOLLGATE_REDIS_SENTINEL"); env && access(env, X_OK) == 0) {
    return env;
  }
  for (const char* p : {"/usr/bin/redis-sentinel", "/usr/local/bin/redis-sentinel"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

RedisServer::StartResult RedisServer::Start(Options options) {
  StartResult result;
  if (!Installed()) {
    result.missing = true;
    result.error = "redis-server is not installed (apt-get install redis-server)";
    return result;
  }
  if (!options.sentinel_config.empty() && SentinelBinaryPath().empty()) {
    result.missing = true;
    result.error = "redis-sentinel is not installed (apt-get install redis-sentinel)";
    return result;
  }
  ScopedTempDir dir("redis");
  if (dir.path().empty()) {
    result.error = "cannot create a temp dir";
    return result;
  }
  std::string last_error;
  if (options.tls && options.tls_pki_dir.empty()) {
    last_error = MakeTestCertificates(dir.path());
    if (!last_error.empty()) {
      result.error = "TLS certificates: " + last_error;
      return result;
    }
  }
  for (int attempt = 0; attempt < 8; ++attempt) {  // retry on port collisions
    int port = options.cluster_bus ? FreeClusterPort() : FreeLoopbackPort();
    if (port <= 0) continue;
    int tls_port = -1;
    if (options.tls) {
      tls_port = FreeLoopbackPort();
      if (tls_port <= 0 || tls_port == port) continue;
    }
    std::unique_ptr<RedisServer> server(new RedisServer(port, tls_port, options, std::move(dir)));
    last_error = server->Launch();
    if (last_error.empty()) {
      result.server = std::move(server);
      return result;
    }
    dir = std::move(server->dir_);  // keep the directory (and certificates) for the next attempt
  }
  result.error = "redis-server did not start: " + last_error;
  return result;
}

RedisServer::RedisServer(int port, int tls_port, Options options, ScopedTempDir dir)
    : port_(port), tls_port_(tls_port), options_(std::move(options)), dir_(std::move(dir)) {}

RedisServer::~RedisServer() { Kill(); }  // then dir_ goes

std::string RedisServer::Launch() {
  const bool sentinel = !options_.sentinel_config.empty();
  std::string bin = sentinel ? SentinelBinaryPath() : BinaryPath();
  std::vector<std::string> args = {bin};
  if (sentinel) {
    // A sentinel needs a config file it can rewrite; the rest goes on the command line.
    const std::string conf = dir_.File("sentinel-" + std::to_string(port_) + ".conf");
    FILE* f = std::fopen(conf.c_str(), "w");
    if (f == nullptr) return "cannot write " + conf;
    for (const auto& line : options_.sentinel_config) std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
    args = {bin, conf};
  }
  const std::vector<std::string> common = {
      "--port",
      std::to_string(port_),
      "--bind",
      "127.0.0.1",
      "--daemonize",
      "no",
      "--dir",
      dir_.path(),
      "--logfile",
      dir_.File(std::string(sentinel ? "sentinel-" : "redis-") + std::to_string(port_) + ".log"),
      "--protected-mode",
      "no"};
  args.insert(args.end(), common.begin(), common.end());
  // A sentinel keeps no data: the persistence settings are a server's only.
  if (!sentinel) {
    for (const char* a : {"--save", "", "--appendonly", "no"}) args.push_back(a);
  }
  if (options_.tls) {
    const std::vector<std::string> tls = {
        "--tls-port",         std::to_string(tls_port_),
        "--tls-cert-file",    PkiFile("server.pem"),
        "--tls-key-file",     PkiFile("server.key"),
        "--tls-ca-cert-file", PkiFile("ca.pem"),
        "--tls-auth-clients", options_.tls_auth_clients ? "yes" : "no"};
    args.insert(args.end(), tls.begin(), tls.end());
  }
  for (const auto& a : options_.extra_args) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    // Die with the test process (even on abort), and never hold its stdout:
    // a runner reading the test's output would otherwise wait for the server.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  paused_ = false;
  bool exited = false;
  const bool answered = WaitFor(
      [&] {
        exited = Reaped(pid_);
        return exited || Ping();
      },
      options_.start_deadline, std::chrono::milliseconds(5));
  if (exited) {
    pid_ = -1;
    return "redis-server exited during start-up (port " + std::to_string(port_) + " taken?), see " +
           dir_.path();
  }
  if (answered) return "";
  Kill();
  return "redis-server did not answer PING on port " + std::to_string(port_) + " in time";
}

bool RedisServer::Ping() const {
  // The server on the port must be our child: another process may have taken
  // the port between FreeLoopbackPort() and our bind (then our child exits).
  bool ok = false;
  const std::string info = Command({"INFO", "server"}, &ok);
  return ok && info.find("process_id:" + std::to_string(pid_) + "\r") != std::string::npos;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  if (paused_) kill(pid_, SIGCONT);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  paused_ = false;
}

void RedisServer::Pause() {
  if (pid_ > 0 && kill(pid_, SIGSTOP) == 0) paused_ = true;
}

void RedisServer::Resume() {
  if (pid_ > 0 && kill(pid_, SIGCONT) == 0) paused_ = false;
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  if (paused_) Resume();
  kill(pid_, SIGTERM);
  if (WaitExit(pid_, std::chrono::milliseconds(5000))) {
    pid_ = -1;
    return;
  }
  Kill();
}

std::string RedisServer::Restart() {
  Kill();
  std::string error;
  for (int attempt = 0; attempt < 50; ++attempt) {  // the port may linger briefly
    error = Launch();
    if (error.empty()) return "";
  }
  return error;
}

std::string RedisServer::Command(const std::vector<std::string>& argv, bool* ok) const {
  if (ok) *ok = false;
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (c == nullptr) return "";
  if (c->err) {
    redisFree(c);
    return "";
  }
  redisSetTimeout(c, timeval{5, 0});
  auto run = [&](const std::vector<std::string>& args) -> redisReply* {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(args.size()), ptrs.data(), lens.data()));
  };
  if (!options_.password.empty()) {
    if (redisReply* r = run({"AUTH", options_.password})) freeReplyObject(r);
  }
  redisReply* reply = run(argv);
  std::string out;
  if (reply != nullptr) {
    out = RenderReply(reply);
    if (ok) *ok = true;
    freeReplyObject(reply);
  }
  redisFree(c);
  return out;
}

}  // namespace tollgate::testing
