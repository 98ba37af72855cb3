// HostileRedis: a fake Redis on a free loopback port that answers whatever it
// is asked with a broken reply the test picks (wrong types, absurd sizes or
// slot ranges, deep nesting, half a reply, a bulk string without end, or
// nothing at all), to check that tollgate survives a hostile or broken store.
//
// It parses the commands it receives (RESP arrays of bulk strings, bounded)
// and counts connections, so a test can also see when a client closes them.
// One thread serves every connection with poll(); the destructor stops it and
// closes everything. Thread safety: every method may be called from any thread.
#ifndef TOLLGATE_TESTS_TESTING_HOSTILE_REDIS_H_
#define TOLLGATE_TESTS_TESTING_HOSTILE_REDIS_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tollgate::testing {

class HostileRedis {
 public:
  enum class Reply {
    kWrongType,          // ":42" to everything
    kHugeArray,          // "*2147483647" and nothing after it
    kNegativeLength,     // "*-7" / "$-7": lengths no server sends
    kDeepNesting,        // 100000 nested one-element arrays
    kPartial,            // the first half of a plausible reply, then silence
    kEndlessBulk,        // "$1073741824" then bytes for as long as the client reads
    kSilence,            // reads everything, answers nothing
    kHold,               // answers nothing until SetReply: then each held command gets that reply
    kHugeSlotRange,      // CLUSTER SLOTS/SHARDS: slots 0 .. INT64_MAX owned by this server
    kNegativeSlotRange,  // CLUSTER SLOTS/SHARDS: slots -5 .. 100
    kValidTopology,      // CLUSTER SLOTS/SHARDS: all slots owned by this server ("OK" else)
  };
  struct Options {
    Reply reply = Reply::kSilence;
    // SCRIPT LOAD gets a well-formed SHA-1, so clients get past their
    // handshake and meet the hostile reply on their real commands.
    bool answer_script_load = false;
    // Topology replies (CLUSTER SLOTS/SHARDS) always get this reply; other
    // commands get `reply`. Unset: `reply` for everything.
    bool topology_override = false;
    Reply topology = Reply::kValidTopology;
  };

  // Null (with *error) when no socket could be opened.
  static std::unique_ptr<HostileRedis> Start(Options options, std::string* error);
  ~HostileRedis();
  HostileRedis(const HostileRedis&) = delete;
  HostileRedis& operator=(const HostileRedis&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // Changes the reply; leaving kHold answers every held command with `reply`.
  void SetReply(Reply reply);
  // The port the topology replies name as the owner of their slots (0: this
  // server's own), to move slots between fake nodes.
  void SetTopologyPort(int port) { topology_port_ = port; }

  size_t accepted() const { return accepted_.load(); }
  // Connections the client has not closed yet (or that were not reset).
  size_t open_connections() const { return open_.load(); }
  // Commands received (each one's first word, upper case), oldest first.
  std::vector<std::string> commands() const;
  // Whether a command starting with `prefix` ("EVALSHA") has been received.
  bool Received(std::string_view prefix) const;

 private:
  struct Conn;
  explicit HostileRedis(Options options) : options_(options) {}
  void Run();
  void OnCommand(Conn& c, const std::vector<std::string>& argv);
  void Answer(Conn& c, const std::string& cmd, const std::string& sub, Reply reply);
  std::string TopologyReply(Reply reply, bool shards) const;

  Options options_;  // reply changed under mu_
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> accepted_{0};
  std::atomic<size_t> open_{0};
  std::atomic<int> topology_port_{0};
  std::atomic<bool> release_held_{false};  // SetReply left kHold: answer what was held
  mutable std::mutex mu_;                  // guards options_.reply and commands_
  std::vector<std::string> commands_;
  std::thread thread_;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_HOSTILE_REDIS_H_
