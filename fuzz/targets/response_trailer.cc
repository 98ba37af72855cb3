// Fuzz target: the gateway's streamed response relay as far as a settlement
// sees it (server/proxy.cc, RelayStreamedResponse): an upstream response read
// the way the relay reads it (Beast's parser with a buffer_body through the
// bounded UpstreamBufferLimit buffer, arriving in pieces of a fuzzed size),
// the settlement's fields captured from head and trailer (ResponseCapture,
// server/response_capture.h), the body re-chunked for the client, then the
// captured value settled by an Enforcer on the local store
// (response_header:x-llm-tokens, ParseResponseCost, abort_cost).
//
// Input: a mode byte (bit 0: the settlement is told the client aborted and
// the upstream did not finish; bit 1: a second wanted field; bit 2: an
// explicit abort_cost; bits 3-7: the piece size), then the upstream's bytes.
// Properties:
//   - a response the relay finished: the captured value of each wanted field
//     is the last value of that name in the head and trailer together (as a
//     strict parser of the whole response sees them), cut to 64 bytes, and
//     the client's bytes are exactly one response with the same status and
//     body and none of the trailer's fields;
//   - a captured value passes ParseResponseCost exactly when it is 1 to 18
//     ASCII digits between spaces or tabs, and then has their value;
//   - the settlement charges exactly: the reported cost (clamped to
//     max_response_cost, default_cost when missing or bad), or for an aborted
//     client the larger of abort_cost and a valid reported cost; a 5xx refunds.
#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_enforcer.h"
#include "fuzz_input.h"
#include "server/config.h"
#include "server/proxy.h"
#include "server/relay_body.h"
#include "server/response_capture.h"
#include "tollgate/http_framing.h"
#include "tollgate/policy.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tollgate::HeaderField;
using tollgate::fuzz::Quote;

constexpr int64_t kDefaultCost = 500;
constexpr int64_t kMaxResponseCost = 200000;
constexpr int64_t kExplicitAbortCost = 70000;

// The upstream socket: the input in pieces of `piece` bytes, then EOF.
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

// The client socket: everything written is appended.
struct Sink {
  std::string out;
  template <class Buffers>
  size_t write_some(const Buffers& b, boost::system::error_code& ec) {
    ec = {};
    const size_t n = boost::asio::buffer_size(b);
    for (auto it = boost::asio::buffer_sequence_begin(b); it != boost::asio::buffer_sequence_end(b);
         ++it) {
      out.append(static_cast<const char*>((*it).data()), (*it).size());
    }
    return n;
  }
  template <class Buffers>
  size_t write_some(const Buffers& b) {
    boost::system::error_code ec;
    return write_some(b, ec);
  }
};

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// ReadFinalHeader's steps: the head through the bounded buffer, framing
// checked, 1xx skipped. False when the relay would answer 502.
bool ReadHead(PieceStream& up, beast::flat_buffer& ubuf,
              std::optional<http::response_parser<http::buffer_body>>& rp) {
  beast::error_code ec;
  for (;;) {
    rp.emplace();
    rp->body_limit(std::numeric_limits<std::uint64_t>::max());
    for (;;) {
      const size_t used = rp->put(ubuf.data(), ec);
      if (!ec && rp->is_header_done() &&
          tollgate::CheckFraming({static_cast<const char*>(ubuf.data().data()), used},
                                 tollgate::MessageKind::kResponse) !=
              tollgate::HttpFramingError::kOk) {
        return false;
      }
      ubuf.consume(used);
      if (ec != http::error::need_more) break;
      if (ubuf.size() >= ubuf.max_size()) return false;
      const size_t n = up.read_some(ubuf.prepare(beast::read_size(ubuf, 65536)), ec);
      ubuf.commit(n);
      if (ec) return false;
    }
    if (ec) return false;
    const int code = rp->get().result_int();
    if (code < 100 || code >= 200 || code == 101) return true;
  }
}

// Parses `wire` whole with a strict parser (1xx skipped when `skip_1xx`, a
// close-delimited body ended by the input's end); returns the bytes used, or
// 0 after an error. `p` holds the final response.
size_t StrictParse(std::string_view wire,
                   std::optional<http::response_parser<http::string_body>>& p, bool skip_1xx) {
  size_t used = 0;
  beast::error_code ec;
  p.emplace();
  for (;;) {
    p->eager(true);
    p->body_limit(std::numeric_limits<std::uint64_t>::max());
    p->header_limit(1 << 20);
    while (used < wire.size() && !p->is_done()) {
      const size_t n = p->put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
      if (ec) return 0;
      if (n == 0) break;
      used += n;
    }
    if (!p->is_done() && used == wire.size() && p->is_header_done()) p->put_eof(ec);
    if (ec) return 0;
    const int code = p->is_done() ? static_cast<int>(p->get().result_int()) : 0;
    if (!skip_1xx || code < 100 || code >= 200 || code == 101) return used;
    p.emplace();
  }
}

