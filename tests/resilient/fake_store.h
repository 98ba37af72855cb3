// FakeStore: a LocalStore whose availability the test scripts: while `fail`
// holds a non-ok code every call returns that error without touching state.
#ifndef TOLLGATE_TESTS_RESILIENT_FAKE_STORE_H_
#define TOLLGATE_TESTS_RESILIENT_FAKE_STORE_H_

#include <atomic>
#include <memory>

#include "tollgate/local_store.h"
#include "tollgate/store.h"

namespace tollgate::testing {

class FakeStore final : public Store {
 public:
  explicit FakeStore(const Clock* clock) {
    LocalStoreOptions o;
    o.max_keys = 4096;
    o.shards = 4;
    o.clock = clock;
    local_ = std::move(*LocalStore::Create(o));
  }

  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override {
    calls.fetch_add(1);
    const auto code = fail.load();
    if (code != StatusCode::kOk) return Status(code, "fake failure");
    return local_->Acquire(items);
  }
  std::string Name() const override { return "fake"; }
  bool SupportsLeases() const override { return true; }
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) override {
    calls.fetch_add(1);
    const auto code = fail.load();
    if (code != StatusCode::kOk) return Status(code, "fake failure");
    return local_->AcquireLease(key, limit);
  }
  Result<bool> ReleaseLease(std::string_view key, std::string_view lease_id) override {
    const auto code = fail.load();
    if (code != StatusCode::kOk) return Status(code, "fake failure");
    return local_->ReleaseLease(key, lease_id);
  }
  bool AsyncNative() const override { return async_native; }

  // Key administration: the local state, unless a failure is scripted.
  Status ResetKey(std::string_view key, const Limit& limit) override {
    const auto code = fail.load();
    if (code != StatusCode::kOk) return Status(code, "fake failure");
    return local_->ResetKey(key, limit);
  }
  Result<Decision> SetRemaining(std::string_view key, const Limit& limit,
                                int64_t remaining) override {
    const auto code = fail.load();
    if (code != StatusCode::kOk) return Status(code, "fake failure");
    return local_->SetRemaining(key, limit, remaining);
  }

  // State as seen without a charge, bypassing the scripted failure.
  Decision Peek(std::string_view key, const Limit& limit) { return local_->Acquire(key, limit, 0); }

  std::atomic<StatusCode> fail{StatusCode::kOk};
  bool async_native = false;  // what the fake claims (a remote store says true)
  std::atomic<int> calls{0};

 private:
  std::unique_ptr<LocalStore> local_;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_RESILIENT_FAKE_STORE_H_
