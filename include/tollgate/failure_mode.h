// FailureMode: how a store that cannot reach its backend answers (ResilientStore,
// see resilient_store.h). A tag on what a caller asks for: a batch item
// (AcquireItem::failure_mode, store.h) or a lease (LeaseLimit::failure_mode,
// lease.h); empty means the store's default mode.
//
// Thread safety: plain values and pure functions.
#ifndef TOLLGATE_FAILURE_MODE_H_
#define TOLLGATE_FAILURE_MODE_H_

#include <cstdint>
#include <string_view>

namespace tollgate {

// Allow unenforced, refuse (503), or decide locally on a share of the limit.
enum class FailureMode : uint8_t { kOpen = 0, kClosed = 1, kDegrade = 2 };

std::string_view FailureModeName(FailureMode m);  // "open", "closed", "degrade"
// Parses "open" / "closed" / "degrade" (also "fail-open", "fail-closed"); false if unknown.
bool ParseFailureMode(std::string_view name, FailureMode* out);

}  // namespace tollgate

#endif  // TOLLGATE_FAILURE_MODE_H_
