#include "trace/span.h"

#include <cmath>
#include <random>

namespace tollgate::trace {
namespace {

uint64_t SplitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t RandomSeed() {
  std::random_device rd;
  return uint64_t{rd()} << 32 ^ rd();
}

void Store64(uint64_t v, uint8_t* out) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<uint8_t>(v);
}

uint64_t Load64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | in[i];
  return v;
}

}  // namespace

IdSource::IdSource(uint64_t seed) : state_(seed != 0 ? seed : RandomSeed()) {}

uint64_t IdSource::Next() {
  return SplitMix64(state_.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed));
}

TraceId IdSource::NewTraceId() {
  TraceId id;
  do {
    Store64(Next(), id.data());
    Store64(Next(), id.data() + 8);
  } while (IsZero(id));
  return id;
}

SpanId IdSource::NewSpanId() {
  SpanId id;
  do {
    Store64(Next(), id.data());
  } while (IsZero(id));
  return id;
}

Sampler::Sampler(double ratio, bool parent_based)
    : threshold_(0), always_(ratio >= 1.0), parent_based_(parent_based) {
  // ratio * 2^64, computed below 2^64 so the conversion is defined.
  if (!always_ && ratio > 0) threshold_ = static_cast<uint64_t>(std::ldexp(ratio, 64));
}

bool Sampler::ShouldSample(const SpanContext* parent, uint64_t random) const {
  if (parent && parent_based_) return parent->sampled();
  if (parent) return Keeps(parent->trace_id);
  return always_ || random < threshold_;
}

bool Sampler::Keeps(const TraceId& id) const {
  return always_ || Load64(id.data() + 8) < threshold_;
}

}  // namespace tollgate::trace
