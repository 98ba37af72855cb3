// Internal: etcd v3 over its HTTP/JSON gateway (grpc-gateway, served on the
// client port: POST /v3/kv/range, /v3/kv/put, /v3/kv/txn, /v3/watch,
// /v3/auth/authenticate), the requests the etcd policy source sends and a
// bounded, type-checked reading of the replies, refusals included (a non-200
// reply's {"error", "code", "message"} body).
//
// The gateway encodes keys and values as standard base64 and 64-bit integers
// as decimal strings ("revision": "42"); a number is accepted too. A watch
// reply is a stream of JSON objects, one a line: {"result": {...}} or
// {"error": {...}}. Every reply is hostile until parsed here: at most
// kMaxReplyBytes, nested at most kMaxReplyDepth, every field type-checked,
// revisions non-negative int64; an error names the field and why
// ("etcd watch reply: result.events[0].kv.value: not base64").
//
// Thread safety: pure functions.
#ifndef TOLLGATE_RUNTIME_ETCD_REPLY_H_
#define TOLLGATE_RUNTIME_ETCD_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/status.h"

namespace tollgate::etcd {

// A policy is at most 4 MiB; base64 makes that 5.4 MiB, plus the envelope.
inline constexpr size_t kMaxReplyBytes = 6 << 20;
inline constexpr int kMaxReplyDepth = 8;
inline constexpr size_t kMaxEvents = 1024;  // events in one watch reply

struct KeyValue {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;
};

// POST /v3/kv/range for one key.
struct RangeReply {
  int64_t revision = 0;        // the store's revision when it answered
  std::optional<KeyValue> kv;  // nullopt: the key does not exist
};
Result<RangeReply> ParseRangeReply(std::string_view body);

// POST /v3/kv/txn with one compare (the key's mod_revision) and one request:
// whether the compare held (the request ran) and the store's revision.
struct TxnReply {
  int64_t revision = 0;
  bool succeeded = false;  // absent in the reply: false (proto3 leaves it out)
};
Result<TxnReply> ParseTxnReply(std::string_view body);

struct WatchEvent {
  bool deleted = false;  // a DELETE event; kv.value is empty
  KeyValue kv;
};
// One line of POST /v3/watch's stream.
struct WatchReply {
  int64_t revision = 0;
  bool created = false;   // the watch is established
  bool canceled = false;  // the server ended the watch (see compact_revision, cancel_reason)
  // > 0: the start revision asked for was compacted; re-read the key with a
  // range and watch again from the range's revision + 1.
  int64_t compact_revision = 0;
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};
Result<WatchReply> ParseWatchLine(std::string_view line);

// POST /v3/auth/authenticate's reply: the token to send as the Authorization
// header of every later call. It goes into a header line, so it must be 1 to
// kMaxTokenBytes of visible ASCII (a simple token, a JWT).
inline constexpr size_t kMaxTokenBytes = 4096;
Result<std::string> ParseAuthReply(std::string_view body);

// The body of a refused gateway call (HTTP 4xx/5xx): the gRPC status code and
// etcd's message ("etcdserver: invalid auth token", code 16), the message cut
// to kMaxErrorMessage bytes with anything but printable ASCII as '?'.
inline constexpr size_t kMaxErrorMessage = 200;
inline constexpr int64_t kGrpcInvalidArgument = 3;
inline constexpr int64_t kGrpcPermissionDenied = 7;
inline constexpr int64_t kGrpcUnauthenticated = 16;
struct ErrorReply {
  int64_t code = 0;  // absent: 0
  std::string message;
};
Result<ErrorReply> ParseErrorReply(std::string_view body);
// Whether etcd says the token is no longer valid (expired, or etcd restarted
// and forgot its simple tokens): code 16, or a watch canceled for that reason.
bool TokenRejected(const ErrorReply& error);
bool TokenRejected(std::string_view cancel_reason);

// Request bodies.
std::string RangeRequest(std::string_view key);
std::string PutRequest(std::string_view key, std::string_view value);
// A txn that puts `value` (or, with nullopt, deletes the key) only while the
// key's mod_revision is `mod_revision` (0: the key does not exist).
std::string TxnIfRevisionRequest(std::string_view key, int64_t mod_revision,
                                 std::optional<std::string_view> value);
// {"name", "password"}; the password is never in any error or log line.
std::string AuthenticateRequest(std::string_view name, std::string_view password);
// Watches `key` from `start_revision` (0: from now).
std::string WatchRequest(std::string_view key, int64_t start_revision);

std::string Base64Encode(std::string_view in);
// Standard alphabet with padding (what the gateway sends); false on anything else.
bool Base64Decode(std::string_view in, std::string* out);

}  // namespace tollgate::etcd

#endif  // TOLLGATE_RUNTIME_ETCD_REPLY_H_
