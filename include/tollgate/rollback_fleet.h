// RollbackFleet: the rollback guards of a fleet of instances, shared through
// one Redis hash, so that a rule that trips on one instance goes to shadow on
// every instance running the same rule, and a clear on one clears it on all.
//
// The guard itself (its windows and triggers) stays in each instance's
// Enforcer (tollgate/policy.h): an instance trips on what it sees. What the
// fleet shares is the outcome, one record per rule in the hash `key`
// (`<prefix>{rollback}`: one Cluster slot):
//
//   field  the rule name
//   value  "<epoch> <at_ms> <tripped|cleared> <fingerprint> <trigger> <origin>\n<reason>"
//
// `epoch` is the hash's own counter (field "#epoch", HINCRBY inside the
// publish script), so every transition of the fleet has its own number and
// the highest is the newest; `at_ms` is Redis TIME; `fingerprint` (16 hex
// digits) names the rule's definition: an instance adopts a record only for a
// rule whose own fingerprint is the same, so a changed rule starts with a
// fresh guard everywhere, as it does on one instance.
//
// What an instance does:
//  - Publish: a transition it made itself (its guard tripped) is queued, the
//    latest per rule, and sent by the fleet's thread at once. PublishNow sends
//    one on the caller's thread (an operator's clear or trip, whose answer says
//    whether the fleet has it); a failed send is queued for the thread.
//  - The publish script keeps a trip already recorded for the same
//    fingerprint (the first instance's trigger and reason stand, no new epoch);
//    any other transition gets the next epoch.
//  - Every `interval` (and after each send) the thread reads the hash with
//    bounded HSCAN pages (tollgate/redis_hash.h) and hands each record newer
//    than the last it saw for that rule to `adopt`, skipping rules with a
//    transition of its own still queued (that transition will be newer). The
//    record a publish returns is adopted the same way, so an instance always
//    ends in the fleet's newest state even when a read and its own action
//    cross.
//
// Hostile Redis: each reply is type-checked and bounded (at most max_records
// fields, 64-byte names, 1 KiB values); a record that does not parse is
// skipped and counted (never adopted), a failed read or send leaves every
// guard as it is and is retried on the next tick. Nothing waits longer than
// the store's call timeout per command.
//
// Thread safety: every method may be called from any thread. `adopt` runs on
// the fleet's thread or on PublishNow's caller, one call at a time, and must
// not call back into the fleet. Ownership: the fleet owns its thread; the
// destructor stops and joins it; `command` must stay usable until then.
#ifndef TOLLGATE_ROLLBACK_FLEET_H_
#define TOLLGATE_ROLLBACK_FLEET_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/redis_hash.h"
#include "tollgate/status.h"

namespace tollgate {

// One rule's guard as the fleet recorded it last.
struct RollbackRecord {
  std::string rule;
  int64_t epoch = 0;         // the fleet's transition number: higher is newer
  int64_t at_ms = 0;         // Redis TIME (ms since the Unix epoch) when written
  bool tripped = false;      // tripped, else cleared
  uint64_t fingerprint = 0;  // the rule's definition where it was written
  std::string trigger;       // "reject_ratio", "latency_p99", ..., "admin"
  std::string origin;        // the instance that wrote it
  std::string reason;        // in words; empty when cleared
};

// A transition this instance made.
struct RollbackChange {
  std::string rule;
  uint64_t fingerprint = 0;
  bool tripped = false;
  std::string trigger;  // 1..32 of [a-z0-9_]
  std::string reason;   // sanitised to printable ASCII, cut to kMaxRollbackReason
};

inline constexpr size_t kMaxRollbackRuleName = 64;
inline constexpr size_t kMaxRollbackReason = 256;
inline constexpr size_t kMaxRollbackOrigin = 256;
inline constexpr size_t kMaxRollbackValue = 1024;

// Parses one field of the hash (the rule name) and its value; kInvalidArgument
// says what is wrong. The reserved field "#epoch" is not a record.
Result<RollbackRecord> ParseRollbackRecord(std::string_view rule, std::string_view value);
// The value the publish script writes for `record` (tests, the fuzz target).
std::string FormatRollbackRecord(const RollbackRecord& record);

struct RollbackFleetOptions {
  std::string key = "tollgate:{rollback}";  // the hash; keep the {hash tag} on Cluster
  std::string instance_id;                  // our records' origin; empty: DefaultInstanceId
  Nanos interval{std::chrono::seconds(1)};  // between reads of the hash
  const Clock* clock = nullptr;             // times the interval (an I/O clock); null: system
  size_t max_records = 10'000;              // fields read at most
};

struct RollbackFleetStats {
  uint64_t reads = 0;             // successful reads of the hash
  uint64_t read_failures = 0;     // reads that failed (Redis down, hostile reply)
  uint64_t publishes = 0;         // transitions sent
  uint64_t publish_failures = 0;  // sends that failed (queued again)
  uint64_t bad_records = 0;       // records skipped because they did not parse
  uint64_t adopted = 0;           // records handed to `adopt`
  size_t pending = 0;             // transitions queued now
  int64_t last_read_ns = 0;       // clock Now() of the last good read; 0: none yet
  std::string last_error;         // the last failure's message, bounded
};

class RollbackFleet {
 public:
  using Adopt = std::function<void(const RollbackRecord& record)>;

  // Validates the options (key 1..512 bytes, instance id 1..256 printable
  // bytes without spaces, interval at least 10 ms). Does not touch Redis.
  static Result<std::unique_ptr<RollbackFleet>> Create(RollbackFleetOptions options,
                                                       RedisCommand command, Adopt adopt);
  ~RollbackFleet();
  RollbackFleet(const RollbackFleet&) = delete;
  RollbackFleet& operator=(const RollbackFleet&) = delete;

  // Starts the thread; its first pass (send, read, adopt) runs at once.
  void Start();
  // Stops and joins the thread (idempotent; the destructor does it too):
  // after Stop returns, `adopt` is called only from PublishNow and Sync.
  void Stop();
  // Queues `change` (replacing a queued one for the same rule) and wakes the
  // thread. Never blocks on Redis: safe on a decision's path.
  void Publish(RollbackChange change);
  // Sends `change` now and adopts the record the script returns (the fleet's
  // state for the rule afterwards); on failure queues it and returns why.
  // Blocks for one round trip.
  Result<RollbackRecord> PublishNow(RollbackChange change);
  // One pass of the thread: sends what is queued, reads the hash, adopts the
  // new records. Returns the first failure. For tests and the first start.
  Status Sync();

  RollbackFleetStats stats() const;
  const std::string& instance_id() const;
  const std::string& key() const;

  class Impl;

 private:
  explicit RollbackFleet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate

#endif  // TOLLGATE_ROLLBACK_FLEET_H_
