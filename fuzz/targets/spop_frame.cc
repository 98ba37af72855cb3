// Fuzz target: tollgated's SPOE agent reading what HAProxy sends (server/
// spoe/spop.cc, spoe_message.cc), as server/spoe_session.cc reads it.
//
// Input: a byte choosing the frame size the agent accepts (256 + 64 * byte),
// then the bytes of an SPOP connection (length-prefixed frames).
// Properties:
//   - CutFrame only cuts a whole frame within the size, consuming its prefix
//     and bytes; kTooBig only for a length of 0 or above the size;
//   - a frame that parses has FIN and a type other than UNSET; a HELLO that
//     parses and negotiates gives a size in [256, ours] and pipelining only
//     when HAProxy named it;
//   - a NOTIFY's messages and arguments stay within the bounds asked for,
//     every view inside the frame; a message the agent would decide has a
//     method of visible ASCII, a path without control bytes (normalised: it
//     normalises to itself) and at most kMaxRequestHeaders fields;
//   - the ACK built from a decision on that request reads back as a frame
//     of the same ids within the size;
//   - varints read from the input re-encode to a value that reads back.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "server/spoe/spoe_message.h"
#include "server/spoe/spop.h"

namespace {

namespace spop = tollgate::spop;
using tollgate::fuzz::Quote;

bool Inside(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

void CheckVarints(std::string_view bytes) {
  for (int i = 0; i < 8 && !bytes.empty(); ++i) {
    uint64_t v = 0;
    const size_t before = bytes.size();
    if (!spop::ReadVarint(&bytes, &v)) {
      FUZZ_CHECK(bytes.size() == before, "a refused varint consumed bytes");
      bytes.remove_prefix(1);
      continue;
    }
    std::string again;
    spop::AppendVarint(v, &again);
    std::string_view in = again;
    uint64_t back = 0;
    FUZZ_CHECK(spop::ReadVarint(&in, &back) && back == v && in.empty(),
               "varint round trip of " + std::to_string(v));
  }
}

void CheckNotify(const spop::Frame& frame, uint32_t max_frame, std::string_view whole) {
  std::vector<spop::Message> messages;
  if (spop::ParseNotify(frame.payload, &messages, 16, 256) != spop::Error::kNone) return;
  FUZZ_CHECK(messages.size() <= 16, "too many messages");
  size_t args = 0;
  for (const spop::Message& m : messages) {
    args += m.args.size();
    FUZZ_CHECK(Inside(m.name, whole), "a message name outside the frame");
    for (const spop::Argument& a : m.args) {
      FUZZ_CHECK(Inside(a.name, whole) && Inside(a.value.bytes, whole), "a view outside");
    }
    spop::SpoeRequest request;
    if (!spop::RequestFromMessage(m, &request).empty()) continue;
    FUZZ_CHECK(!request.method.empty(), "decided without a method");
    for (char c : request.method)
      FUZZ_CHECK(c > ' ' && c < 0x7f, "method " + Quote(request.method));
    FUZZ_CHECK(!request.path.empty(), "decided without a path");
    for (char c : request.path) {
      FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, "path " + Quote(request.path));
    }
    FUZZ_CHECK(tollgate::NormalizePath(request.path) == request.path,
               "path not normalised: " + Quote(request.path));
    FUZZ_CHECK(request.headers.size() <= spop::kMaxRequestHeaders, "too many headers");
    // An answer carrying what was read, within the frame.
    tollgate::CheckOutcome outcome;
    outcome.headers.push_back({"RateLimit", std::string(request.path.substr(0, 100))});
    outcome.headers.push_back({std::string(request.method), "x"});
    spop::ActionList actions;
    const size_t budget = max_frame - spop::FrameSize(frame.stream_id, frame.frame_id, 0);
    spop::ActionsFromOutcome(outcome, budget, &actions);
    FUZZ_CHECK(actions.size() <= budget, "actions over budget");
    std::string wire;
    spop::AppendAck(frame.stream_id, frame.frame_id, actions, &wire);
    std::string_view body;
    size_t consumed = 0;
    FUZZ_CHECK(spop::CutFrame(wire, max_frame, &body, &consumed) == spop::Cut::kFrame &&
                   consumed == wire.size(),
               "the ACK does not frame");
    spop::Frame ack;
    FUZZ_CHECK(spop::ParseFrame(body, &ack) == spop::Error::kNone &&
                   ack.type == spop::FrameType::kAck && ack.stream_id == frame.stream_id &&
                   ack.frame_id == frame.frame_id && ack.payload == actions.payload(),
               "the ACK does not read back");
  }
  FUZZ_CHECK(args <= 256, "too many arguments");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint32_t ours = 256 + 64 * uint32_t(data[0]);
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  CheckVarints(stream);
  uint32_t max_frame = ours;
  for (int frames = 0; frames < 64; ++frames) {
    std::string_view body;
    size_t consumed = 0;
    const spop::Cut cut = spop::CutFrame(stream, max_frame, &body, &consumed);
    if (cut == spop::Cut::kNeedMore) break;
    if (cut == spop::Cut::kTooBig) {
      FUZZ_CHECK(stream.size() >= 4, "kTooBig without a length");
      const auto* p = reinterpret_cast<const unsigned char*>(stream.data());
      const uint32_t n = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
      FUZZ_CHECK(n == 0 || n > max_frame, "kTooBig for " + std::to_string(n));
      break;
    }
    FUZZ_CHECK(consumed == body.size() + 4 && body.size() <= max_frame && consumed <= stream.size(),
               "a cut outside the stream");
    spop::Frame frame;
    if (spop::ParseFrame(body, &frame) == spop::Error::kNone) {
      FUZZ_CHECK((frame.flags & spop::kFlagFin) != 0 && frame.type != spop::FrameType::kUnset,
                 "a fragment parsed");
      FUZZ_CHECK(Inside(frame.payload, body), "payload outside the frame");
      if (frame.type == spop::FrameType::kHaproxyHello) {
        spop::Hello hello;
        spop::Negotiated n;
        if (spop::ParseHello(frame.payload, &hello) == spop::Error::kNone &&
            spop::Negotiate(hello, ours, &n) == spop::Error::kNone) {
          FUZZ_CHECK(n.max_frame_size >= spop::kMinFrameSize && n.max_frame_size <= ours,
                     "negotiated " + std::to_string(n.max_frame_size));
          FUZZ_CHECK(!n.pipelining || spop::HasCapability(hello.capabilities, "pipelining"),
                     "pipelining not asked for");
          max_frame = n.max_frame_size;
        }
      } else if (frame.type == spop::FrameType::kNotify) {
        CheckNotify(frame, max_frame, body);
      } else if (frame.type == spop::FrameType::kHaproxyDisconnect) {
        spop::Disconnect d;
        (void)spop::ParseDisconnect(frame.payload, &d);
      }
    }
    stream.remove_prefix(consumed);
  }
  return 0;
}
