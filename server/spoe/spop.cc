#include "server/spoe/spop.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace tollgate::spop {
namespace {

// A STRING where the grammar names one without a type byte (KV-NAME,
// MESSAGE-NAME, VAR-NAME): <LENGTH:varint><BYTES>.
bool ReadBytes(std::string_view* in, std::string_view* out) {
  std::string_view rest = *in;
  uint64_t n = 0;
  if (!ReadVarint(&rest, &n) || n > rest.size()) return false;
  *out = rest.substr(0, size_t(n));
  rest.remove_prefix(size_t(n));
  *in = rest;
  return true;
}

void AppendBytes(std::string_view bytes, std::string* out) {
  AppendVarint(bytes.size(), out);
  out->append(bytes);
}

bool ReadUint32Be(std::string_view* in, uint32_t* out) {
  if (in->size() < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(in->data());
  *out = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
  in->remove_prefix(4);
  return true;
}

void AppendUint32Be(uint32_t v, std::string* out) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out->append(b, 4);
}

bool IsInteger(DataType t) {
  return t == DataType::kInt32 || t == DataType::kUint32 || t == DataType::kInt64 ||
         t == DataType::kUint64;
}

// Calls `item(name, value)` for each entry of a KV-LIST; false when
// malformed or longer than `max_items`.
template <class Item>
Error ReadKvList(std::string_view payload, size_t max_items, Item&& item) {
  size_t count = 0;
  while (!payload.empty()) {
    if (++count > max_items) return Error::kResource;
    std::string_view name;
    Value value;
    if (!ReadBytes(&payload, &name) || !ReadValue(&payload, &value)) return Error::kInvalid;
    item(name, value);
  }
  return Error::kNone;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls `each(item)` for every item of a comma-separated list, trimmed.
template <class Each>
void ForEachListItem(std::string_view list, Each&& each) {
  while (true) {
    const size_t comma = list.find(',');
    each(TrimSpaces(list.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

std::string_view ErrorMessage(Error e) {
  switch (e) {
    case Error::kNone:
      return "normal";
    case Error::kIo:
      return "I/O error";
    case Error::kTimeout:
      return "a timeout occurred";
    case Error::kTooBig:
      return "frame is too big";
    case Error::kInvalid:
      return "invalid frame received";
    case Error::kNoVersion:
      return "version value not found";
    case Error::kNoFrameSize:
      return "max-frame-size value not found";
    case Error::kNoCapabilities:
      return "capabilities value not found";
    case Error::kBadVersion:
      return "unsupported version";
    case Error::kBadFrameSize:
      return "max-frame-size too big or too small";
    case Error::kFragmentation:
      return "payload fragmentation is not supported";
    case Error::kInterlaced:
      return "invalid interlaced frames";
    case Error::kFrameIdNotFound:
      return "frame-id not found";
    case Error::kResource:
      return "resource allocation error";
    case Error::kUnknown:
      break;
  }
  return "an unknown error occurred";
}

void AppendVarint(uint64_t value, std::string* out) {
  if (value < 240) {
    out->push_back(char(value));
    return;
  }
  out->push_back(char(uint8_t(value) | 240));
  value = (value - 240) >> 4;
  while (value >= 128) {
    out->push_back(char(uint8_t(value) | 128));
    value = (value - 128) >> 7;
  }
  out->push_back(char(value));
}

bool ReadVarint(std::string_view* in, uint64_t* value) {
  const auto* p = reinterpret_cast<const unsigned char*>(in->data());
  const size_t n = in->size();
  if (n == 0) return false;
  uint64_t v = p[0];
  size_t used = 1;
  if (v >= 240) {
    unsigned shift = 4;
    while (true) {
      if (used >= n || shift >= 64) return false;
      const uint64_t byte = p[used++];
      // Every term of a valid encoding is at most the value: one that does
      // not fit in 64 bits, or a sum that wraps, is no uint64.
      if ((byte >> (64 - shift)) != 0) return false;
      const uint64_t term = byte << shift;
      if (v + term < v) return false;
      v += term;
      if (byte < 128) break;
      shift += 7;
    }
  }
  *value = v;
  in->remove_prefix(used);
  return true;
}

bool ReadValue(std::string_view* in, Value* out) {
  std::string_view rest = *in;
  if (rest.empty()) return false;
  const uint8_t head = uint8_t(rest.front());
  rest.remove_prefix(1);
  const uint8_t type = head & 0x0f;
  Value v;
  v.type = DataType(type);
  switch (v.type) {
    case DataType::kNull:
      break;
    case DataType::kBool:
      v.boolean = (head & 0x10) != 0;
      break;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kInt64:
    case DataType::kUint64:
      if (!ReadVarint(&rest, &v.integer)) return false;
      break;
    case DataType::kIpv4:
    case DataType::kIpv6: {
      const size_t n = v.type == DataType::kIpv4 ? 4 : 16;
      if (rest.size() < n) return false;
      v.bytes = rest.substr(0, n);
      rest.remove_prefix(n);
      break;
    }
    case DataType::kString:
    case DataType::kBinary:
      if (!ReadBytes(&rest, &v.bytes)) return false;
      break;
    default:
      return false;  // 10..15: reserved
  }
  *out = v;
  *in = rest;
  return true;
}

std::string AddressText(const Value& v) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (v.type == DataType::kIpv4 && v.bytes.size() == 4) {
    in_addr a;
    std::memcpy(&a, v.bytes.data(), 4);
    if (inet_ntop(AF_INET, &a, text, sizeof text) != nullptr) return text;
  } else if (v.type == DataType::kIpv6 && v.bytes.size() == 16) {
    in6_addr a;
    std::memcpy(&a, v.bytes.data(), 16);
    if (inet_ntop(AF_INET6, &a, text, sizeof text) != nullptr) return text;
  }
  return "";
}

Cut CutFrame(std::string_view buffered, uint32_t max_frame_size, std::string_view* frame,
             size_t* consumed) {
  uint32_t length = 0;
  if (!ReadUint32Be(&buffered, &length)) return Cut::kNeedMore;
  if (length == 0 || length > max_frame_size) return Cut::kTooBig;
  if (buffered.size() < length) return Cut::kNeedMore;
  *frame = buffered.substr(0, length);
  *consumed = kLengthPrefix + length;
  return Cut::kFrame;
}

Error ParseFrame(std::string_view frame, Frame* out) {
  if (frame.empty()) return Error::kInvalid;
  Frame f;
  f.type = FrameType(uint8_t(frame.front()));
  frame.remove_prefix(1);
  if (!ReadUint32Be(&frame, &f.flags) || !ReadVarint(&frame, &f.stream_id) ||
      !ReadVarint(&frame, &f.frame_id)) {
    return Error::kInvalid;
  }
  f.payload = frame;
  *out = f;
  if (f.type == FrameType::kUnset || (f.flags & kFlagFin) == 0) return Error::kFragmentation;
  return Error::kNone;
}

Error ParseHello(std::string_view payload, Hello* out, size_t max_items) {
  Hello h;
  bool version = false, frame_size = false, capabilities = false;
  const Error e = ReadKvList(payload, max_items, [&](std::string_view name, const Value& v) {
    if (name == "supported-versions" && v.type == DataType::kString) {
      h.supported_versions = v.bytes;
      version = true;
    } else if (name == "max-frame-size" && IsInteger(v.type)) {
      h.max_frame_size = v.integer;
      frame_size = true;
    } else if (name == "capabilities" && v.type == DataType::kString) {
      h.capabilities = v.bytes;
      capabilities = true;
    } else if (name == "healthcheck" && v.type == DataType::kBool) {
      h.healthcheck = v.boolean;
    } else if (name == "engine-id" && v.type == DataType::kString) {
      h.engine_id = v.bytes;
    }
  });
  if (e != Error::kNone) return e;
  if (!version) return Error::kNoVersion;
  if (!frame_size) return Error::kNoFrameSize;
  if (!capabilities) return Error::kNoCapabilities;
  *out = h;
  return Error::kNone;
}

bool HasCapability(std::string_view list, std::string_view name) {
  bool found = false;
  ForEachListItem(list, [&](std::string_view item) { found = found || item == name; });
  return found;
}

Error Negotiate(const Hello& hello, uint32_t agent_max_frame_size, Negotiated* out) {
  // "2.0, 1.5": a major version 2 means HAProxy speaks 2.0, ours.
  bool two = false;
  ForEachListItem(hello.supported_versions, [&](std::string_view item) {
    const size_t dot = item.find('.');
    two = two || (dot != std::string_view::npos && TrimSpaces(item.substr(0, dot)) == "2");
  });
  if (!two) return Error::kBadVersion;
  if (hello.max_frame_size < kMinFrameSize) return Error::kBadFrameSize;
  out->max_frame_size = uint32_t(std::min<uint64_t>(hello.max_frame_size, agent_max_frame_size));
  out->pipelining = HasCapability(hello.capabilities, "pipelining");
  return Error::kNone;
}

Error ParseDisconnect(std::string_view payload, Disconnect* out) {
  Disconnect d;
  bool code = false;
  const Error e = ReadKvList(payload, 16, [&](std::string_view name, const Value& v) {
    if (name == "status-code" && IsInteger(v.type)) {
      d.status_code = v.integer;
      code = true;
    } else if (name == "message" && v.type == DataType::kString) {
      d.message = v.bytes;
    }
  });
  if (e != Error::kNone) return e;
  if (!code) return Error::kInvalid;
  *out = d;
  return Error::kNone;
}

Error ParseNotify(std::string_view payload, std::vector<Message>* out, size_t max_messages,
                  size_t max_args) {
  out->clear();
  size_t args = 0;
  while (!payload.empty()) {
    if (out->size() >= max_messages) return Error::kResource;
    Message m;
    if (!ReadBytes(&payload, &m.name) || payload.empty()) return Error::kInvalid;
    const size_t count = uint8_t(payload.front());
    payload.remove_prefix(1);
    if ((args += count) > max_args) return Error::kResource;
    m.args.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      Argument a;
      if (!ReadBytes(&payload, &a.name) || !ReadValue(&payload, &a.value)) return Error::kInvalid;
      m.args.push_back(a);
    }
    out->push_back(std::move(m));
  }
  return Error::kNone;
}

Error ParseHeaderBlock(std::string_view block,
                       std::vector<std::pair<std::string_view, std::string_view>>* out,
                       size_t max_headers) {
  out->clear();
  while (true) {
    std::string_view name, value;
    if (!ReadBytes(&block, &name) || !ReadBytes(&block, &value)) return Error::kInvalid;
    if (name.empty()) return value.empty() ? Error::kNone : Error::kInvalid;
    if (out->size() >= max_headers) return Error::kResource;
    out->emplace_back(name, value);
  }
}

void ActionList::Begin(Scope scope, std::string_view name) {
  payload_.push_back(char(1));  // SET-VAR
  payload_.push_back(char(3));  // NB-ARGS
  payload_.push_back(char(scope));
  AppendBytes(name, &payload_);
}

void ActionList::SetString(Scope scope, std::string_view name, std::string_view value) {
  Begin(scope, name);
  payload_.push_back(char(DataType::kString));
  AppendBytes(value, &payload_);
}

void ActionList::SetInt(Scope scope, std::string_view name, int64_t value) {
  Begin(scope, name);
  payload_.push_back(char(DataType::kInt64));
  AppendVarint(uint64_t(value), &payload_);
}

void ActionList::SetBool(Scope scope, std::string_view name, bool value) {
  Begin(scope, name);
  payload_.push_back(char(uint8_t(DataType::kBool) | (value ? 0x10 : 0)));
}

size_t FrameSize(uint64_t stream_id, uint64_t frame_id, size_t payload_size) {
  std::string ids;
  AppendVarint(stream_id, &ids);
  AppendVarint(frame_id, &ids);
  return 1 + 4 + ids.size() + payload_size;
}

void AppendFrame(FrameType type, uint64_t stream_id, uint64_t frame_id, std::string_view payload,
                 std::string* out) {
  AppendUint32Be(uint32_t(FrameSize(stream_id, frame_id, payload.size())), out);
  out->push_back(char(type));
  AppendUint32Be(kFlagFin, out);
  AppendVarint(stream_id, out);
  AppendVarint(frame_id, out);
  out->append(payload);
}

void AppendAgentHello(const Negotiated& n, std::string* out) {
  std::string kv;
  AppendBytes("version", &kv);
  kv.push_back(char(DataType::kString));
  AppendBytes("2.0", &kv);
  AppendBytes("max-frame-size", &kv);
  kv.push_back(char(DataType::kUint32));
  AppendVarint(n.max_frame_size, &kv);
  AppendBytes("capabilities", &kv);
  kv.push_back(char(DataType::kString));
  AppendBytes(n.pipelining ? "pipelining" : "", &kv);
  AppendFrame(FrameType::kAgentHello, 0, 0, kv, out);
}

void AppendAgentDisconnect(Error status, std::string_view message, std::string* out) {
  std::string kv;
  AppendBytes("status-code", &kv);
  kv.push_back(char(DataType::kUint32));
  AppendVarint(uint32_t(status), &kv);
  AppendBytes("message", &kv);
  kv.push_back(char(DataType::kString));
  AppendBytes(message.substr(0, 200), &kv);
  AppendFrame(FrameType::kAgentDisconnect, 0, 0, kv, out);
}

void AppendAck(uint64_t stream_id, uint64_t frame_id, const ActionList& actions, std::string* out) {
  AppendFrame(FrameType::kAck, stream_id, frame_id, actions.payload(), out);
}

}  // namespace tollgate::spop
