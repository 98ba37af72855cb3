// Lease-id predictors for every store's tests (issue 29): an attacker who
// holds many leases of their own tries to derive the ids a store hands out
// next, to release a victim's lease with a forged token. Two attacks that
// worked against the schemes the stores used before:
//  - SplitmixCandidates: an id that is splitmix64's finalizer of
//    counter ^ secret is inverted to counter ^ secret; the next counter
//    differs from this one in its lowest k+1 bits (k = its trailing ones), so
//    64 candidates hold the next id. Applied to each 16-digit half of an id.
//  - MersennePrediction: ids that are two std::mt19937_64 outputs are
//    untempered into the generator's state words; 156 ids (312 words) give
//    the whole state, and the recurrence gives every later output.
// ExpectIdsUnpredictable runs both over a store's ids: for every id, whether
// the ids before it predict it. Each predictor is checked against the old
// scheme it breaks (lease_test.cc), so a zero there means the ids resist the
// attack, not that the predictor is broken.
#ifndef TOLLGATE_TESTS_LEASE_PREDICTION_H_
#define TOLLGATE_TESTS_LEASE_PREDICTION_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "tollgate/store.h"

namespace tollgate::testing {

// splitmix64's finalizer and its inverse.
inline uint64_t SplitmixFinalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The inverse of an odd multiplier modulo 2^64 (Newton: 3 correct bits, doubled 5 times).
constexpr uint64_t InverseOdd(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}

inline uint64_t SplitmixUnfinalize(uint64_t x) {
  x ^= (x >> 31) ^ (x >> 62);
  x *= InverseOdd(0x94d049bb133111ebULL);
  x ^= (x >> 27) ^ (x >> 54);
  x *= InverseOdd(0xbf58476d1ce4e5b9ULL);
  x ^= (x >> 30) ^ (x >> 60);
  return x;
}

inline std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf, 16);
}

