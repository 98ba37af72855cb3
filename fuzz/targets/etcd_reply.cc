// Fuzz target: etcd's HTTP/JSON gateway replies as the etcd policy source
// reads them (src/runtime/etcd_reply.h): POST /v3/kv/range bodies, lines
// of the /v3/watch stream, /v3/kv/txn bodies (a PUT's compare on the key's
// mod_revision), and the base64 codec under them.
//
// Input: a mode byte, then the reply. Mode 0: a range reply; 1: a watch line;
// 3: a txn reply; 4: a /v3/auth/authenticate reply (the token goes into a
// header line: 1..kMaxTokenBytes of visible ASCII); 5: a refusal's error body
// (message bounded and printable); otherwise bytes for base64. Properties: no crash, hang or
// unbounded memory on any input; base64 round-trips; a range reply that parses re-encodes (its
// value through PutRequest's encoding) to the same bytes.
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "runtime/etcd_reply.h"

namespace etcd = tollgate::etcd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const std::string_view rest = in.Rest();
  if (mode == 0) {
    auto range = etcd::ParseRangeReply(rest);
    if (range.ok() && range->kv) {
      const std::string again =
          R"({"kvs":[{"value":")" + etcd::Base64Encode(range->kv->value) + R"("}]})";
      auto back = etcd::ParseRangeReply(again);
      FUZZ_CHECK(back.ok() && back->kv && back->kv->value == range->kv->value,
                 "a range value does not re-encode");
    }
  } else if (mode == 1) {
    auto watch = etcd::ParseWatchLine(rest);
    if (watch.ok()) {
      FUZZ_CHECK(watch->events.size() <= etcd::kMaxEvents, "too many events accepted");
      FUZZ_CHECK(watch->revision >= 0 && watch->compact_revision >= 0, "negative revision");
    }
  } else if (mode == 3) {
    auto txn = etcd::ParseTxnReply(rest);
    if (txn.ok()) FUZZ_CHECK(txn->revision >= 0, "negative revision");
  } else if (mode == 4) {
    auto token = etcd::ParseAuthReply(rest);
    if (token.ok()) {
      FUZZ_CHECK(!token->empty() && token->size() <= etcd::kMaxTokenBytes, "token size");
      for (char c : *token) FUZZ_CHECK(c > 0x20 && c < 0x7f, "a token byte a header cannot carry");
    }
  } else if (mode == 5) {
    auto error = etcd::ParseErrorReply(rest);
    if (error.ok()) {
      FUZZ_CHECK(error->message.size() <= etcd::kMaxErrorMessage, "a long message");
      for (char c : error->message) FUZZ_CHECK(c >= 0x20 && c < 0x7f, "an unprintable message");
    }
  } else {
    std::string decoded;
    FUZZ_CHECK(etcd::Base64Decode(etcd::Base64Encode(rest), &decoded) && decoded == rest,
               "base64 does not round-trip");
    if (etcd::Base64Decode(rest, &decoded)) {
      FUZZ_CHECK(etcd::Base64Encode(decoded).size() == rest.size(), "decoded length");
    }
  }
  return 0;
}
