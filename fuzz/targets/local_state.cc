// Fuzz target: the local store's state file (src/local/state_file.cc,
// LocalStore::LoadBytes), which tollgated reads at start from
// store.local_state_file: bytes on disk, untrusted like any other file.
//
// Input: a mode byte, then a state file. Mode bit 0 set: the target first
// rewrites the header's body length and the trailing CRC32C to match the
// bytes (so mutations reach the records instead of dying at the checksum).
// Properties:
//   - DecodeState: an error xor an image; an error names a byte ("at byte N")
//     inside the input; an image re-encodes to exactly the input (the format
//     has one encoding, so nothing is accepted that Save would not write);
//   - LoadBytes on an empty store agrees with DecodeState; a refused file
//     leaves the store empty; an accepted one accounts for every entry
//     (loaded + dropped == entries) and holds no more keys than max_keys;
//   - the loaded store decides every kind of limit on keys of the file's
//     groups, and saves a file that decodes again.
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "local/state_file.h"
#include "tollgate/local_store.h"

namespace {

constexpr int64_t kSec = 1'000'000'000;

void Patch(std::string& b) {
  using tollgate::internal::kStateHeaderBytes;
  if (b.size() < kStateHeaderBytes + 4) return;
  const uint64_t body = b.size() - kStateHeaderBytes - 4;
  for (int i = 0; i < 8; ++i) b[16 + i] = static_cast<char>(body >> (8 * i));
  const uint32_t crc = tollgate::internal::Crc32c(std::string_view(b).substr(0, b.size() - 4));
  for (int i = 0; i < 4; ++i) b[b.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
}

tollgate::Limit Make(tollgate::Algorithm a) {
  tollgate::LimitSpec s;
  s.algorithm = a;
  s.burst = 10;
  if (a == tollgate::Algorithm::kTokenBucket || a == tollgate::Algorithm::kLeakyBucket) {
    s.count = 10;
    s.period = std::chrono::minutes(1);
  } else {
    s.window = std::chrono::minutes(1);
  }
  return *tollgate::Limit::Create(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tollgate;
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) Patch(bytes);

  constexpr size_t kMaxKeys = 64;
  internal::StateLimits limits;
  limits.max_groups = LocalStore::kMaxGroups - 1;
  limits.max_records = 2 * kMaxKeys + LocalStore::kMaxGroups + 1;
  limits.max_bytes = size_t{1} << 30;
  auto image = internal::DecodeState(bytes, limits);
  if (!image.ok()) {
    const std::string m = image.status().message();
    const size_t at = m.find("at byte ");
    FUZZ_CHECK(at == 0, "error without a place: " + m);
    FUZZ_CHECK(std::stoull(m.substr(8)) <= bytes.size(), "place out of range: " + m);
  } else {
    FUZZ_CHECK(internal::EncodeState(*image) == bytes, "a decoded file re-encodes differently");
  }

  // Loaded a minute after the file's save when its time is one a system clock can show (1970 to
  // 2116), else at 2026-12-02 12:00 UTC: a file from far away meets a real clock (its records are
  // then dropped as too far from now), never a clock before 1970.
  const bool plausible =
      image.ok() && image->saved_wall_ns >= 0 && image->saved_wall_ns <= (int64_t{1} << 62);
  ManualClock clock(5 * kSec,
                    plausible ? image->saved_wall_ns + 60 * kSec - 5 * kSec : 1'796'212'800 * kSec);
  LocalStoreOptions o;
  o.max_keys = kMaxKeys;
  o.shards = 2;
  o.clock = &clock;
  auto store = std::move(*LocalStore::Create(o));
  LocalStateLoadOptions lo;
  lo.keep_group = [](std::string_view g) { return g.size() % 3 != 1; };
  auto loaded = store->LoadBytes(bytes, lo);
  if (loaded.ok() != image.ok()) {
    const std::string why = loaded.ok() ? image.status().ToString() : loaded.status().ToString();
    FUZZ_CHECK(false, "LoadBytes and DecodeState disagree: " + why);
  }
  const LocalStoreStats stats = store->Stats();
  if (!loaded.ok()) {
    FUZZ_CHECK(stats.keys == 0 && stats.log_keys == 0, "a refused file installed keys");
    return 0;
  }
  const size_t entries = image->words.size() + image->logs.size();
  FUZZ_CHECK(
      loaded->loaded + loaded->dropped_group + loaded->dropped_expired + loaded->dropped_no_room ==
          entries,
      "entries unaccounted for");
  FUZZ_CHECK(stats.keys <= kMaxKeys, "more keys than max_keys");
  FUZZ_CHECK(stats.keys + stats.log_keys == loaded->loaded, "key count differs from loaded");
  for (const auto a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
                       Algorithm::kSlidingWindow, Algorithm::kSlidingLog}) {
    const Limit limit = Make(a);
    for (const auto& g : image->groups) {
      const std::string key = g.name + "\x1f" + std::to_string(static_cast<int>(a));
      const Decision d = store->Acquire(key, limit, 1);
      FUZZ_CHECK(d.remaining >= 0 && d.remaining <= limit.burst(), "remaining out of range");
    }
  }
  clock.Advance(std::chrono::hours(1));
  std::ostringstream out;
  FUZZ_CHECK(store->Save(out).ok(), "save failed");
  const auto saved = internal::DecodeState(out.str(), {});
  FUZZ_CHECK(saved.ok(), "a saved file does not decode: " + saved.status().ToString());
  return 0;
}
