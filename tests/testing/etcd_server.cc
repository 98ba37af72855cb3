#include "testing/etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "runtime/etcd_reply.h"
#include "testing/redis_server.h"  // FreeLoopbackPort
#include "testing/timing.h"

namespace tollgate::testing {
namespace {

bool Reaped(pid_t pid) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

// Decodes a chunked body; "" when it is malformed.
std::string Dechunk(std::string_view in) {
  std::string out;
  while (true) {
    const size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos) return "";
    const size_t n = std::strtoul(std::string(in.substr(0, eol)).c_str(), nullptr, 16);
    if (n == 0) return out;
    if (in.size() < eol + 2 + n + 2) return "";
    out.append(in.substr(eol + 2, n));
    in.remove_prefix(eol + 2 + n + 2);
  }
}

// Runs `command` through the shell: its stdout and stderr; *ok on exit 0.
std::string Run(const std::string& command, bool* ok) {
  *ok = false;
  std::string out;
  FILE* p = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  *ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return out;
}

// The last lines of etcd's log, for an error message.
std::string LogTail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 800 ? text.substr(text.size() - 800) : text;
}

}  // namespace

std::string EtcdServer::BinaryPath() {
  if (const char* env = std::getenv("TOLLGATE_ETCD_SERVER"); env && access(env, X_OK) == 0) {
    return env;
  }
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

EtcdServer::StartResult EtcdServer::Start(std::chrono::milliseconds start_deadline) {
  return Start(Options{}, start_deadline);
}

EtcdServer::StartResult EtcdServer::Start(Options options,
                                          std::chrono::milliseconds start_deadline) {
  StartResult result;
  if (BinaryPath().empty()) {
    result.missing = true;
    result.error = "etcd is not installed (Debian: etcd-server)";
    return result;
  }
  const int client = FreeLoopbackPort();
  int peer = FreeLoopbackPort();
  for (int i = 0; i < 10 && peer == client; ++i) peer = FreeLoopbackPort();
  if (client < 0 || peer < 0 || peer == client) {
    result.error = "no free loopback ports";
    return result;
  }
  std::unique_ptr<EtcdServer> s(new EtcdServer(client, peer, start_deadline));
  s->options_ = std::move(options);
  if (s->options_.tls) {
    ::mkdir(s->pki().c_str(), 0700);
    result.error = MakeTestCertificates(s->pki());
    if (!result.error.empty()) return result;
    // etcd's JSON gateway refuses a client certificate with a CommonName
    // (it could not act as that user): the policy source's has none. With
    // --client-cert-auth the gateway dials etcd's gRPC with etcd's own
    // certificate: it must be good for clientAuth too.
    const std::string issue =
        " && openssl x509 -req -CA ca.pem -CAkey ca.key -CAcreateserial -days 2";
    const std::string key = "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    bool ok = false;
    const std::string out = Run(
        "cd '" + s->pki() + "' && printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=" +
            "clientAuth\\n' > gateway-client.ext && " + key +
            " -keyout gateway-client.key -out gateway-client.csr -subj /O=tollgate-gateway" +
            issue + " -in gateway-client.csr -extfile gateway-client.ext -out gateway-client.pem" +
            " && printf 'basicConstraints=CA:FALSE\\nsubjectAltName=IP:127.0.0.1,DNS:localhost" +
            "\\nextendedKeyUsage=serverAuth,clientAuth\\n' > etcd.ext && " + key +
            " -keyout etcd.key -out etcd.csr -subj /CN=etcd" + issue +
            " -in etcd.csr -extfile etcd.ext -out etcd.pem",
        &ok);
    if (!ok) {
      result.error = "openssl (gateway client certificate): " + out;
      return result;
    }
  }
  result.error = s->Launch();
  if (result.error.empty()) result.server = std::move(s);
  return result;
}

EtcdServer::ClusterResult EtcdServer::StartCluster(int n,
                                                   std::chrono::milliseconds start_deadline) {
  ClusterResult result;
  if (BinaryPath().empty()) {
    result.missing = true;
    result.error = "etcd is not installed (Debian: etcd-server)";
    return result;
  }
  std::vector<int> ports;
  for (int i = 0; i < 2 * n; ++i) {
    int p = FreeLoopbackPort();
    for (int tries = 0; tries < 10 && std::find(ports.begin(), ports.end(), p) != ports.end();
         ++tries) {
      p = FreeLoopbackPort();
    }
    if (p < 0 || std::find(ports.begin(), ports.end(), p) != ports.end()) {
      result.error = "no free loopback ports";
      return result;
    }
    ports.push_back(p);
  }
  std::string initial;
  for (int i = 0; i < n; ++i) {
    initial += (i ? "," : "") + std::string("m") + std::to_string(i) +
               "=http://127.0.0.1:" + std::to_string(ports[size_t(2 * i + 1)]);
  }
  std::vector<std::unique_ptr<EtcdServer>> members;
  for (int i = 0; i < n; ++i) {
    members.emplace_back(
        new EtcdServer(ports[size_t(2 * i)], ports[size_t(2 * i + 1)], start_deadline));
    members.back()->name_ = "m" + std::to_string(i);
    members.back()->initial_cluster_ = initial;
    result.error = members.back()->Spawn();
    if (!result.error.empty()) return result;
  }
  for (auto& m : members) {
    result.error = m->WaitHealthy();
    if (!result.error.empty()) return result;
  }
  result.members = std::move(members);
  return result;
}

EtcdServer::EtcdServer(int client_port, int peer_port, std::chrono::milliseconds start_deadline)
    : client_port_(client_port), peer_port_(peer_port), start_deadline_(start_deadline) {}

EtcdServer::~EtcdServer() { Kill(); }

std::string EtcdServer::Launch() {
  std::string error = Spawn();
  return error.empty() ? WaitHealthy() : error;
}

std::string EtcdServer::Spawn() {
  const std::string client = (options_.tls ? "https" : "http") + std::string("://127.0.0.1:") +
                             std::to_string(client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> args = {
      BinaryPath(),
      "--name=" + name_,
      "--data-dir=" + dir_.File("data"),
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=" + (initial_cluster_.empty() ? name_ + "=" + peer : initial_cluster_)};
  if (options_.tls) {
    args.push_back("--cert-file=" + pki() + "/etcd.pem");
    args.push_back("--key-file=" + pki() + "/etcd.key");
    if (options_.client_cert_auth) {
      args.push_back("--client-cert-auth");
      args.push_back("--trusted-ca-file=" + pki() + "/ca.pem");
    }
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  const std::string log_path = dir_.File("etcd.log");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // etcd logs to stderr: into the temp dir (quoted in errors), never the test's output.
    const int null = open("/dev/null", O_RDONLY);
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (null >= 0) dup2(null, 0);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  return "";
}

std::string EtcdServer::WaitHealthy() {
  const std::string log_path = dir_.File("etcd.log");
  bool exited = false;
  const bool healthy = WaitFor(
      [&] {
        exited = Reaped(pid_);
        return exited || Healthy();
      },
      start_deadline_, std::chrono::milliseconds(20));
  if (exited) {
    pid_ = -1;
    return "etcd exited during start-up (ports taken?): " + LogTail(log_path);
  }
  if (healthy) return "";
  Kill();
  return "etcd did not become healthy in time: " + LogTail(log_path);
}

void EtcdServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void EtcdServer::Pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void EtcdServer::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string EtcdServer::Restart() {
  Kill();
  return Launch();
}

bool EtcdServer::Healthy() const {
  bool ok = false;
  if (options_.tls) {
    const std::string out =
        Run("curl -s --max-time 5 --cacert " + pki() + "/ca.pem --cert " + pki() +
                "/client.pem --key " + pki() + "/client.key https://" + endpoint() + "/health",
            &ok);
    return ok && out.find("\"health\":\"true\"") != std::string::npos;
  }
  const std::string body = Post("/v3/maintenance/status", "{}", &ok);
  return ok && body.find("\"header\"") != std::string::npos;
}

std::string EtcdServer::Post(const std::string& path, const std::string& body, bool* ok) const {
  if (ok) *ok = false;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  const auto timeout = Scaled(std::chrono::milliseconds(5000));
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(client_port_));
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                                "Content-Type: application/json\r\nConnection: close\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                                body;
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
      char buf[16384];
      ssize_t n;
      while (response.size() < (8 << 20) && (n = recv(fd, buf, sizeof buf, 0)) > 0) {
        response.append(buf, size_t(n));
      }
    }
  }
  close(fd);
  const size_t head_end = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 200", 0) != 0 || head_end == std::string::npos) return "";
  std::string head = response.substr(0, head_end);
  for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
  std::string out = response.substr(head_end + 4);
  if (head.find("transfer-encoding: chunked") != std::string::npos) out = Dechunk(out);
  if (ok) *ok = true;
  return out;
}

std::string EtcdServer::Etcdctl(const std::string& args, bool* ok,
                                const std::string& stdin_file) const {
  std::string command = "ETCDCTL_API=3 etcdctl --command-timeout=10s --endpoints=" +
                        std::string(options_.tls ? "https://" : "http://") + endpoint();
  if (options_.tls) {
    command += " --cacert=" + pki() + "/ca.pem --cert=" + pki() + "/client.pem --key=" + pki() +
               "/client.key";
  }
  if (!root_password_.empty()) command += " --user=root:" + root_password_;
  command += " " + args;
  if (!stdin_file.empty()) command += " < '" + stdin_file + "'";
  return Run(command, ok);
}

std::string EtcdServer::EnableAuth(const std::string& root_password, const std::string& user,
                                   const std::string& password, const std::string& key) {
  const std::vector<std::string> steps = {"user add root:" + root_password,
                                          "user grant-role root root",
                                          "user add " + user + ":" + password,
                                          "role add policy-rw",
                                          "role grant-permission policy-rw readwrite " + key,
                                          "user grant-role " + user + " policy-rw",
                                          "auth enable"};
  for (const std::string& args : steps) {
    bool ok = false;
    const std::string out = Etcdctl(args, &ok);
    // Granting root the root role: etcd 3.4 creates it with the user (an error, not a failure).
    if (!ok && args != "user grant-role root root") return "etcdctl " + args + ": " + out;
  }
  root_password_ = root_password;
  return "";
}

int64_t EtcdServer::Put(const std::string& key, const std::string& value) const {
  bool ok = false;
  if (options_.tls || !root_password_.empty()) {
    const std::string file = dir_.File("put-value");
    if (FILE* f = std::fopen(file.c_str(), "w")) {
      std::fwrite(value.data(), 1, value.size(), f);
      std::fclose(f);
    }
    const std::string out = Etcdctl("-w json put '" + key + "'", &ok, file);
    const size_t brace = out.find('{');
    if (!ok || brace == std::string::npos) return -1;
    auto parsed = etcd::ParseRangeReply(out.substr(brace));  // {"header": {"revision": N}}
    return parsed.ok() && parsed->revision > 0 ? parsed->revision : -1;
  }
  const std::string reply = Post("/v3/kv/put", etcd::PutRequest(key, value), &ok);
  if (!ok) return -1;
  auto parsed = etcd::ParseRangeReply(reply);  // a put reply is a header, as a range's
  return parsed.ok() && parsed->revision > 0 ? parsed->revision : -1;
}

bool EtcdServer::Compact(int64_t revision) const {
  bool ok = false;
  Post("/v3/kv/compaction", R"({"revision":")" + std::to_string(revision) + R"("})", &ok);
  return ok;
}

}  // namespace tollgate::testing
