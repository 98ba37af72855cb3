// The local store's state file (LocalStore::Save / Load): encoding and a
// strict, bounded decoder, with no store attached (the fuzz target drives the
// decoder alone and through a store).
//
// Layout (integers little-endian):
//   0   magic "TGLSTATE" (8 bytes)
//   8   u32 version (kStateVersion)
//   12  u32 record count
//   16  u64 body length in bytes
//   24  the records: u8 type, u32 payload length, payload
//   end u32 CRC32C (Castagnoli) of every byte before it
// Records (times are wall-clock ns since the Unix epoch, so a file moves to
// another process, or the same one an hour later, through real time):
//   1 meta    i64 saved_wall_ns, u64 hash secret[4]      exactly once, first
//   2 group   u16 id, the group's bytes (<= kMaxGroupName) ids unique, < kMaxGroups - 1
//   3 bucket  u64 hi, u64 lo, u16 group, i64 TAT (wall)   token / leaky bucket not full
//   4 window  u64 hi, u64 lo, u16 group, u64 state word, i64 idle time (wall)
//   5 log     u64 hi, u64 lo, u16 group, u32 n, n x (i64 at (wall), i64 cost)
// A group id that is not declared must be kMaxGroups - 1 (the shared group).
// A key (hi, lo) appears once in the file.
//
// Errors: DecodeState refuses anything else with kInvalidArgument, naming the
// byte offset and the record ("at byte 52 (record 2): ..."); it never reads
// outside `bytes` and allocates at most in proportion to them.
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_LOCAL_STATE_FILE_H_
#define TOLLGATE_SRC_LOCAL_STATE_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "local/key_hash.h"
#include "tollgate/status.h"

namespace tollgate::internal {

inline constexpr std::string_view kStateMagic = "TGLSTATE";
inline constexpr uint32_t kStateVersion = 1;
inline constexpr size_t kStateHeaderBytes = 24;
inline constexpr size_t kMaxGroupName = 4096;
// A time in the file lies within this of the save's time (about 36 years).
inline constexpr int64_t kMaxStateSpanNs = int64_t{1} << 60;
inline constexpr int64_t kMaxLogCost = int64_t{1} << 40;

enum class StateRecord : uint8_t { kMeta = 1, kGroup = 2, kBucket = 3, kWindow = 4, kLog = 5 };

struct StateLimits {
  size_t max_bytes = size_t{1} << 30;
  size_t max_records = size_t{1} << 24;
  size_t max_log_entries = size_t{1} << 20;  // per log record
  size_t max_groups = 1023;                  // group ids must be below this
};

struct StateImage {
  struct Group {
    uint16_t id = 0;
    std::string name;
  };
  struct Word {
    uint64_t hi = 0, lo = 0;
    uint16_t group = 0;
    bool bucket = true;
    uint64_t state = 0;  // a window's word (a bucket's is its TAT, in `wall`)
    int64_t wall = 0;    // bucket: TAT; window: idle time
  };
  struct LogEntry {
    int64_t at_wall = 0;
    int64_t cost = 0;
  };
  struct Log {
    uint64_t hi = 0, lo = 0;
    uint16_t group = 0;
    std::vector<LogEntry> entries;
  };
  int64_t saved_wall_ns = 0;
  HashSeed seed{};
  std::vector<Group> groups;
  std::vector<Word> words;
  std::vector<Log> logs;
};

// CRC32C of `bytes`, continuing from `crc` (0 to start).
uint32_t Crc32c(std::string_view bytes, uint32_t crc = 0);

// Appends records to a file image and finishes it (header and checksum).
class StateWriter {
 public:
  StateWriter(int64_t saved_wall_ns, const HashSeed& seed);
  void Group(uint16_t id, std::string_view name);
  void Bucket(uint64_t hi, uint64_t lo, uint16_t group, int64_t tat_wall);
  void Window(uint64_t hi, uint64_t lo, uint16_t group, uint64_t state, int64_t idle_wall);
  void Log(uint64_t hi, uint64_t lo, uint16_t group, const std::vector<StateImage::LogEntry>& e);
  size_t records() const { return records_; }
  // The whole file; the writer is spent.
  std::string Finish();

 private:
  void Begin(StateRecord type, uint32_t length);
  std::string out_;
  size_t records_ = 0;
};

std::string EncodeState(const StateImage& image);
Result<StateImage> DecodeState(std::string_view bytes, const StateLimits& limits);

}  // namespace tollgate::internal

#endif  // TOLLGATE_SRC_LOCAL_STATE_FILE_H_
