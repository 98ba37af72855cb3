#include "cluster/redis_cluster.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "testing/timing.h"

namespace tollgate::testing {
namespace {

std::string RedisCli() {
  for (const char* p : {"/usr/bin/redis-cli", "/usr/local/bin/redis-cli"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// Runs argv with output to `log`, waiting at most `deadline`; returns the exit code or -1.
int RunBounded(std::vector<std::string> args, const std::string& log,
               std::chrono::milliseconds deadline) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (PollUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, deadline,
                std::chrono::milliseconds(20))) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

}  // namespace

RedisCluster::StartResult RedisCluster::Start(Options options) {
  StartResult result;
  if (!RedisServer::Installed() || RedisCli().empty()) {
    result.missing = true;
    result.error = "redis-server or redis-cli is not installed";
    return result;
  }
  auto cluster = std::unique_ptr<RedisCluster>(new RedisCluster());
  const int total = options.masters * (1 + options.replicas_per_master);
  for (int i = 0; i < total; ++i) {
    RedisServer::Options so;
    so.cluster_bus = true;
    so.extra_args = {"--cluster-enabled",
                     "yes",
                     "--cluster-config-file",
                     "nodes.conf",
                     "--cluster-node-timeout",
                     std::to_string(options.node_timeout_ms),
                     "--cluster-require-full-coverage",
                     "no",
                     "--cluster-allow-replica-migration",
                     "no"};
    auto s = RedisServer::Start(so);
    if (!s.server) {
      result.error = s.error;
      result.missing = s.missing;
      return result;
    }
    cluster->nodes_.push_back(std::move(s.server));
  }
  std::vector<std::string> args = {RedisCli(), "--cluster", "create"};
  for (auto& n : cluster->nodes_) args.push_back("127.0.0.1:" + std::to_string(n->port()));
  args.push_back("--cluster-replicas");
  args.push_back(std::to_string(options.replicas_per_master));
  args.push_back("--cluster-yes");
  const std::string log = cluster->nodes_[0]->dir() + "/cluster-create.log";
  const int rc = RunBounded(args, log, Scaled(std::chrono::seconds(60)));
  if (rc != 0) {
    result.error =
        "redis-cli --cluster create failed (exit " + std::to_string(rc) + "), see " + log;
    return result;
  }
  if (!cluster->WaitHealthy(Scaled(std::chrono::seconds(30)))) {
    result.error = "cluster did not reach cluster_state:ok";
    return result;
  }
  result.cluster = std::move(cluster);
  return result;
}

std::string RedisCluster::url() const {
  std::string u = "redis-cluster://";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i) u += ',';
    u += "127.0.0.1:" + std::to_string(nodes_[i]->port());
  }
  return u;
}

std::string RedisCluster::NodeId(size_t i) { return nodes_[i]->Command({"CLUSTER", "MYID"}); }

int RedisCluster::MasterOfSlot(int slot) {
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    bool ok = false;
    const std::string nodes = n->Command({"CLUSTER", "NODES"}, &ok);
    if (!ok) continue;
    size_t start = 0;
    while (start < nodes.size()) {
      size_t end = nodes.find('\n', start);
      if (end == std::string::npos) end = nodes.size();
      const std::string line = nodes.substr(start, end - start);
      start = end + 1;
      if (line.find("master") == std::string::npos || line.find("fail") != std::string::npos) {
        continue;
      }
      // Fields: id ip:port@bus flags master ping pong epoch state slots...
      std::vector<std::string> f;
      size_t p = 0;
      while (p < line.size()) {
        size_t q = line.find(' ', p);
        if (q == std::string::npos) q = line.size();
        f.push_back(line.substr(p, q - p));
        p = q + 1;
      }
      for (size_t k = 8; k < f.size(); ++k) {
        if (f[k].empty() || f[k][0] == '[') continue;
        const size_t dash = f[k].find('-');
        const int lo = std::stoi(f[k].substr(0, dash));
        const int hi = dash == std::string::npos ? lo : std::stoi(f[k].substr(dash + 1));
        if (slot < lo || slot > hi) continue;
        const std::string addr = f[1].substr(0, f[1].find('@'));
        const int port = std::stoi(addr.substr(addr.rfind(':') + 1));
        for (size_t i = 0; i < nodes_.size(); ++i) {
          if (nodes_[i]->port() == port) return static_cast<int>(i);
        }
      }
    }
    return -1;
  }
  return -1;
}

bool RedisCluster::WaitHealthy(std::chrono::milliseconds deadline) {
  return PollUntil(
      [&] {
        for (auto& n : nodes_) {
          if (!n->running()) continue;
          const std::string info = n->Command({"CLUSTER", "INFO"});
          if (info.find("cluster_state:ok") == std::string::npos ||
              info.find("cluster_slots_ok:16384") == std::string::npos) {
            return false;
          }
        }
        return true;
      },
      deadline, std::chrono::milliseconds(50));
}

}  // namespace tollgate::testing
