// PolicyStore: parse completely, then swap one pointer.
#include <array>
#include <chrono>
#include <string>
#include <utility>

#include "policy/policy_impl.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

std::string JoinErrors(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += (out.empty() ? "" : "\n") + e.ToString();
  return out;
}

}  // namespace

namespace {

// Every store's id, for the per-thread caches: an id is never reused, so a cache
// entry of a destroyed store can never match a store created at its address.
std::atomic<uint64_t> g_next_store_id{1};

// One thread's recently read snapshots (a thread serving one tollgated reads
// one store; tests and embedders with several stores share the slots).
struct SnapshotCache {
  struct Slot {
    uint64_t store = 0;  // PolicyStore::id_, 0 = empty
    uint64_t swaps = 0;
    PolicyStore::Snapshot snapshot;
  };
  std::array<Slot, 4> slots;
  size_t next = 0;  // round-robin victim
};
thread_local SnapshotCache t_snapshots;

}  // namespace

PolicyStore::PolicyStore(std::shared_ptr<const Policy> policy, std::string path, const Clock* clock)
    : path_(std::move(path)),
      clock_(clock),
      current_(std::move(policy)),
      id_(g_next_store_id.fetch_add(1, std::memory_order_relaxed)) {
  last_reload_.wall_time_ns = clock_->WallNow();
}

Result<std::shared_ptr<PolicyStore>> PolicyStore::Open(const std::string& path, const Clock* clock,
                                                       PolicyParseOptions options) {
  if (options.base_dir.empty()) options.base_dir = DirectoryOf(path);
  ParsedPolicy parsed = ParsePolicyFile(path, options);
  if (!parsed.policy) return InvalidArgument(path + ":\n" + JoinErrors(parsed.errors));
  auto store = std::make_shared<PolicyStore>(std::move(parsed.policy), path, clock);
  store->options_ = std::move(options);
  store->version_ = std::move(parsed.version);
  store->text_ = std::move(parsed.text);
  return store;
}

Result<std::shared_ptr<PolicyStore>> PolicyStore::FromText(std::string_view json_text,
                                                           const Clock* clock,
                                                           PolicyParseOptions options) {
  ParsedPolicy parsed = ParsePolicy(json_text, options);
  if (!parsed.policy) return InvalidArgument(JoinErrors(parsed.errors));
  auto store = std::make_shared<PolicyStore>(std::move(parsed.policy), "", clock);
  store->options_ = std::move(options);
  store->version_ = std::move(parsed.version);
  store->text_ = std::move(parsed.text);
  return store;
}

std::shared_ptr<PolicyStore> PolicyStore::FromPolicy(std::shared_ptr<const Policy> policy) {
  return std::make_shared<PolicyStore>(std::move(policy));
}

std::vector<ConfigError> PolicyStore::Reload() { return Reload(Attach()); }

std::vector<ConfigError> PolicyStore::ReloadFromText(std::string_view json_text) {
  return ReloadFromText(json_text, Attach());
}

std::vector<ConfigError> PolicyStore::Reload(const Attach& attach) {
  if (path_.empty()) {
    ParsedPolicy none;
    none.errors.push_back({"", "this policy store was not opened from a file"});
    return Install(std::move(none), attach ? &attach : nullptr);
  }
  return Install(ParsePolicyFile(path_, options_), attach ? &attach : nullptr);
}

std::vector<ConfigError> PolicyStore::ReloadFromText(std::string_view json_text,
                                                     const Attach& attach) {
  return Install(ParsePolicy(json_text, options_), attach ? &attach : nullptr);
}

std::vector<ConfigError> PolicyStore::SetAttachment(const Attach& attach) {
  std::lock_guard<std::mutex> lock(reload_mu_);
  Attachment next;
  std::vector<ConfigError> errors = attach(&next);
  if (!errors.empty()) return errors;
  Attachment old;
  {
    std::lock_guard<std::mutex> swap(current_mu_);
    old = std::exchange(attachment_, std::move(next));
    swaps_.fetch_add(1, std::memory_order_release);
  }
  return {};
}

// The one swap: the policy, its version and text, the attachment and the
// generation change together under current_mu_, or nothing changes.
std::vector<ConfigError> PolicyStore::Install(ParsedPolicy parsed, const Attach* attach) {
  std::lock_guard<std::mutex> lock(reload_mu_);
  ReloadResult result;
  result.wall_time_ns = clock_->WallNow();
  std::vector<ConfigError> errors = std::move(parsed.errors);
  Attachment next;
  if (attach) {
    for (ConfigError& e : (*attach)(&next)) errors.push_back(std::move(e));
  }
  if (!parsed.policy || !errors.empty()) {
    result.ok = false;
    result.errors = errors;
    reload_failures_.fetch_add(1, std::memory_order_relaxed);
    last_reload_ = std::move(result);
    return errors;
  }
  std::shared_ptr<const Policy> old;
  Attachment old_attachment;
  {
    std::lock_guard<std::mutex> swap(current_mu_);
    old = std::exchange(current_, std::move(parsed.policy));
    if (attach) old_attachment = std::exchange(attachment_, std::move(next));
    version_ = std::move(parsed.version);
    text_ = std::move(parsed.text);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    swaps_.fetch_add(1, std::memory_order_release);
  }
  // `old` is released here, outside the lock (in-flight decisions may still hold it).
  last_reload_ = std::move(result);
  return {};
}

std::shared_ptr<const Policy> PolicyStore::Current() const {
  std::lock_guard<std::mutex> lock(current_mu_);
  return current_;
}

std::shared_ptr<const Policy> PolicyStore::Current(uint64_t* generation) const {
  std::lock_guard<std::mutex> lock(current_mu_);
  *generation = generation_.load(std::memory_order_acquire);
  return current_;
}

PolicyStore::Snapshot PolicyStore::snapshot() const {
  std::lock_guard<std::mutex> lock(current_mu_);
  return Snapshot{current_, generation_.load(std::memory_order_acquire), attachment_};
}

// A slot holds its snapshot's pointers, so a cached policy outlives a reload
// until this thread's next call (one stale policy per thread at most). The pair
// (swaps, snapshot) is filled under current_mu_, where a swap changes both: a
// matching count means the snapshot is the one that swap installed.
const PolicyStore::Snapshot& PolicyStore::SnapshotOnThisThread() const {
  const uint64_t swaps = swaps_.load(std::memory_order_acquire);
  SnapshotCache& cache = t_snapshots;
  for (SnapshotCache::Slot& slot : cache.slots) {
    if (slot.store == id_ && slot.swaps == swaps) return slot.snapshot;
  }
  SnapshotCache::Slot* slot = nullptr;
  for (SnapshotCache::Slot& s : cache.slots) {
    if (s.store == id_) slot = &s;  // this store's older entry
  }
  if (slot == nullptr) {
    slot = &cache.slots[cache.next];
    cache.next = (cache.next + 1) % cache.slots.size();
  }
  std::lock_guard<std::mutex> lock(current_mu_);
  slot->store = id_;
  slot->swaps = swaps_.load(std::memory_order_relaxed);
  slot->snapshot = Snapshot{current_, generation_.load(std::memory_order_acquire), attachment_};
  return slot->snapshot;
}

std::string PolicyStore::version() const {
  std::lock_guard<std::mutex> lock(current_mu_);
  return version_;
}

std::string PolicyStore::text() const {
  std::lock_guard<std::mutex> lock(current_mu_);
  return text_;
}

PolicyStore::ReloadResult PolicyStore::last_reload() const {
  std::lock_guard<std::mutex> lock(reload_mu_);
  return last_reload_;
}

}  // namespace tollgate
