// PolicyStore: parse completely, then swap one pointer.
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

PolicyStore::PolicyStore(std::shared_ptr<const Policy> policy, std::string path, const Clock* clock)
    : path_(std::move(path)), clock_(clock), current_(std::move(policy)) {
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
