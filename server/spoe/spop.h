// SPOP: HAProxy's Stream Processing Offload Protocol (doc/SPOE.txt, SPOP 2.0
// as HAProxy 2.x speaks it), parsed and encoded without I/O.
//
// tollgated's SPOE agent (server/spoe_session.h) reads frames off a socket
// with FrameCut, parses each with ParseFrame and the payload parsers below,
// and writes AGENT-HELLO, ACK and AGENT-DISCONNECT frames built here. Every
// byte comes from a peer we do not control: every read is bounded by the
// input (a parser never reads past its view), every count by the caller's
// limits, and a malformed input is an Error (the SPOP status code the agent
// sends back in its AGENT-DISCONNECT), never a crash or an exception.
// Fragmented payloads are not supported: the agent never announces the
// "fragmentation" capability, and a frame without FIN (or an UNSET frame) is
// Error::kFragmentation.
//
// Views: the parsed structures hold string_views into the caller's bytes;
// they are valid as long as those bytes.
// Thread safety: pure functions over their arguments.
#ifndef TOLLGATE_SERVER_SPOE_SPOP_H_
#define TOLLGATE_SERVER_SPOE_SPOP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate::spop {

enum class FrameType : uint8_t {
  kUnset = 0,  // a fragment after the first
  kHaproxyHello = 1,
  kHaproxyDisconnect = 2,
  kNotify = 3,
  kAgentHello = 101,
  kAgentDisconnect = 102,
  kAck = 103,
};

enum class DataType : uint8_t {
  kNull = 0,
  kBool = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kIpv4 = 6,
  kIpv6 = 7,
  kString = 8,
  kBinary = 9,
};

// SPOP status codes (doc/SPOE.txt 3.5), sent in a DISCONNECT frame.
enum class Error : uint32_t {
  kNone = 0,
  kIo = 1,
  kTimeout = 2,
  kTooBig = 3,
  kInvalid = 4,
  kNoVersion = 5,
  kNoFrameSize = 6,
  kNoCapabilities = 7,
  kBadVersion = 8,
  kBadFrameSize = 9,
  kFragmentation = 10,
  kInterlaced = 11,
  kFrameIdNotFound = 12,
  kResource = 13,
  kUnknown = 99,
};
// The message an AGENT-DISCONNECT carries for `e` ("invalid frame received").
std::string_view ErrorMessage(Error e);

inline constexpr uint32_t kFlagFin = 1;
inline constexpr uint32_t kFlagAbort = 2;
// Neither peer may negotiate a frame smaller than this (doc/SPOE.txt 3.2).
inline constexpr uint32_t kMinFrameSize = 256;
// A frame's 4-byte big-endian length prefix (not counted in the frame's size).
inline constexpr size_t kLengthPrefix = 4;

// Peers' variable-length integers (HAProxy's encode_varint/decode_varint).
void AppendVarint(uint64_t value, std::string* out);
// Reads one from the front of *in and advances it; false (nothing consumed)
// when *in ends first or the value does not fit 64 bits.
bool ReadVarint(std::string_view* in, uint64_t* value);

// One typed value. Integers are kept as their 64-bit pattern (an INT32 of
// -1 is 0xffff...ff as HAProxy encodes it); `bytes` holds a string's or a
// binary's bytes and an address's 4 or 16 bytes.
struct Value {
  DataType type = DataType::kNull;
  bool boolean = false;
  uint64_t integer = 0;
  std::string_view bytes;
  bool is_text() const { return type == DataType::kString || type == DataType::kBinary; }
};
// Reads one TYPED-DATA; false (nothing consumed) when truncated, of a
// reserved type, or longer than what is left.
bool ReadValue(std::string_view* in, Value* out);
// An IPV4/IPV6 value as text ("192.0.2.1", "2001:db8::1"); "" for others.
std::string AddressText(const Value& v);

// Where the next frame of a stream of bytes ends.
enum class Cut { kNeedMore, kFrame, kTooBig };
// `buffered` starts at a frame's length prefix. kFrame: *frame is the frame
// (without the prefix) and *consumed its size with the prefix. kTooBig: the
// announced length is above `max_frame_size` (or is 0): the connection must
// end, as nothing after it can be framed. kNeedMore: read more first.
Cut CutFrame(std::string_view buffered, uint32_t max_frame_size, std::string_view* frame,
             size_t* consumed);

