// Internal: the gateway's hand-written HTTP/1.1 framing for small messages.
//
// Most gateway traffic is a bodyless request and a small Content-Length
// response. For those, proxy.cc skips Beast's parser/serializer pair per
// message: the request header sent upstream is written into one string, and a
// response whose header and body fit the relay buffer is read whole, its header
// rewritten into one string and sent with the body in one write. These helpers
// do the parsing and the rewriting; proxy.cc does the I/O and falls back to the
// streaming path for everything else (request bodies, chunked or close-delimited
// or large responses, 1xx, HEAD).
//
// The rewriting is the same as the streaming path's: hop-by-hop fields (RFC
// 9110 7.6.1) and those named by Connection are dropped, except the framing,
// routing and forwarding fields (KeptDespiteConnection), which Connection
// cannot remove; Content-Length and Transfer-Encoding are never copied but
// re-derived from what the parser framed; Host becomes the upstream's. From an
// untrusted peer, X-Forwarded-For/-Host/-Proto, X-Real-IP and Forwarded are
// dropped and tollgated's own set (X-Forwarded-For: peer, X-Forwarded-Host:
// Host, X-Forwarded-Proto: http, X-Real-IP: peer); from a trusted proxy the peer
// is appended to X-Forwarded-For and the others pass, X-Forwarded-Host/-Proto
// set when absent. On the way back the rate-limit headers replace any upstream
// fields of the same name, except RateLimit and RateLimit-Policy, whose
// upstream lines are kept and tollgate's items appended as more lines
// (draft-ietf-httpapi-ratelimit-headers: an intermediary must not remove the
// origin's).
//
// Nothing here allocates once the caller's output strings and field vector
// have grown; views point into the caller's buffers. Not thread-safe; one
// object per request.
#ifndef TOLLGATE_SERVER_PROXY_WIRE_H_
#define TOLLGATE_SERVER_PROXY_WIRE_H_

#include <algorithm>
#include <array>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/message.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/config.h"
#include "tollgate/request.h"

namespace tollgate::server {

// True for the fields a proxy never forwards (Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Upgrade, Proxy-Authorization,
// Proxy-Authenticate), in any case. Transfer-Encoding is not among them: the
// framing code handles it.
bool IsHopByHop(std::string_view name);

// True when the comma-separated tokens of one Connection field's value name
// `field_name`, in any case.
bool NamedByConnection(std::string_view field_name, std::string_view connection_value);

// True for the fields a Connection option never removes: framing
// (Content-Length, Transfer-Encoding), routing (Host) and forwarding
// (X-Forwarded-*, X-Real-IP, Forwarded). Dropping Content-Length would send a
// body unframed, to be read upstream as another request (issue 14).
bool KeptDespiteConnection(std::string_view name);

// True for the forwarding fields tollgated sets itself for an untrusted peer:
// X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, X-Real-IP, Forwarded.
bool IsForwardingField(std::string_view name);

// True for the fields whose upstream lines are kept beside tollgate's own
// (RateLimit, RateLimit-Policy: lists that may span several lines).
bool IsAppendableRateLimitField(std::string_view name);

struct FieldView {
  std::string_view name;
  std::string_view value;
};

// One gateway request's reusable memory, pooled per worker: the relay buffer
// (body pieces, or a whole small response), the rewritten header, the parsed
// upstream fields.
struct RelayScratch {
  static constexpr size_t kBufferSize = 16 * 1024;
  std::unique_ptr<char[]> buffer{new char[kBufferSize]};
  std::string head;
  std::vector<FieldView> fields;
};

// An upstream response header parsed in place by Beast's basic_parser (the same
// validation as the streaming path: bad framing, conflicting Content-Length,
// limits). Field views point into the bytes given to Parse, which must stay put
// while the views are used.
class UpstreamResponseHead final : public boost::beast::http::basic_parser<false> {
 public:
  enum class State { kNeedMore, kComplete, kInvalid };

  // `fields` is cleared and receives the fields; reused across requests by the caller.
  explicit UpstreamResponseHead(std::vector<FieldView>* fields);

  // `bytes`: everything read so far, from the first byte of the response. Call
  // again with more bytes (same start) after kNeedMore.
  State Parse(std::string_view bytes);

  // After kComplete:
  size_t header_size() const { return header_size_; }
  int status() const { return status_; }
  std::string_view reason() const { return reason_; }
  const std::vector<FieldView>& fields() const { return *fields_; }
  // The header frames the whole body by itself (Content-Length, or a status that
  // has none), it is a final response other than 101, every field value is a
  // view into the input (no obs-fold rewrite) and at most kMaxConnectionFields
  // Connection fields name other fields. Otherwise the streaming path must
  // handle the response.
  bool Relayable() const;
  // The values of the Connection fields that name other fields (the first
  // kMaxConnectionFields).
  static constexpr size_t kMaxConnectionFields = 4;
  std::span<const std::string_view> connection_values() const {
    return {connection_.data(), std::min(connection_count_, kMaxConnectionFields)};
  }
  // The body's length, when Relayable().
  uint64_t body_size() const;

 private:
  void on_request_impl(boost::beast::http::verb, std::string_view, std::string_view, int,
                       boost::beast::error_code&) override {}
  void on_response_impl(int code, std::string_view reason, int version,
                        boost::beast::error_code& ec) override;
  void on_field_impl(boost::beast::http::field, std::string_view name, std::string_view value,
                     boost::beast::error_code& ec) override;
  void on_header_impl(boost::beast::error_code&) override {}
  void on_body_init_impl(boost::optional<std::uint64_t> const&,
                         boost::beast::error_code&) override {}
  size_t on_body_impl(std::string_view, boost::beast::error_code&) override { return 0; }
  void on_chunk_header_impl(std::uint64_t, std::string_view, boost::beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, std::string_view, boost::beast::error_code&) override {
    return 0;
  }
  void on_finish_impl(boost::beast::error_code&) override {}

  std::vector<FieldView>* fields_;
  std::string_view input_;
  size_t header_size_ = 0;
  int status_ = 0;
  std::string_view reason_;
  bool copied_value_ = false;  // Beast unfolded an obs-fold value into its own storage
  std::array<std::string_view, kMaxConnectionFields> connection_;
  size_t connection_count_ = 0;
};

// Appends the header to send upstream for the bodyless client request `req`
// from `peer_ip` (`peer_trusted`: a trusted proxy). A non-empty `traceparent`
// (the sampled decision span, server/tracing.h) replaces every traceparent
// field of the request; empty, the request's fields pass unchanged.
// `client_tls`: the client came over TLS (X-Forwarded-Proto: https). False (and
// `out` partly written) when the request needs the streaming path (more than
// 4 Connection fields).
[[nodiscard]] bool AppendUpstreamRequestHead(const boost::beast::http::request_header<>& req,
                                             std::string_view peer_ip, bool peer_trusted,
                                             const UpstreamUrl& upstream, std::string* out,
                                             std::string_view traceparent = {},
                                             bool client_tls = false);

// The request-target to send upstream: the base path, then `target` (already
// origin-form, tollgate/http_framing.h); "*" stays "*".
void AppendUpstreamTarget(std::string_view target, const UpstreamUrl& upstream, std::string* out);

// Appends the response header to send to the client: the upstream's status and
// fields without hop-by-hop and framing ones and without those `added`
// replaces, then Content-Length as the parser framed the body, then `added`,
// then Connection as `keep_alive` and the client's version require.
void AppendClientResponseHead(const UpstreamResponseHead& head,
                              const std::vector<HeaderField>& added, bool keep_alive,
                              unsigned client_version, std::string* out);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_PROXY_WIRE_H_