inline std::optional<uint64_t> ParseHex64(const std::string& text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

// The 16-digit words of an id: itself (16 digits) or its two halves (32).
inline std::vector<uint64_t> IdWords(const std::string& id) {
  std::vector<uint64_t> words;
  for (size_t at = 0; at + 16 <= id.size(); at += 16) {
    if (auto w = ParseHex64(id.substr(at, 16))) words.push_back(*w);
  }
  return words;
}

// The 64 words that follow `word` if it is Mix(counter ^ secret).
inline std::vector<uint64_t> SplitmixCandidates(uint64_t word) {
  const uint64_t x = SplitmixUnfinalize(word);
  std::vector<uint64_t> next;
  for (int bits = 1; bits <= 64; ++bits) {
    const uint64_t flip = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    next.push_back(SplitmixFinalize(x ^ flip));
  }
  return next;
}

// std::mt19937_64's output tempering, undone.
inline uint64_t UndoRight(uint64_t y, int shift, uint64_t mask) {
  uint64_t x = y;
  for (int i = 0; i < 64 / shift + 1; ++i) x = y ^ ((x >> shift) & mask);
  return x;
}
inline uint64_t UndoLeft(uint64_t y, int shift, uint64_t mask) {
  uint64_t x = y;
  for (int i = 0; i < 64 / shift + 1; ++i) x = y ^ ((x << shift) & mask);
  return x;
}
inline uint64_t Untemper(uint64_t y) {
  y = UndoRight(y, 43, ~uint64_t{0});
  y = UndoLeft(y, 37, 0xfff7eee000000000ULL);
  y = UndoLeft(y, 17, 0x71d67fffeda60000ULL);
  return UndoRight(y, 29, 0x5555555555555555ULL);
}
inline uint64_t Temper(uint64_t x) {
  x ^= (x >> 29) & 0x5555555555555555ULL;
  x ^= (x << 17) & 0x71d67fffeda60000ULL;
  x ^= (x << 37) & 0xfff7eee000000000ULL;
  x ^= x >> 43;
  return x;
}

// The next std::mt19937_64 output after `outputs` (at least 312 consecutive ones).
inline uint64_t MersenneNext(const std::vector<uint64_t>& outputs) {
  constexpr size_t kN = 312, kM = 156;
  const size_t j = outputs.size();
  const uint64_t x0 = Untemper(outputs[j - kN]), x1 = Untemper(outputs[j - kN + 1]);
  const uint64_t y = (x0 & 0xffffffff80000000ULL) | (x1 & 0x7fffffffULL);
  const uint64_t next =
      Untemper(outputs[j - kN + kM]) ^ (y >> 1) ^ ((y & 1) ? 0xb5026f5aa96619e9ULL : 0);
  return Temper(next);
}

// The id after `ids` if every id is two consecutive mt19937_64 outputs
// (32 digits); nullopt with fewer than 156 such ids.
inline std::optional<std::string> MersennePrediction(const std::vector<std::string>& ids) {
  if (ids.size() < 156) return std::nullopt;
  std::vector<uint64_t> outputs;
  for (size_t i = ids.size() - 156; i < ids.size(); ++i) {
    const std::vector<uint64_t> words = IdWords(ids[i]);
    if (words.size() != 2) return std::nullopt;
    outputs.insert(outputs.end(), words.begin(), words.end());
  }
  const uint64_t hi = MersenneNext(outputs);
  outputs.push_back(hi);
  return Hex64(hi) + Hex64(MersenneNext(outputs));
}

struct PredictionHits {
  int splitmix = 0;  // ids whose word was among the splitmix candidates of the id before
  int mersenne = 0;  // ids the mt19937_64 state recovered from the 156 ids before predicted
};

// For each id in order: would the ids before it have given it away?
inline PredictionHits PredictEach(const std::vector<std::string>& ids) {
  PredictionHits hits;
  std::vector<std::string> seen;
  for (const std::string& id : ids) {
    if (!seen.empty()) {
      std::unordered_set<uint64_t> candidates;
      for (uint64_t w : IdWords(seen.back())) {
        for (uint64_t c : SplitmixCandidates(w)) candidates.insert(c);
      }
      bool hit = false;
      for (uint64_t w : IdWords(id)) hit = hit || candidates.count(w) > 0;
      hits.splitmix += hit ? 1 : 0;
    }
    if (auto predicted = MersennePrediction(seen); predicted && *predicted == id) ++hits.mersenne;
    seen.push_back(id);
  }
  return hits;
}

// `ids`: one store's lease ids in the order it granted them.
inline void ExpectIdsUnpredictable(const std::vector<std::string>& ids) {
  const PredictionHits hits = PredictEach(ids);
  EXPECT_EQ(hits.splitmix, 0) << "ids given away by splitmix64 inversion, of " << ids.size();
  EXPECT_EQ(hits.mersenne, 0) << "ids given away by mt19937_64 state recovery, of " << ids.size();
  size_t short_ids = 0;
  for (const std::string& id : ids) short_ids += id.size() != 32 ? 1 : 0;
  EXPECT_EQ(short_ids, 0u) << "ids shorter or longer than 128 bits (32 hex digits), e.g. "
                           << ids.front();
}

// Every id the two attacks derive from `own` (an attacker's ids, in order)
// for the id granted next: the splitmix candidates of the last one (as
// 16-digit ids, and for 32-digit ids every pair of halves) and the
// mt19937_64 prediction.
inline std::vector<std::string> ForgedIds(const std::vector<std::string>& own) {
  std::vector<std::string> forged;
  std::vector<std::vector<std::string>> halves;
  for (uint64_t w : IdWords(own.back())) {
    halves.emplace_back();
    for (uint64_t c : SplitmixCandidates(w)) {
      forged.push_back(Hex64(c));
      halves.back().push_back(Hex64(c));
    }
  }
  if (halves.size() == 2) {
    for (const std::string& hi : halves[0]) {
      for (const std::string& lo : halves[1]) forged.push_back(hi + lo);
    }
  }
  if (auto predicted = MersennePrediction(own)) forged.push_back(*predicted);
  return forged;
}

// The finding's attack on `store` (issue 29): an attacker takes and releases
// `own_leases` leases on `key`, then holds one of the two slots; a victim
// takes the other. The attacker releases every id derived from its own: the
// victim's lease must stay (the key stays full) and the attacker's own too.
inline void ExpectForgedReleasesFreeNothing(Store& store, std::string_view key, int own_leases) {
  const LeaseLimit limit = *LeaseLimit::Create(2, Nanos(int64_t{3600} * 1'000'000'000));
  std::vector<std::string> own;
  for (int i = 0; i < own_leases; ++i) {
    auto d = store.AcquireLease(key, limit);
    ASSERT_TRUE(d.ok() && d->allowed) << i;
    own.push_back(d->lease_id);
    ASSERT_TRUE(*store.ReleaseLease(key, d->lease_id));
  }
  auto held = store.AcquireLease(key, limit);
  ASSERT_TRUE(held.ok() && held->allowed);
  own.push_back(held->lease_id);
  auto victim = store.AcquireLease(key, limit);
  ASSERT_TRUE(victim.ok() && victim->allowed);
  std::vector<std::string> granted = own;
  granted.push_back(victim->lease_id);
  ExpectIdsUnpredictable(granted);
  int freed = 0;
  for (const std::string& id : ForgedIds(own)) {
    auto r = store.ReleaseLease(key, id);
    freed += r.ok() && *r ? 1 : 0;
  }
  EXPECT_EQ(freed, 0) << "a forged id released a lease";
  auto after = store.AcquireLease(key, limit);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->allowed) << "the victim's slot came free";
  EXPECT_TRUE(*store.ReleaseLease(key, victim->lease_id)) << "the victim still holds its lease";
  EXPECT_TRUE(*store.ReleaseLease(key, held->lease_id));
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_LEASE_PREDICTION_H_