// The captured fields by name: ResponseCapture keeps one value a name, in the order the names
// first appeared in the response, which is not part of its contract (a settlement looks its
// fields up by name).
std::vector<HeaderField> ByName(std::vector<HeaderField> fields) {
  std::sort(fields.begin(), fields.end(),
            [](const HeaderField& a, const HeaderField& b) { return a.name < b.name; });
  return fields;
}

// The last value of each wanted name in `fields` (head and trailer), cut; by name.
std::vector<HeaderField> Expected(const std::vector<std::string>& wanted, const auto& fields) {
  std::vector<HeaderField> out;
  for (const std::string& want : wanted) {
    std::optional<std::string> last;
    for (const auto& f : fields) {
      if (beast::iequals(f.name_string(), want)) {
        last = std::string(View(f.value()).substr(0, tollgate::server::kMaxCapturedValue));
      }
    }
    if (last) out.push_back({want, *last});
  }
  return ByName(std::move(out));
}

std::optional<std::string> Find(const std::vector<HeaderField>& fields, std::string_view name) {
  for (const HeaderField& f : fields) {
    if (f.name == name) return f.value;
  }
  return std::nullopt;
}

// The reference reading of a reported cost: 1-18 digits between blanks.
std::optional<int64_t> ReferenceCost(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (v.empty() || v.size() > 18) return std::nullopt;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::shared_ptr<tollgate::PolicyStore> Policy(bool explicit_abort) {
  static const auto make = [](bool with_abort) {
    const std::string policy =
        R"({"rules": [{"name": "llm-tokens", "limit_keys": ["header:x-api-key"],
          "algorithm": "token_bucket",
          "algorithm_config": {"count": 100000, "period": "1h", "burst": 20000,
            "cost_source": "response_header:x-llm-tokens", "default_cost": 500,
            "max_response_cost": 200000)" +
        std::string(with_abort ? R"(, "abort_cost": 70000)" : "") + R"(}, "refund_on": ["5xx"]}]})";
    auto store = tollgate::PolicyStore::FromText(policy);
    FUZZ_CHECK(store.ok(), store.status().ToString());
    return *store;
  };
  static const auto plain = make(false);
  static const auto with_abort = make(true);
  return explicit_abort ? with_abort : plain;
}

// Settles `outcome` for one admitted request and checks what was charged.
void CheckSettlement(const tollgate::ResponseOutcome& outcome, bool explicit_abort) {
  auto env = tollgate::fuzz::FreshEnforcer(Policy(explicit_abort));
  const std::vector<tollgate::HeaderPair> headers = {{"x-api-key", "k"}};
  tollgate::RequestView view;
  view.method = "GET";
  view.path = "/";
  view.headers = headers;
  tollgate::CheckOutcome o = env->enforcer->Check(view);
  FUZZ_CHECK(o.allowed() && o.settlement != nullptr, "the first request is not admitted");
  FUZZ_CHECK(env->enforcer->Settle(*o.settlement, outcome).ok(), "settlement failed");
  // The reported cost, -1 when missing or bad (a plain value: GCC 12 warns
  // falsely about an optional here).
  const std::optional<std::string> value = Find(outcome.fields, "x-llm-tokens");
  int64_t reported = value ? ReferenceCost(*value).value_or(-1) : -1;
  int64_t expected = kDefaultCost;
  if (reported > kMaxResponseCost) {
    expected = kMaxResponseCost;
    reported = -1;
  } else if (reported >= 0) {
    expected = reported;
  }
  if (outcome.client_aborted) {
    const int64_t abort_cost = explicit_abort ? kExplicitAbortCost : kMaxResponseCost;
    expected = std::max(reported, abort_cost);
  }
  if (outcome.status / 100 == 5) expected = 0;  // refund_on "5xx"
  uint64_t settled = 0;
  for (const auto& c : env->enforcer->Counters()) {
    if (c.rule == "llm-tokens") settled = c.settled_cost;
  }
  FUZZ_CHECK(settled == static_cast<uint64_t>(std::max<int64_t>(0, expected - 1)),
             "charged " + std::to_string(settled) + " beyond the estimate, expected " +
                 std::to_string(expected) + " - 1 for " + Quote(value.value_or("(none)")));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const std::string_view upstream = in.Rest();
  const bool aborted = mode & 1;
  std::vector<std::string> wanted = {"x-llm-tokens"};
  if (mode & 2) wanted.push_back("x-cost");

  tollgate::server::ServerConfig cfg;
  PieceStream up{upstream, static_cast<size_t>(1 + (mode >> 3) * 97)};
  beast::flat_buffer ubuf(tollgate::server::UpstreamBufferLimit(cfg));
  std::optional<http::response_parser<http::buffer_body>> rp;
  if (!ReadHead(up, ubuf, rp)) return 0;  // 502
  auto& res = rp->get();
  tollgate::ResponseOutcome outcome;
  outcome.status = res.result_int();
  tollgate::server::ResponseCapture capture(wanted, &outcome.fields);
  capture.Head(res);
  const std::vector<HeaderField> head_expected = Expected(wanted, res);
  FUZZ_CHECK(ByName(outcome.fields) == head_expected, "head capture differs");

  // The body, relayed piece by piece and re-chunked (a chunked, HTTP/1.1 client).
  const int status = res.result_int();
  const bool bodyless = status < 200 || status == 204 || status == 304;
  res.erase(http::field::content_length);
  res.erase(http::field::transfer_encoding);
  res.erase(http::field::trailer);
  if (!bodyless) res.chunked(true);
  res.version(11);
  const auto client_head_fields = std::distance(res.begin(), res.end());
  Sink client;
  std::string body;
  char buf[tollgate::server::RelayScratch::kBufferSize];
  http::serializer<false, http::buffer_body> rs{res};
  beast::error_code ec;
  // As the relay (RelayStreamedResponse): a chunked body's head goes out before the body is read,
  // so a trailer parsed with the body is never written as head fields.
  if (rp->chunked() && !rp->is_done()) {
    http::write_header(client, rs, ec);
    FUZZ_CHECK(!ec, "writing the head to the client failed: " + ec.message());
  }
  do {
    if (!rp->is_done()) {
      tollgate::server::OpenRelayPiece(res.body(), buf, sizeof buf);
      http::read_some(up, ubuf, *rp, ec);
      if (ec == http::error::need_buffer) ec = {};
      if (ec == http::error::end_of_stream && rp->is_done()) ec = {};
      if (ec) break;  // the relay closes both connections
      tollgate::server::CloseRelayPiece(res.body(), buf, sizeof buf, !rp->is_done());
      body.append(buf, res.body().size);
    } else {
      tollgate::server::EndRelayPieces(res.body());
    }
    http::write(client, rs, ec);
    if (ec == http::error::need_buffer) ec = {};
    FUZZ_CHECK(!ec, "writing to the client failed: " + ec.message());
  } while (!rp->is_done() && !rs.is_done());
  const bool finished = !ec && rp->is_done();
  if (finished) capture.Trailer(res);

  if (finished) {
    // The whole response as a strict parser reads it: its last values win.
    std::optional<http::response_parser<http::string_body>> ref;
    StrictParse(upstream, ref, true);
    if (ref->is_done()) {
      FUZZ_CHECK(ref->get().body() == body, "relayed body differs: " + Quote(body));
      FUZZ_CHECK(ByName(outcome.fields) == Expected(wanted, ref->get()),
                 "trailer capture is not the last value of " + Quote(upstream, 400));
    }
    if (!bodyless && status >= 200) {
      std::optional<http::response_parser<http::string_body>> seen;
      const size_t n = StrictParse(client.out, seen, false);
      FUZZ_CHECK(seen->is_done() && n == client.out.size(),
                 "client bytes are not one response: " + Quote(client.out, 400));
      FUZZ_CHECK(seen->get().body() == body, "client body differs");
      FUZZ_CHECK(std::distance(seen->get().begin(), seen->get().end()) == client_head_fields,
                 "trailer fields relayed to the client: " + Quote(client.out, 400));
    }
  } else if (!finished) {
    FUZZ_CHECK(ByName(outcome.fields) == head_expected,
               "a cut response's capture is not the head's");
  }
  for (const HeaderField& f : outcome.fields) {
    int64_t v = -1;
    const bool ok = tollgate::ParseResponseCost(f.value, &v);
    const std::optional<int64_t> ref = ReferenceCost(f.value);
    FUZZ_CHECK(ok == ref.has_value() && (!ok || v == *ref),
               "ParseResponseCost(" + Quote(f.value) + ") disagrees with the reference");
  }

  outcome.client_aborted = aborted;
  CheckSettlement(outcome, mode & 4);
  return 0;
}
