#include "tollgate/top_rejected.h"

#include <algorithm>

namespace tollgate {

void SpaceSaving::Add(std::string_view key, uint64_t weight) {
  if (capacity_ == 0) return;
  auto it = index_.find(std::string(key));
  if (it != index_.end()) {
    entries_[it->second].count += weight;
    return;
  }
  if (entries_.size() < capacity_) {
    index_.emplace(std::string(key), entries_.size());
    entries_.push_back({std::string(key), weight, 0});
    return;
  }
  // Replace the minimum: it becomes this key with the old count as error bound.
  size_t min = 0;
  for (size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].count < entries_[min].count) min = i;
  }
  Entry& e = entries_[min];
  index_.erase(e.key);
  e.error = e.count;
  e.count += weight;
  e.key = std::string(key);
  index_.emplace(e.key, min);
}

std::vector<SpaceSaving::Entry> SpaceSaving::Top(size_t n) const {
  std::vector<Entry> out = entries_;
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.count != b.count ? a.count > b.count : a.key < b.key;
  });
  if (out.size() > n) out.resize(n);
  return out;
}

void TopRejected::RotateLocked(int64_t now_ns) {
  if (window_start_ns_ == INT64_MIN) {
    window_start_ns_ = now_ns;
    return;
  }
  if (now_ns - window_start_ns_ < window_ns_) return;
  bool skipped_whole_window = now_ns - window_start_ns_ >= 2 * window_ns_;
  for (auto& [rule, w] : rules_) {
    w.previous = std::move(w.current);
    w.current = SpaceSaving(capacity_);
    if (skipped_whole_window) w.previous.Clear();
  }
  window_start_ns_ = now_ns;
}

void TopRejected::Record(std::string_view rule, std::string_view key, int64_t now_ns) {
  std::lock_guard lock(mu_);
  RotateLocked(now_ns);
  auto it = rules_.find(rule);
  if (it == rules_.end()) {
    if (rules_.size() >= kMaxRules) {
      ++dropped_;
      return;
    }
    it = rules_.emplace(std::string(rule), Windows(capacity_)).first;
  }
  it->second.current.Add(key.substr(0, kMaxKeyBytes));
}

std::vector<TopRejected::RuleTop> TopRejected::Top(size_t n, int64_t now_ns) {
  std::lock_guard lock(mu_);
  RotateLocked(now_ns);
  std::vector<RuleTop> out;
  for (const auto& [rule, w] : rules_) {
    SpaceSaving merged(2 * capacity_);
    for (const auto* s : {&w.previous, &w.current}) {
      for (const auto& e : s->entries()) merged.Add(e.key, e.count);
    }
    // Carry the error bounds: merged counts are sums, errors add up too.
    std::vector<SpaceSaving::Entry> top = merged.Top(n);
    for (auto& e : top) {
      e.error = 0;
      for (const auto* s : {&w.previous, &w.current}) {
        bool found = false;
        uint64_t min_count = UINT64_MAX;
        for (const auto& se : s->entries()) {
          min_count = std::min(min_count, se.count);
          if (se.key == e.key) {
            e.error += se.error;
            found = true;
          }
        }
        // Not tracked in a full sketch: it may have had up to the minimum count there.
        if (!found && s->entries().size() >= capacity_) e.error += min_count;
      }
    }
    if (!top.empty()) out.push_back({rule, std::move(top)});
  }
  return out;
}

uint64_t TopRejected::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace tollgate
