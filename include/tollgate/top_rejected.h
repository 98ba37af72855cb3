// TopRejected: the identities rejected most often per rule, over a recent window.
//
// Each rule keeps two space-saving sketches (Metwally et al.): the current
// window and the previous one. A sketch tracks at most `capacity` identities;
// when full, a new identity replaces the one with the smallest count and
// inherits that count as its error bound, so every identity that was rejected
// more than total/capacity times in the window is guaranteed to be listed, and
// each listed count overestimates the truth by at most its `error`. Windows
// rotate every `window`, so Top() covers between one and two windows.
//
// Memory is bounded: capacity entries per rule, keys cut to kMaxKeyBytes, and
// at most kMaxRules rules (rejections for further rules are counted as dropped).
// These identities are client data: they are served on the admin listener only,
// never as metric labels.
//
// Thread safety: all methods are safe to call concurrently (one mutex; it is
// only taken for rejections, which are the rare path). SpaceSaving alone is
// not thread-safe. Implemented in tollgate_runtime (src/runtime/top_rejected.cc).
#ifndef TOLLGATE_TOP_REJECTED_H_
#define TOLLGATE_TOP_REJECTED_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tollgate {

class SpaceSaving {
 public:
  struct Entry {
    std::string key;
    uint64_t count = 0;
    uint64_t error = 0;  // count may overestimate the true count by at most this
  };
  explicit SpaceSaving(size_t capacity) : capacity_(capacity) {}
  void Add(std::string_view key, uint64_t weight = 1);
  // Entries by count, highest first; at most n.
  std::vector<Entry> Top(size_t n) const;
  const std::vector<Entry>& entries() const { return entries_; }
  void Clear() {
    entries_.clear();
    index_.clear();
  }

 private:
  size_t capacity_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

class TopRejected {
 public:
  static constexpr size_t kMaxKeyBytes = 200;
  static constexpr size_t kMaxRules = 256;

  TopRejected(size_t capacity, int64_t window_ns) : capacity_(capacity), window_ns_(window_ns) {}

  void Record(std::string_view rule, std::string_view key, int64_t now_ns);

  struct RuleTop {
    std::string rule;
    std::vector<SpaceSaving::Entry> top;  // counts summed over both windows
  };
  std::vector<RuleTop> Top(size_t n, int64_t now_ns);
  uint64_t dropped() const;

 private:
  struct Windows {
    explicit Windows(size_t capacity) : current(capacity), previous(capacity) {}
    SpaceSaving current;
    SpaceSaving previous;
  };
  void RotateLocked(int64_t now_ns);

  const size_t capacity_;
  const int64_t window_ns_;
  mutable std::mutex mu_;  // guards everything below
  int64_t window_start_ns_ = INT64_MIN;
  std::map<std::string, Windows, std::less<>> rules_;
  uint64_t dropped_ = 0;
};

}  // namespace tollgate

#endif  // TOLLGATE_TOP_REJECTED_H_
