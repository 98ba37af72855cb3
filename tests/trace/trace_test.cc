#include <gtest/gtest.h>

#include "testing/otlp_collector.h"
#include "testing/timing.h"
#include "trace/exporter.h"
#include "trace/otlp_json.h"
#include "trace/otlp_reply.h"
#include "trace/span.h"
#include "trace/traceparent.h"

namespace tollgate::trace {
namespace {

using testing::OtlpCollector;
using testing::ReceivedSpan;

constexpr char kValid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(Traceparent, ParsesAValidHeaderToBytes) {
  auto c = ParseTraceparent(kValid);
  ASSERT_TRUE(c);
  EXPECT_EQ(Hex(c->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(Hex(c->span_id), "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled());
  EXPECT_EQ(FormatTraceparent(*c), kValid);
  auto unsampled = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled);
  EXPECT_FALSE(unsampled->sampled());
  // Unknown flag bits are not passed on.
  EXPECT_EQ(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff")->flags, 1);
  // A later version: the first 55 bytes as version 00, more fields after '-'.
  EXPECT_TRUE(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"));
  EXPECT_TRUE(ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
}

TEST(Traceparent, RefusesEveryMalformedHeader) {
  const std::string too_long =
      std::string("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-") +
      std::string(kMaxTraceparentBytes, 'a');
  for (std::string bad : {
           std::string(""),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011"),
           std::string("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
           std::string("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A"),
           std::string("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
           std::string("0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
           std::string("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"),
           std::string("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what"),
           std::string(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\0", 56),
           too_long,
       }) {
    EXPECT_FALSE(ParseTraceparent(bad)) << bad;
  }
}

TEST(Sampler, RatioForRootsParentFlagForChildren) {
  SpanContext sampled = *ParseTraceparent(kValid);
  SpanContext unsampled = sampled;
  unsampled.flags = 0;
  Sampler none(0.0, true), all(1.0, true), half(0.5, true), ratio_only(0.0, false);
  EXPECT_FALSE(none.ShouldSample(nullptr, 0));
  EXPECT_TRUE(none.ShouldSample(&sampled, 0));
  EXPECT_FALSE(all.ShouldSample(&unsampled, 0));
  EXPECT_TRUE(all.ShouldSample(nullptr, UINT64_MAX));
  EXPECT_TRUE(half.ShouldSample(nullptr, (uint64_t{1} << 63) - 1));
  EXPECT_FALSE(half.ShouldSample(nullptr, uint64_t{1} << 63));
  EXPECT_FALSE(ratio_only.ShouldSample(&sampled, 0));  // not parent based: the ratio decides
  EXPECT_FALSE(none.SamplesRoots());                   // tollgated draws no random number then
  EXPECT_TRUE(all.SamplesRoots());
  EXPECT_TRUE(half.SamplesRoots());
}

TEST(IdSource, IdsAreNeverZeroAndDiffer) {
  IdSource ids(42);
  TraceId a = ids.NewTraceId(), b = ids.NewTraceId();
  EXPECT_FALSE(IsZero(a));
  EXPECT_NE(a, b);
  EXPECT_FALSE(IsZero(ids.NewSpanId()));
}

Span ExampleSpan() {
  Span s;
  s.context = *ParseTraceparent(kValid);
  s.context.span_id = {1, 2, 3, 4, 5, 6, 7, 8};
  s.parent_span_id = ParseTraceparent(kValid)->span_id;
  s.name = "tollgate.decision";
  s.kind = SpanKind::kServer;
  s.start_unix_ns = 1'700'000'000'000'000'000;
  s.end_unix_ns = s.start_unix_ns + 1234;
  s.attributes = {{"tollgate.rule", std::string("free\xff")},  // invalid UTF-8: replaced
                  {"tollgate.cost", int64_t{3}},
                  {"tollgate.enforced", true}};
  s.status = SpanStatus::kError;
  s.status_message = "store timeout";
  return s;
}

TEST(OtlpJson, EncodesWhatAStrictReceiverDecodes) {
  Span s = ExampleSpan();
  std::vector<ReceivedSpan> got;
  std::string json = EncodeOtlpJson(std::span<const Span>(&s, 1), "tollgated");
  ASSERT_EQ(testing::DecodeOtlpJson(json, &got), "") << json;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(got[0].span_id, "0102030405060708");
  EXPECT_EQ(got[0].parent_span_id, "00f067aa0ba902b7");
  EXPECT_EQ(got[0].service_name, "tollgated");
  EXPECT_EQ(got[0].kind, 2);
  EXPECT_EQ(got[0].start_ns, uint64_t(s.start_unix_ns));
  EXPECT_EQ(got[0].end_ns - got[0].start_ns, 1234u);
  EXPECT_EQ(got[0].attributes["tollgate.cost"], "3");
  EXPECT_EQ(got[0].attributes["tollgate.enforced"], "true");
  EXPECT_EQ(got[0].attributes["tollgate.rule"], "free\xef\xbf\xbd");
  EXPECT_EQ(got[0].status_code, 2);
  // The strict decoder refuses what the mapping does not allow (it can fail).
  std::string base64_ids = json;
  base64_ids.replace(base64_ids.find("4bf92f35"), 8, "S/kvNXez");
  EXPECT_NE(testing::DecodeOtlpJson(base64_ids, &got), "");
  std::string numeric_time = json;
  numeric_time.replace(numeric_time.find("\"1700000000000000000\""), 21, "1700000000000000000");
  EXPECT_NE(testing::DecodeOtlpJson(numeric_time, &got), "");
}

TEST(CollectorUrl, ParsesHostPortPathAndRefusesTheRest) {
  auto u = ParseCollectorUrl("http://otel.internal:4318/v1/traces");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "otel.internal");
  EXPECT_EQ(u->port, 4318);
  EXPECT_EQ(u->path, "/v1/traces");
  auto v6 = ParseCollectorUrl("http://[::1]:9999");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->path, "/v1/traces");
  EXPECT_EQ(v6->host_header, "[::1]:9999");
  for (const char* bad : {"https://x/v1/traces", "http://", "http://h:0", "http://h:65536",
                          "http://h:12x", "http://[::1", "http://h/a b", "http://h@x/"}) {
    EXPECT_FALSE(ParseCollectorUrl(bad).ok()) << bad;
  }
}

TEST(Exporter, SendsBatchesToACollector) {
  OtlpCollector collector;
  ExporterOptions o;
  o.endpoint = collector.endpoint();
  o.max_batch = 3;
  o.flush_interval = Millis(10);
  auto exporter = OtlpHttpExporter::Create(o);
  ASSERT_TRUE(exporter.ok()) << exporter.status().ToString();
  for (int i = 0; i < 7; ++i) EXPECT_TRUE((*exporter)->Enqueue(ExampleSpan()));
  ASSERT_TRUE(testing::WaitFor([&] { return (*exporter)->stats().exported == 7; }));
  EXPECT_EQ(collector.spans().size(), 7u);
  EXPECT_GE(collector.requests(), 3u);  // at most 3 spans a request
  EXPECT_TRUE(collector.errors().empty());
}

// A hanging collector: the queue never holds more than max_queue; the rest is
// dropped and counted; Enqueue returns at once; the destructor does not wait
// for the hung request (its timeout is an hour).
TEST(Exporter, TheQueueIsBoundedBehindAHangingCollector) {
  OtlpCollector collector(OtlpCollector::Mode::kHang);
  ExporterOptions o;
  o.endpoint = collector.endpoint();
  o.max_queue = 5;
  o.max_batch = 2;
  o.flush_interval = Millis(10);
  o.timeout = Millis(3'600'000);
  o.shutdown_timeout = Millis(10);
  auto exporter = OtlpHttpExporter::Create(o);
  ASSERT_TRUE(exporter.ok());
  EXPECT_TRUE((*exporter)->Enqueue(ExampleSpan()));
  ASSERT_TRUE(testing::WaitFor([&] { return collector.requests() == 1; }));
  int accepted = 0;
  for (int i = 0; i < 100; ++i) accepted += (*exporter)->Enqueue(ExampleSpan());
  EXPECT_EQ(accepted, 5);
  auto s = (*exporter)->stats();
  EXPECT_EQ(s.dropped, 95u);
  EXPECT_EQ(s.queued, 5u);
  exporter->reset();
}

// A collector URL with user info is refused without quoting its password.
TEST(CollectorUrl, ErrorsNeverQuoteAPassword) {
  for (const char* bad : {"https://user:s3cret@collector:4318/v1/traces",
                          "http://user:s3cret@collector:4318/v1/traces", "s3cret@collector"}) {
    auto url = ParseCollectorUrl(bad);
    ASSERT_FALSE(url.ok()) << bad;
    EXPECT_EQ(url.status().message().find("s3cret"), std::string::npos) << url.status().message();
  }
}

// The reply reader: every framing, fed whole or a byte at a time.
TEST(CollectorReply, FramesLengthChunkedAndCloseDelimitedReplies) {
  struct Case {
    std::string bytes;
    int status;
    bool done_before_close;
    size_t body;
  };
  const Case cases[] = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, true, 2},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a=b\r\n{}\r\n0\r\nX-T: "
       "1\r\n\r\n",
       200, true, 2},
      {"HTTP/1.0 503 Busy\r\n\r\nlater", 503, false, 5},
      {"HTTP/1.1 204 No Content\r\n\r\n", 204, true, 0},
  };
  for (const Case& c : cases) {
    for (bool bytewise : {false, true}) {
      SCOPED_TRACE(c.bytes + (bytewise ? " (a byte at a time)" : ""));
      CollectorReply reply;
      if (bytewise) {
        for (char ch : c.bytes) reply.Feed(std::string_view(&ch, 1));
      } else {
        reply.Feed(c.bytes);
      }
      EXPECT_EQ(reply.state() == CollectorReply::State::kDone, c.done_before_close);
      EXPECT_EQ(reply.Finish(), CollectorReply::State::kDone) << reply.error();
      EXPECT_EQ(reply.status(), c.status);
      EXPECT_EQ(reply.body_size(), c.body);
      EXPECT_EQ(reply.success(), c.status / 100 == 2);
    }
  }
  for (const char* bad : {"HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 20x OK\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab",
                          "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n"}) {
    CollectorReply reply;
    reply.Feed(bad);
    EXPECT_EQ(reply.Finish(), CollectorReply::State::kFailed) << bad;
    EXPECT_FALSE(reply.overflow()) << bad;
  }
  CollectorReply cut;  // closed mid-body
  cut.Feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab");
  EXPECT_EQ(cut.Finish(), CollectorReply::State::kFailed);
}

// Each bound stops the reader at the first byte past it.
TEST(CollectorReply, EveryBoundStopsTheReply) {
  const ReplyLimits limits{/*head_bytes=*/100, /*chunk_line_bytes=*/20, /*body_bytes=*/10};
  struct Case {
    std::string start;
    char filler;
  };
  const Case cases[] = {
      {"HTTP/1.1 200 OK\r\nX-Endless: ", 'a'},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=", 'a'},
      {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 'a'},  // 10 fit, then ignored
      {"HTTP/1.1 200 OK\r\n\r\n", 'a'},                        // to the close
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: ", 'a'},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.start);
    CollectorReply reply(limits);
    reply.Feed(c.start);
    size_t fed = 0;
    while (reply.state() == CollectorReply::State::kMore && fed < 10'000) {
      reply.Feed(std::string(1, c.filler));
      ++fed;
    }
    if (c.start.find("Content-Length: 10") != std::string::npos) {
      EXPECT_EQ(reply.state(), CollectorReply::State::kDone);
      EXPECT_EQ(reply.body_size(), 10u);
      continue;
    }
    EXPECT_EQ(reply.state(), CollectorReply::State::kFailed);
    EXPECT_TRUE(reply.overflow()) << reply.error();
    EXPECT_LE(reply.bytes_fed(), 2 * limits.head_bytes) << reply.error();
  }
  CollectorReply announced(limits);  // a Content-Length past the bound fails at once
  announced.Feed("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n");
  EXPECT_TRUE(announced.overflow());
}

// A chunk-size line of exactly chunk_line_bytes is within its bound however the reads fall,
// its CR in one read and its LF in the next included (found by fuzz_otlp_reply).
TEST(CollectorReply, AChunkLineAtItsBoundIsReadWhateverTheReads) {
  const ReplyLimits limits{/*head_bytes=*/100, /*chunk_line_bytes=*/20, /*body_bytes=*/10};
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string line = "2;ext=" + std::string(limits.chunk_line_bytes - 6, 'a');
  ASSERT_EQ(line.size(), limits.chunk_line_bytes);
  const std::string rest = "\r\n{}\r\n0\r\n\r\n";
  for (size_t split = 0; split <= line.size() + rest.size(); ++split) {
    const std::string tail = line + rest;
    CollectorReply reply(limits);
    reply.Feed(head + tail.substr(0, split));
    reply.Feed(tail.substr(split));
    EXPECT_EQ(reply.state(), CollectorReply::State::kDone)
        << "split at " << split << ": " << reply.error();
    EXPECT_EQ(reply.body_size(), 2u) << "split at " << split;
  }
  CollectorReply longer(limits);  // one byte more fails, with or without its CR yet
  longer.Feed(head + line + "a\r");
  EXPECT_EQ(longer.state(), CollectorReply::State::kFailed);
  EXPECT_TRUE(longer.overflow()) << longer.error();
}

// A hostile collector streams a reply that never ends (a chunk extension, a
// header, a 1 GiB body): the exporter reads at most the reply's bounds plus
// one socket read, drops the reply and counts it, and the batch fails, long
// before the export's deadline (an hour here, so only the bound can end it).
TEST(Exporter, AHostileCollectorsEndlessReplyIsCutAtItsBound) {
  for (OtlpCollector::Mode mode :
       {OtlpCollector::Mode::kEndlessChunkExtension, OtlpCollector::Mode::kEndlessHeader,
        OtlpCollector::Mode::kHugeBody}) {
    SCOPED_TRACE(static_cast<int>(mode));
    OtlpCollector collector(mode);
    ExporterOptions o;
    o.endpoint = collector.endpoint();
    o.max_batch = 1;
    o.flush_interval = Millis(10);
    o.timeout = Millis(3'600'000);
    o.shutdown_timeout = Millis(10);
    auto exporter = OtlpHttpExporter::Create(o);
    ASSERT_TRUE(exporter.ok()) << exporter.status().ToString();
    EXPECT_TRUE((*exporter)->Enqueue(ExampleSpan()));
    ASSERT_TRUE(testing::WaitFor([&] { return (*exporter)->stats().failed == 1; }))
        << "the export never ended";
    const auto s = (*exporter)->stats();
    EXPECT_EQ(s.exported, 0u);
    EXPECT_EQ(s.oversized_replies, 1u);
    const ReplyLimits& limits = o.reply_limits;
    EXPECT_LE(s.reply_bytes,
              limits.head_bytes + limits.chunk_line_bytes + limits.body_bytes + kReplyReadBytes);
    EXPECT_EQ(collector.requests(), 1u);
  }
}

TEST(Exporter, RefusesBadOptions) {
  ExporterOptions o;
  o.endpoint = "http://127.0.0.1:4318";
  o.max_queue = 0;
  EXPECT_FALSE(OtlpHttpExporter::Create(o).ok());
  o.max_queue = 1;
  o.endpoint = "ftp://x";
  EXPECT_FALSE(OtlpHttpExporter::Create(o).ok());
}

}  // namespace
}  // namespace tollgate::trace
