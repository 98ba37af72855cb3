// Server: tollgated as an object (main.cc is a thin shell around it).
//
//   auto server = Server::Create(config);     // loads policy, store, binds listeners
//   server->HandleSignals();                   // optional: SIGTERM/SIGINT drain, SIGHUP reload
//   server->Start();                           // N I/O threads
//   server->Wait();                            // until shut down and drained
//
// Threads: `threads` workers, each running its own io_context; the acceptors
// live on worker 0 and hand each accepted socket to the next worker in turn,
// so a connection stays on one thread for its whole life (no locks, no
// strands on the request path).
//
// Shutdown (Shutdown(), SIGTERM, SIGINT): stop accepting, close idle
// connections, let in-flight requests finish (their responses carry
// Connection: close) for at most drain_timeout, then close what is left; the
// worker threads exit once they own no connection, and Wait() returns.
//
// Tests create a Server in process with ports 0 and read port()/admin_port().
//
// Thread safety: Shutdown() and Reload() may be called from any thread;
// Start/Wait/HandleSignals from the owning thread. Errors: Create fails with a
// Status whose message lists every problem (policy errors one a line):
// kInvalidArgument when the config or the policy is invalid (tollgated exits
// 2, which systemd does not restart), another code for what may pass on its
// own (a store, an etcd key or an address out of reach, a port in use: exit 1).
#ifndef TOLLGATE_SERVER_SERVER_H_
#define TOLLGATE_SERVER_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "server/config.h"
#include "server/log.h"
#include "tollgate/clock.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"

namespace tollgate::server {

class Server {
 public:
  // `log` null: one is created from config.log_level / log_file. `clock`
  // (borrowed, must outlive the server) is the only time source of the server
  // and what it builds: decisions, the policy reload stamp, connection
  // deadlines, the Date header, /v1/top's window, the start time. `io_clock`
  // (borrowed) times the store's I/O: Redis call and connect deadlines,
  // reconnect backoff, cluster topology timers, the resilient wrapper's call
  // deadline and probes (tollgate/clock.h keeps the two apart).
  static Result<std::unique_ptr<Server>> Create(ServerConfig config,
                                                std::shared_ptr<Logger> log = nullptr,
                                                const Clock* clock = &SystemClock::Instance(),
                                                const Clock* io_clock = &SystemClock::Instance());
  ~Server();  // Shutdown() + Wait()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void HandleSignals();
  void Start();
  void Shutdown();
  void Wait();

  // Re-reads the policy file now; errors leave the old policy live.
  std::vector<ConfigError> Reload();

  uint16_t port() const;
  uint16_t admin_port() const;  // 0 when there is no admin listener
  uint16_t spoe_port() const;   // 0 when there is no SPOE listener (spoe.listen)
  Enforcer& enforcer();
  const ServerConfig& config() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SERVER_H_
