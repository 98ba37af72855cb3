#include "tollgate/limiter.h"

#include <algorithm>
#include <thread>

namespace tollgate {
namespace {

// Builds "<name>/<key>" on the stack when it fits, so the local fast path does
// not allocate.
class KeyBuffer {
 public:
  KeyBuffer(std::string_view name, std::string_view key) {
    const size_t n = name.size() + 1 + key.size();
    char* out = n <= sizeof(inline_) ? inline_ : (heap_.resize(n), heap_.data());
    std::copy(name.begin(), name.end(), out);
    out[name.size()] = '/';
    std::copy(key.begin(), key.end(), out + name.size() + 1);
    view_ = std::string_view(out, n);
  }
  KeyBuffer(const KeyBuffer&) = delete;
  KeyBuffer& operator=(const KeyBuffer&) = delete;
  std::string_view view() const { return view_; }

 private:
  char inline_[192];
  std::string heap_;
  std::string_view view_;
};

}  // namespace

void SleepWaiter::Wait(Nanos d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

SleepWaiter& SleepWaiter::Instance() {
  static SleepWaiter waiter;
  return waiter;
}

Result<std::unique_ptr<Limiter>> Limiter::Create(LimiterOptions options) {
  if (options.name.empty() || options.name.find('/') != std::string::npos)
    return InvalidArgument("name: must be non-empty and contain no '/'");
  if (options.clock == nullptr) return InvalidArgument("clock: must not be null");
  if (options.waiter == nullptr) return InvalidArgument("waiter: must not be null");
  if (options.max_wait < Nanos(0)) return InvalidArgument("max_wait: must be >= 0");
  auto limit = Limit::Create(options.limit);
  if (!limit.ok()) return limit.status();
  std::shared_ptr<Store> store = options.store;
  LocalStore* local = nullptr;
  if (store == nullptr) {
    auto created = LocalStore::Create(options.local);
    if (!created.ok()) return created.status();
    local = created->get();
    store = std::shared_ptr<Store>(std::move(*created));
  } else {
    local = dynamic_cast<LocalStore*>(store.get());
  }
  return std::unique_ptr<Limiter>(new Limiter(std::move(options), *limit, std::move(store), local));
}

Limiter::Limiter(LimiterOptions options, Limit limit, std::shared_ptr<Store> store,
                 LocalStore* local)
    : options_(std::move(options)), limit_(limit), store_(std::move(store)), local_(local) {}

std::string Limiter::StoreKey(std::string_view key) const {
  return std::string(KeyBuffer(options_.name, key).view());
}

Result<Decision> Limiter::Acquire(std::string_view key, int64_t cost) {
  if (cost < 0) return InvalidArgument("cost: must be >= 0");
  KeyBuffer k(options_.name, key);
  if (local_ != nullptr) return local_->Acquire(k.view(), limit_, cost);
  return AcquireOne(*store_, k.view(), limit_, cost);
}

void Limiter::AcquireAsync(std::string_view key, int64_t cost,
                           std::function<void(Result<Decision>)> done) {
  if (cost < 0) {
    done(InvalidArgument("cost: must be >= 0"));
    return;
  }
  KeyBuffer k(options_.name, key);
  if (local_ != nullptr) {
    done(local_->Acquire(k.view(), limit_, cost));
    return;
  }
  // The store copies the key before AcquireAsync returns (Store contract).
  AcquireItem item{k.view(), &limit_, cost};
  store_->AcquireAsync(std::span<const AcquireItem>(&item, 1),
                       [done = std::move(done)](Result<BatchDecision> r) {
                         if (!r.ok()) {
                           done(r.status());
                         } else if (r->decisions.empty()) {
                           done(InternalError("store returned no decision"));
                         } else {
                           done(r->decisions.front());
                         }
                       });
}

bool Limiter::TryAcquire(std::string_view key, int64_t cost, Decision* decision, Status* error) {
  auto r = Acquire(key, cost);
  if (!r.ok()) {
    if (error != nullptr) *error = r.status();
    return false;
  }
  if (decision != nullptr) *decision = *r;
  return r->allowed;
}

Result<Decision> Limiter::WaitAcquire(std::string_view key, int64_t cost, Nanos max_wait) {
  const Clock& clock = *options_.clock;
  const int64_t deadline = clock.Now() + std::max(Nanos(0), max_wait).count();
  // Every round waits at least 1 us of the budget, so the loop ends; the cap is a
  // guard against a clock that never moves.
  for (int round = 0; round < 1'000'000; ++round) {
    auto r = Acquire(key, cost);
    if (!r.ok()) return r;
    const Decision& d = *r;
    if (d.allowed) {
      if (d.delay > Nanos(0)) options_.waiter->Wait(d.delay);
      return r;
    }
    if (d.retry_after == Decision::kNever) return r;
    const Nanos wait = std::max(d.retry_after, Nanos(1000));
    if (clock.Now() + wait.count() > deadline) return r;
    options_.waiter->Wait(wait);
  }
  return InternalError("WaitAcquire: the clock does not advance");
}

}  // namespace tollgate
