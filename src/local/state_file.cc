#include "local/state_file.h"

#include <array>
#include <cstring>
#include <set>
#include <utility>

namespace tollgate::internal {

namespace {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

void Put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutAt(std::string& out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

constexpr size_t kKeyBytes = 8 + 8 + 2;
constexpr size_t kMetaBytes = 8 + 32;
constexpr size_t kBucketBytes = kKeyBytes + 8;
constexpr size_t kWindowBytes = kKeyBytes + 8 + 8;
constexpr size_t kLogHead = kKeyBytes + 4;
constexpr size_t kLogEntry = 16;

// Bounded little-endian reads over one record's payload.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t U(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(bytes_[pos_ + i])} << (8 * i);
    pos_ += n;
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U(8)); }
  std::string_view Rest() { return bytes_.substr(pos_); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

bool Within(int64_t t, int64_t saved) {
  const __int128 d = static_cast<__int128>(t) - saved;
  return d <= kMaxStateSpanNs && d >= -kMaxStateSpanNs;
}

}  // namespace

uint32_t Crc32c(std::string_view bytes, uint32_t crc) {
  crc = ~crc;
  for (char ch : bytes) crc = kCrcTable[(crc ^ static_cast<uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

StateWriter::StateWriter(int64_t saved_wall_ns, const HashSeed& seed) {
  out_.append(kStateMagic);
  Put(out_, kStateVersion, 4);
  Put(out_, 0, 4);  // record count, patched by Finish
  Put(out_, 0, 8);  // body length, patched by Finish
  Begin(StateRecord::kMeta, kMetaBytes);
  Put(out_, static_cast<uint64_t>(saved_wall_ns), 8);
  for (uint64_t k : seed.k) Put(out_, k, 8);
}

void StateWriter::Begin(StateRecord type, uint32_t length) {
  out_.push_back(static_cast<char>(type));
  Put(out_, length, 4);
  ++records_;
}

void StateWriter::Group(uint16_t id, std::string_view name) {
  Begin(StateRecord::kGroup, static_cast<uint32_t>(2 + name.size()));
  Put(out_, id, 2);
  out_.append(name);
}

void StateWriter::Bucket(uint64_t hi, uint64_t lo, uint16_t group, int64_t tat_wall) {
  Begin(StateRecord::kBucket, kBucketBytes);
  Put(out_, hi, 8);
  Put(out_, lo, 8);
  Put(out_, group, 2);
  Put(out_, static_cast<uint64_t>(tat_wall), 8);
}

void StateWriter::Window(uint64_t hi, uint64_t lo, uint16_t group, uint64_t state,
                         int64_t idle_wall) {
  Begin(StateRecord::kWindow, kWindowBytes);
  Put(out_, hi, 8);
  Put(out_, lo, 8);
  Put(out_, group, 2);
  Put(out_, state, 8);
  Put(out_, static_cast<uint64_t>(idle_wall), 8);
}

void StateWriter::Log(uint64_t hi, uint64_t lo, uint16_t group,
                      const std::vector<StateImage::LogEntry>& entries) {
  Begin(StateRecord::kLog, static_cast<uint32_t>(kLogHead + kLogEntry * entries.size()));
  Put(out_, hi, 8);
  Put(out_, lo, 8);
  Put(out_, group, 2);
  Put(out_, entries.size(), 4);
  for (const auto& e : entries) {
    Put(out_, static_cast<uint64_t>(e.at_wall), 8);
    Put(out_, static_cast<uint64_t>(e.cost), 8);
  }
}

std::string StateWriter::Finish() {
  PutAt(out_, 12, records_, 4);
  PutAt(out_, 16, out_.size() - kStateHeaderBytes, 8);
  Put(out_, Crc32c(out_), 4);
  return std::move(out_);
}

std::string EncodeState(const StateImage& image) {
  StateWriter w(image.saved_wall_ns, image.seed);
  for (const auto& g : image.groups) w.Group(g.id, g.name);
  for (const auto& x : image.words) {
    if (x.bucket) {
      w.Bucket(x.hi, x.lo, x.group, x.wall);
    } else {
      w.Window(x.hi, x.lo, x.group, x.state, x.wall);
    }
  }
  for (const auto& l : image.logs) w.Log(l.hi, l.lo, l.group, l.entries);
  return w.Finish();
}

Result<StateImage> DecodeState(std::string_view bytes, const StateLimits& limits) {
  auto fail = [](size_t at, std::string why) {
    return InvalidArgument("at byte " + std::to_string(at) + ": " + std::move(why));
  };
  if (bytes.size() > limits.max_bytes) {
    return fail(0, "the file is " + std::to_string(bytes.size()) + " bytes, more than the " +
                       std::to_string(limits.max_bytes) + " allowed");
  }
  if (bytes.size() < kStateMagic.size() || bytes.substr(0, kStateMagic.size()) != kStateMagic) {
    return fail(0, "not a tollgate state file (no TGLSTATE magic)");
  }
  if (bytes.size() < kStateHeaderBytes + 4) return fail(bytes.size(), "truncated header");
  Reader head(bytes.substr(8, 16));
  const uint64_t version = head.U(4);
  const uint64_t count = head.U(4);
  const uint64_t body = head.U(8);
  if (version != kStateVersion) {
    return fail(8, "version " + std::to_string(version) +
                       (version > kStateVersion ? " is newer than" : " is not") +
                       " the version this tollgate reads (" + std::to_string(kStateVersion) + ")");
  }
  if (body != bytes.size() - kStateHeaderBytes - 4) {
    return fail(16, "the header gives a body of " + std::to_string(body) + " bytes, the file has " +
                        std::to_string(bytes.size() - kStateHeaderBytes - 4) +
                        " (truncated or extended)");
  }
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= uint32_t{static_cast<uint8_t>(bytes[bytes.size() - 4 + i])} << (8 * i);
  }
  if (Crc32c(bytes.substr(0, bytes.size() - 4)) != stored) {
    return fail(bytes.size() - 4, "checksum mismatch (the file is corrupt)");
  }
  if (count > limits.max_records) {
    return fail(12, std::to_string(count) + " records, more than the " +
                        std::to_string(limits.max_records) + " allowed");
  }
  StateImage image;
  std::set<std::pair<uint64_t, uint64_t>> keys;
  std::vector<bool> declared(limits.max_groups, false);
  const size_t end = bytes.size() - 4;
  size_t pos = kStateHeaderBytes;
  for (uint64_t n = 0; n < count; ++n) {
    const std::string where = "(record " + std::to_string(n) + ") ";
    if (end - pos < 5) return fail(pos, where + "truncated record header");
    Reader rh(bytes.substr(pos, 5));
    const auto type = static_cast<uint8_t>(rh.U(1));
    const uint64_t length = rh.U(4);
    if (length > end - pos - 5) return fail(pos, where + "record runs past the end");
    const std::string_view payload = bytes.substr(pos + 5, length);
    Reader r(payload);
    auto key_of = [&](uint64_t* hi, uint64_t* lo, uint16_t* group) -> Status {
      *hi = r.U(8);
      *lo = r.U(8);
      *group = static_cast<uint16_t>(r.U(2));
      if (*hi <= 1) return fail(pos, where + "key hash in the reserved range");
      if (*group != limits.max_groups && (*group > limits.max_groups || !declared[*group])) {
        return fail(pos, where + "group " + std::to_string(*group) + " is not declared");
      }
      if (!keys.emplace(*hi, *lo).second) return fail(pos, where + "the key appears twice");
      return Status::Ok();
    };
    if (n == 0 && type != static_cast<uint8_t>(StateRecord::kMeta)) {
      return fail(pos, where + "the first record must be the meta record");
    }
    switch (static_cast<StateRecord>(type)) {
      case StateRecord::kMeta: {
        if (n != 0) return fail(pos, where + "a second meta record");
        if (length != kMetaBytes) return fail(pos, where + "meta record of the wrong length");
        image.saved_wall_ns = r.I64();
        for (auto& k : image.seed.k) k = r.U(8);
        break;
      }
      case StateRecord::kGroup: {
        if (length < 2 || length > 2 + kMaxGroupName) {
          return fail(pos, where + "group record of the wrong length");
        }
        const auto id = static_cast<uint16_t>(r.U(2));
        if (id >= limits.max_groups) return fail(pos, where + "group id out of range");
        if (declared[id]) return fail(pos, where + "group " + std::to_string(id) + " twice");
        declared[id] = true;
        image.groups.push_back({id, std::string(r.Rest())});
        break;
      }
      case StateRecord::kBucket:
      case StateRecord::kWindow: {
        const bool bucket = type == static_cast<uint8_t>(StateRecord::kBucket);
        if (length != (bucket ? kBucketBytes : kWindowBytes)) {
          return fail(pos, where + (bucket ? "bucket" : "window") + " record of the wrong length");
        }
        StateImage::Word w;
        w.bucket = bucket;
        if (Status st = key_of(&w.hi, &w.lo, &w.group); !st.ok()) return st;
        if (!bucket) {
          w.state = r.U(8);
          if (w.state == ~uint64_t{0}) return fail(pos, where + "reserved window state");
        }
        w.wall = r.I64();
        if (!Within(w.wall, image.saved_wall_ns)) {
          return fail(pos, where + "time too far from the save's");
        }
        image.words.push_back(w);
        break;
      }
      case StateRecord::kLog: {
        if (length < kLogHead) return fail(pos, where + "log record too short");
        StateImage::Log l;
        if (Status st = key_of(&l.hi, &l.lo, &l.group); !st.ok()) return st;
        const uint64_t entries = r.U(4);
        if (entries > limits.max_log_entries) {
          return fail(pos, where + std::to_string(entries) + " log entries, more than allowed");
        }
        if (length != kLogHead + kLogEntry * entries) {
          return fail(pos, where + "log record of the wrong length");
        }
        l.entries.reserve(entries);
        for (uint64_t i = 0; i < entries; ++i) {
          StateImage::LogEntry e;
          e.at_wall = r.I64();
          e.cost = r.I64();
          if (e.cost < 1 || e.cost > kMaxLogCost) return fail(pos, where + "log cost out of range");
          if (!Within(e.at_wall, image.saved_wall_ns)) {
            return fail(pos, where + "time too far from the save's");
          }
          if (!l.entries.empty() && e.at_wall < l.entries.back().at_wall) {
            return fail(pos, where + "log entries out of time order");
          }
          l.entries.push_back(e);
        }
        image.logs.push_back(std::move(l));
        break;
      }
      default:
        return fail(pos, where + "unknown record type " + std::to_string(type));
    }
    pos += 5 + length;
  }
  if (count == 0) return fail(kStateHeaderBytes, "no meta record");
  if (pos != end) return fail(pos, "bytes after the last record");
  return image;
}

}  // namespace tollgate::internal