struct Frame {
  FrameType type = FrameType::kUnset;
  uint32_t flags = 0;
  uint64_t stream_id = 0;
  uint64_t frame_id = 0;
  std::string_view payload;
};
// Parses a frame's type and metadata. Unknown types are returned as they
// are (the caller skips them). kInvalid when the metadata is cut short;
// kFragmentation for an UNSET frame or a frame without FIN.
Error ParseFrame(std::string_view frame, Frame* out);

// HAPROXY-HELLO's KV-LIST. Unknown keys are skipped (after their value is
// read, so that a hostile one is still bounded).
struct Hello {
  std::string_view supported_versions;
  uint64_t max_frame_size = 0;
  std::string_view capabilities;
  bool healthcheck = false;
  std::string_view engine_id;
};
// kNoVersion, kNoFrameSize, kNoCapabilities for a missing mandatory key (or
// one of the wrong type), kInvalid for a malformed list, kResource past
// `max_items` items.
Error ParseHello(std::string_view payload, Hello* out, size_t max_items = 32);

// What the agent answers to a Hello: SPOP 2.0, the smaller frame size, the
// capabilities both sides have (pipelining only; never fragmentation or async).
struct Negotiated {
  uint32_t max_frame_size = 0;
  bool pipelining = false;
};
// kBadVersion when HAProxy supports no 2.x, kBadFrameSize when its
// max-frame-size is below kMinFrameSize. `agent_max_frame_size` must be at
// least kMinFrameSize.
Error Negotiate(const Hello& hello, uint32_t agent_max_frame_size, Negotiated* out);
// Whether a comma-separated capability list (spaces ignored) names `name`.
bool HasCapability(std::string_view list, std::string_view name);

// HAPROXY-DISCONNECT's KV-LIST.
struct Disconnect {
  uint64_t status_code = 0;
  std::string_view message;
};
Error ParseDisconnect(std::string_view payload, Disconnect* out);

struct Argument {
  std::string_view name;  // "" for an unnamed argument
  Value value;
};
struct Message {
  std::string_view name;
  std::vector<Argument> args;
};
// A NOTIFY's LIST-OF-MESSAGES. kResource past `max_messages` messages or
// `max_args` arguments in all; kInvalid when malformed.
Error ParseNotify(std::string_view payload, std::vector<Message>* out, size_t max_messages,
                  size_t max_args);

// HAProxy's binary header block (the `req.hdrs_bin` sample): a list of
// <name:varint-length string><value:varint-length string> pairs, ended by
// an empty name and an empty value. kInvalid when malformed or unterminated,
// kResource past `max_headers` pairs.
Error ParseHeaderBlock(std::string_view block,
                       std::vector<std::pair<std::string_view, std::string_view>>* out,
                       size_t max_headers);

// The variable scopes of a set-var action.
enum class Scope : uint8_t {
  kProcess = 0,
  kSession = 1,
  kTransaction = 2,
  kRequest = 3,
  kResponse = 4,
};

// An ACK's LIST-OF-ACTIONS, built one set-var at a time.
class ActionList {
 public:
  void SetString(Scope scope, std::string_view name, std::string_view value);
  void SetInt(Scope scope, std::string_view name, int64_t value);  // INT64 (signed varint pattern)
  void SetBool(Scope scope, std::string_view name, bool value);
  const std::string& payload() const { return payload_; }
  size_t size() const { return payload_.size(); }

 private:
  void Begin(Scope scope, std::string_view name);
  std::string payload_;
};

// The byte size of a frame with `payload` (prefix not counted), as CutFrame
// compares it to the negotiated max-frame-size.
size_t FrameSize(uint64_t stream_id, uint64_t frame_id, size_t payload_size);
// Appends a whole frame (length prefix, type, FIN, ids, payload) to *out.
void AppendFrame(FrameType type, uint64_t stream_id, uint64_t frame_id, std::string_view payload,
                 std::string* out);
void AppendAgentHello(const Negotiated& n, std::string* out);
void AppendAgentDisconnect(Error status, std::string_view message, std::string* out);
void AppendAck(uint64_t stream_id, uint64_t frame_id, const ActionList& actions, std::string* out);

}  // namespace tollgate::spop

#endif  // TOLLGATE_SERVER_SPOE_SPOP_H_
