// Fuzz target: the gateway's streamed request path (server/proxy.cc,
// ProxyStreamed and SendStreamed): a request with a body read the way the
// gateway reads it (the head under max_header_bytes, then Beast's parser with
// a buffer_body through the bounded client read buffer, arriving in pieces of
// a fuzzed size), its chunked framing bounded by ChunkLimits
// (server/chunk_limits.h: the extensions of a body, the trailer section),
// bodies by gateway.max_body_bytes, and the body relayed upstream piece by
// piece, re-framed (chunked again, without extensions or trailer).
//
// Input: a mode byte (bits 0-1: max_chunk_extension_bytes 0 / 16 / 4096 /
// 65536; bits 2-3: max_trailer_bytes 64 / 256 / 8192 / 65536; bit 4:
// max_body_bytes 100 instead of 16 MiB; bits 5-7: the piece size), then the
// client's bytes.
// Properties:
//   - every outcome is the gateway's: relayed, 413, 400 (bad framing or
//     extensions), 431 (the trailer section), or the client gone (the input
//     ended);
//   - a relayed request is exactly one request upstream, with the client's
//     method and target, the body a strict parser decodes from the client's
//     bytes, and none of the trailer's fields; its extensions together fit
//     max_chunk_extension_bytes and its body max_body_bytes;
//   - no false refusal: a request a strict parser reads whole whose message
//     fits max_trailer_bytes (and max_header_bytes), whose extensions fit and
//     whose body fits is relayed.
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "server/chunk_limits.h"
#include "server/config.h"
#include "server/proxy_wire.h"
#include "server/relay_body.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tollgate::fuzz::Quote;

