// Helpers shared by the fuzz targets (fuzz/targets/*.cc).
//
// Input: carves typed values out of the fuzz input, front to back, the way
// LLVM's FuzzedDataProvider does (which a g++ build of the replay tests does
// not have). Every accessor is total: an exhausted input yields zeros and
// empty views, so a target never needs to check sizes.
//
// FUZZ_CHECK(cond, what): a property of the code under test. On failure it
// prints what failed and aborts, in every build type (NDEBUG or not), so
// libFuzzer records the input as a crash and the replay test fails.
#ifndef TOLLGATE_FUZZ_FUZZ_INPUT_H_
#define TOLLGATE_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tests/testing/test_paths.h"

#define FUZZ_CHECK(cond, what)                                                         \
  do {                                                                                 \
    if (!(cond)) ::tollgate::fuzz::Fail(__FILE__, __LINE__, #cond, std::string(what)); \
  } while (0)

namespace tollgate::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* cond,
                              const std::string& what) {
  std::fprintf(stderr, "%s:%d: property failed: %s\n  %s\n", file, line, cond, what.c_str());
  std::fflush(stderr);
  std::abort();
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool empty() const { return p_ == end_; }

  uint8_t Byte() { return p_ == end_ ? 0 : *p_++; }
  bool Bool() { return (Byte() & 1) != 0; }

  // `bytes` bytes, little endian (missing bytes are zero).
  uint64_t Bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{Byte()} << (8 * i);
    return v;
  }
  int64_t Int64() { return static_cast<int64_t>(Bits(8)); }

  // A value in [lo, hi] (both inclusive; lo <= hi).
  int64_t Range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    int bytes = 0;
    for (uint64_t s = span; s != 0; s >>= 8) ++bytes;
    const uint64_t v = Bits(bytes);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) +
                                (span == UINT64_MAX ? v : v % (span + 1)));
  }

  // Up to n bytes.
  std::string_view Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string_view out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return out;
  }
  // A length byte (capped at `max`) then that many bytes.
  std::string_view Short(size_t max = 255) { return Bytes(Byte() % (max + 1)); }
  // Up to the next `sep` byte (consumed) or the end.
  std::string_view Until(char sep) {
    const uint8_t* start = p_;
    while (p_ != end_ && *p_ != static_cast<uint8_t>(sep)) ++p_;
    std::string_view out(reinterpret_cast<const char*>(start), static_cast<size_t>(p_ - start));
    if (p_ != end_) ++p_;
    return out;
  }
  std::string_view Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Printable form of bytes for property messages.
inline std::string Quote(std::string_view s, size_t max = 200) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out + "\"";
}

// A file of the source tree: TOLLGATE_SOURCE_DIR + "/" + relative (fuzz/run.sh and the replay
// tests set it), else relative to the working directory; the tests' own lookup
// (tests/testing/test_paths.h). Not a compile-time path: one would make every target's TU differ
// per clone, and ccache could not reuse it on a new one.
inline std::string SourcePath(std::string_view relative) {
  return ::tollgate::testing::SourcePathOf(relative);
}

}  // namespace tollgate::fuzz

#endif  // TOLLGATE_FUZZ_FUZZ_INPUT_H_