// The client socket: the input in pieces of `piece` bytes, then EOF.
struct PieceStream {
  std::string_view data;
  size_t piece = 1;
  template <class Buffers>
  size_t read_some(const Buffers& b, boost::system::error_code& ec) {
    if (data.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const size_t n =
        boost::asio::buffer_copy(b, boost::asio::buffer(data.data(), std::min(piece, data.size())));
    data.remove_prefix(n);
    return n;
  }
  template <class Buffers>
  size_t read_some(const Buffers& b) {
    boost::system::error_code ec;
    const size_t n = read_some(b, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
};

// The upstream socket: everything written is appended.
struct Sink {
  std::string out;
  template <class Buffers>
  size_t write_some(const Buffers& b, boost::system::error_code& ec) {
    ec = {};
    for (auto it = boost::asio::buffer_sequence_begin(b); it != boost::asio::buffer_sequence_end(b);
         ++it) {
      out.append(static_cast<const char*>((*it).data()), (*it).size());
    }
    return boost::asio::buffer_size(b);
  }
  template <class Buffers>
  size_t write_some(const Buffers& b) {
    boost::system::error_code ec;
    return write_some(b, ec);
  }
};

enum class Outcome { kRelayed, kTooLarge, kBadFraming, kTrailerTooLarge, kClientGone };

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// A strict, unbounded reading of the client's request: its body, the size of
// all its chunk extensions, how many bytes it took.
struct Reference {
  bool done = false;
  std::string method, target, body;
  size_t extension_bytes = 0;
  size_t used = 0;
  bool chunked = false;
};

Reference ReadReference(std::string_view wire) {
  Reference r;
  http::request_parser<http::string_body> p;
  p.eager(true);
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  p.header_limit(1 << 20);
  auto count = [&r](std::uint64_t, beast::string_view ext, beast::error_code&) {
    r.extension_bytes += ext.size();
  };
  p.on_chunk_header(count);
  beast::error_code ec;
  while (r.used < wire.size() && !p.is_done()) {
    const size_t n = p.put(boost::asio::buffer(wire.data() + r.used, wire.size() - r.used), ec);
    if (ec) return r;
    if (n == 0) break;
    r.used += n;
  }
  if (!p.is_done()) return r;
  r.done = true;
  r.chunked = p.chunked();
  r.method = std::string(View(p.get().method_string()));
  r.target = std::string(View(p.get().target()));
  r.body = p.get().body();
  return r;
}

// SendStreamed's reading and relaying, its refusals classified as it does.
Outcome Relay(const tollgate::server::ServerConfig& cfg, PieceStream& client,
              beast::flat_buffer& buffer, http::request_parser<http::empty_body>& head,
              Sink& upstream) {
  http::request_parser<http::buffer_body> p(std::move(head));
  p.body_limit(cfg.gateway_max_body_bytes);
  tollgate::server::ChunkLimits limits(cfg, buffer);
  p.on_chunk_header(limits);
  if (p.content_length().value_or(0) > cfg.gateway_max_body_bytes) return Outcome::kTooLarge;
  auto& req = p.get();
  const bool chunked = p.chunked();
  const auto length = p.content_length();
  req.erase(http::field::content_length);
  req.erase(http::field::transfer_encoding);
  req.erase(http::field::trailer);
  if (chunked) {
    req.chunked(true);
  } else if (length) {
    req.content_length(*length);
  }
  char buf[tollgate::server::RelayScratch::kBufferSize];
  http::serializer<true, http::buffer_body> sr{req};
  beast::error_code ec;
  do {
    if (!p.is_done()) {
      tollgate::server::OpenRelayPiece(req.body(), buf, sizeof buf);
      http::read(client, buffer, p, ec);
      if (ec == http::error::need_buffer) ec = {};
      if (ec == http::error::body_limit) return Outcome::kTooLarge;
      if (ec && ec != http::error::end_of_stream && ec != http::error::partial_message &&
          ec.category() == http::make_error_code(http::error::header_limit).category()) {
        return ec == http::error::header_limit ? Outcome::kTrailerTooLarge : Outcome::kBadFraming;
      }
      if (ec) return Outcome::kClientGone;
      tollgate::server::CloseRelayPiece(req.body(), buf, sizeof buf, !p.is_done());
    } else {
      tollgate::server::EndRelayPieces(req.body());
    }
    http::write(upstream, sr, ec);
    if (ec == http::error::need_buffer) ec = {};
    FUZZ_CHECK(!ec, "writing upstream failed: " + ec.message());
  } while (!p.is_done() && !sr.is_done());
  return Outcome::kRelayed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const std::string_view wire = in.Rest();
  static constexpr size_t kExtensions[] = {0, 16, 4096, 65536};
  static constexpr size_t kTrailers[] = {64, 256, 8192, 65536};
  tollgate::server::ServerConfig cfg;
  cfg.max_chunk_extension_bytes = kExtensions[mode & 3];
  cfg.max_trailer_bytes = kTrailers[(mode >> 2) & 3];
  if (mode & 16) cfg.gateway_max_body_bytes = 100;

  PieceStream client{wire, static_cast<size_t>(1 + (mode >> 5) * 613)};
  beast::flat_buffer buffer(tollgate::server::ReadBufferLimit(cfg));
  http::request_parser<http::empty_body> head;
  head.header_limit(static_cast<std::uint32_t>(cfg.max_header_bytes));
  beast::error_code ec;
  http::read_header(client, buffer, head, ec);
  if (ec || head.is_done()) return 0;  // refused by the session, or bodyless (the fast path)
  const std::string method(View(head.get().method_string()));
  const std::string target(View(head.get().target()));

  Sink upstream;
  const Outcome outcome = Relay(cfg, client, buffer, head, upstream);
  const Reference ref = ReadReference(wire);
  if (outcome == Outcome::kRelayed) {
    FUZZ_CHECK(ref.done, "relayed a request a strict parser does not read whole: " + Quote(wire));
    FUZZ_CHECK(ref.extension_bytes <= cfg.max_chunk_extension_bytes,
               std::to_string(ref.extension_bytes) + " bytes of chunk extensions relayed");
    FUZZ_CHECK(ref.body.size() <= cfg.gateway_max_body_bytes, "a body over the limit relayed");
    http::request_parser<http::string_body> up;
    up.eager(true);
    up.body_limit(std::numeric_limits<std::uint64_t>::max());
    up.header_limit(1 << 20);
    size_t used = 0;
    while (used < upstream.out.size() && !up.is_done()) {
      const size_t n =
          up.put(boost::asio::buffer(upstream.out.data() + used, upstream.out.size() - used), ec);
      FUZZ_CHECK(!ec, "the upstream request does not parse: " + ec.message());
      if (n == 0) break;
      used += n;
    }
    FUZZ_CHECK(up.is_done() && used == upstream.out.size(),
               "not exactly one request upstream: " + Quote(upstream.out, 400));
    FUZZ_CHECK(View(up.get().method_string()) == method && View(up.get().target()) == target,
               "method or target changed");
    FUZZ_CHECK(up.get().body() == ref.body, "body changed: " + Quote(up.get().body()));
    // Re-chunked without extensions or trailer: the body ends with an empty last chunk.
    if (ref.chunked) {
      FUZZ_CHECK(upstream.out.ends_with("\n0\r\n\r\n"),
                 "a trailer relayed upstream: " + Quote(upstream.out, 400));
    }
  }
  const bool fits = ref.done && ref.used <= std::min(cfg.max_trailer_bytes, cfg.max_header_bytes) &&
                    ref.extension_bytes <= cfg.max_chunk_extension_bytes &&
                    ref.body.size() <= cfg.gateway_max_body_bytes;
  if (fits) {
    FUZZ_CHECK(outcome == Outcome::kRelayed, "a request within every limit refused (" +
                                                 std::to_string(int(outcome)) +
                                                 "): " + Quote(wire, 400));
  }
  return 0;
}
