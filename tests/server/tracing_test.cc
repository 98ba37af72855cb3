// tollgated's OpenTelemetry spans, received by a real OTLP/HTTP collector on a
// loopback port (tests/testing/otlp_collector.h decodes them strictly): trace
// continuation, parent and child, attributes; and a collector that hangs or is
// down: decisions go on, spans are dropped or failed and counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "testing/otlp_collector.h"
#include "testing/timing.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kParentId[] = "00f067aa0ba902b7";

std::string Traceparent(const char* flags) {
  return std::string("00-") + kTraceId + "-" + kParentId + "-" + flags;
}

server::ServerConfig TracingConfig(const std::string& endpoint) {
  server::ServerConfig c = TestServer::DefaultConfig();
  c.trace_endpoint = endpoint;
  c.trace_sample_ratio = 1.0;
  c.trace_flush_interval = server::Millis(20);
  c.trace_timeout = Scaled(server::Millis(2000));
  // The test client (127.0.0.1) stands for a trusted proxy: its traceparent's
  // sampled flag decides (an untrusted peer's does not: see below).
  c.trusted_proxies = {"127.0.0.1"};
  return c;
}

std::vector<ReceivedSpan> Named(const std::vector<ReceivedSpan>& spans, const std::string& name) {
  std::vector<ReceivedSpan> out;
  for (const auto& s : spans) {
    if (s.name == name) out.push_back(s);
  }
  return out;
}

// The value of one sample in tollgated's /metrics, or -1.
double MetricValue(int admin_port, const std::string& series) {
  HttpResponse r = Fetch(admin_port, "GET", "/metrics");
  size_t at = r.body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r.body.substr(at + series.size() + 2));
}

int Auth(int port, const std::string& key, const std::string& traceparent = "") {
  Headers h = {{"x-api-key", key}};
  if (!traceparent.empty()) h.push_back({"traceparent", traceparent});
  return Fetch(port, "GET", "/v1/auth", h).status;
}

TEST(Tracing, ContinuesTheRequestsTraceAndStartsANewOneOnAMalformedTraceparent) {
  OtlpCollector collector;
  std::string error;
  auto t = TestServer::Start(TracingConfig(collector.endpoint()), TightPolicy(), &error);
  ASSERT_TRUE(t) << error;
  ASSERT_EQ(Auth(t->port, "k1", Traceparent("01")), 204);  // sampled parent: continued
  ASSERT_EQ(Auth(t->port, "k1", Traceparent("00")), 204);  // unsampled parent: not recorded
  // Malformed (uppercase hex): a new trace, sampled by the ratio (1.0).
  std::string upper = Traceparent("01");
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  ASSERT_EQ(Auth(t->port, "k1", upper), 204);
  ASSERT_EQ(Auth(t->port, "k1", "00-" + std::string(kTraceId) + "-zz-01"), 403);  // 4th: rejected
  ASSERT_TRUE(WaitFor([&] { return Named(collector.spans(), "tollgate.decision").size() >= 3; }))
      << collector.spans().size() << " spans";
  EXPECT_TRUE(collector.errors().empty()) << collector.errors()[0];
  std::vector<ReceivedSpan> spans = Named(collector.spans(), "tollgate.decision");
  ASSERT_EQ(spans.size(), 3u);  // the unsampled parent's decision is not there
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  const ReceivedSpan& continued = spans[0];
  EXPECT_EQ(continued.trace_id, kTraceId);
  EXPECT_EQ(continued.parent_span_id, kParentId);
  EXPECT_NE(continued.span_id, kParentId);
  EXPECT_EQ(continued.kind, 2);  // SERVER
  EXPECT_EQ(continued.service_name, "tollgated");
  EXPECT_EQ(continued.attributes.at("tollgate.rule"), "keyed,per-ip");
  EXPECT_EQ(continued.attributes.at("tollgate.verdict"), "allow");
  EXPECT_EQ(continued.attributes.at("tollgate.store"), "local");
  EXPECT_EQ(continued.attributes.at("tollgate.cost"), "2");
  for (size_t i : {1, 2}) {
    EXPECT_NE(spans[i].trace_id, kTraceId) << i;
    EXPECT_EQ(spans[i].parent_span_id, "") << i;
  }
  EXPECT_NE(spans[1].trace_id, spans[2].trace_id);
  EXPECT_EQ(spans[2].attributes.at("tollgate.verdict"), "reject");
  EXPECT_EQ(spans[2].attributes.at("tollgate.rule"), "keyed");
  // The local store makes no store span.
  EXPECT_TRUE(Named(collector.spans(), "EVALSHA").empty());
  // The exporter counts a batch once the collector's answer is read, which may
  // be after the collector has stored the spans.
  EXPECT_TRUE(WaitFor([&] {
    return MetricValue(t->admin_port, "tollgate_trace_spans_total{outcome=\"exported\"}") >= 3;
  })) << MetricValue(t->admin_port, "tollgate_trace_spans_total{outcome=\"exported\"}");
}

// In gateway mode the upstream is told the decision span as its parent: a
// sampled decision's traceparent replaces the request's (same trace, our span
// id), on the one-string fast path (GET) and the streamed path (a POST body);
// an unsampled parent's traceparent passes unchanged.
TEST(Tracing, TheGatewayNamesTheDecisionSpanAsTheUpstreamsParent) {
  OtlpCollector collector;
  TestUpstream upstream;
  server::ServerConfig config = TracingConfig(collector.endpoint());
  config.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  std::string error;
  auto t = TestServer::Start(config, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(t) << error;
  const auto forwarded = [&](const std::string& method, const std::string& traceparent,
                             const std::string& body) {
    HttpResponse r =
        Fetch(t->port, method, "/api/x", {{"x-api-key", "k1"}, {"traceparent", traceparent}}, body);
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    if (r.status != 200) return std::string();
    auto j = nlohmann::json::parse(r.body);
    return j["headers"].value("traceparent", std::string());
  };
  const std::string get = forwarded("GET", Traceparent("01"), "");
  const std::string post = forwarded("POST", Traceparent("01"), "a body");
  EXPECT_EQ(forwarded("GET", Traceparent("00"), ""), Traceparent("00"));  // not recorded

  ASSERT_TRUE(WaitFor([&] { return Named(collector.spans(), "tollgate.decision").size() >= 2; }))
      << collector.spans().size() << " spans";
  std::vector<ReceivedSpan> spans = Named(collector.spans(), "tollgate.decision");
  ASSERT_EQ(spans.size(), 2u);
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(spans[i].trace_id, kTraceId) << i;
    EXPECT_EQ(spans[i].parent_span_id, kParentId) << i;
  }
  EXPECT_EQ(get, "00-" + std::string(kTraceId) + "-" + spans[0].span_id + "-01");
  EXPECT_EQ(post, "00-" + std::string(kTraceId) + "-" + spans[1].span_id + "-01");
}

// Issue 29, finding 7: a client that is not a trusted proxy sent
// traceparent ...-01 on every request and had each of its decisions recorded
// (1.6x the CPU, crowding out real spans). Its flag no longer counts: with
// sample_ratio 0 none of its decisions is recorded, while a trusted proxy's
// sampled parent still is. The trusted proxy's request comes last and its span
// is the marker: spans leave the queue in order, so once it arrived, an
// earlier span of the untrusted client would have too.
TEST(Tracing, AnUntrustedTraceparentCannotForceSampling) {
  OtlpCollector collector;
  server::ServerConfig config = TracingConfig(collector.endpoint());
  config.trace_sample_ratio = 0.0;
  config.trusted_proxies = {"127.0.0.2"};
  std::string error;
  auto t = TestServer::Start(config, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(t) << error;
  const std::string untrusted_trace = "11111111111111111111111111111111";
  const std::string trusted_trace = "22222222222222222222222222222222";
  HttpConnection client(t->port);  // from 127.0.0.1: not a trusted proxy
  for (int i = 0; i < 5; ++i) {
    auto r = client.Request(
        "GET", "/v1/auth",
        {{"x-api-key", "k1"}, {"traceparent", "00-" + untrusted_trace + "-" + kParentId + "-01"}});
    ASSERT_EQ(r.status, 204) << r.error << r.body;
  }
  HttpConnection proxy(t->port, "127.0.0.2");
  ASSERT_TRUE(proxy.connected()) << "cannot bind 127.0.0.2";
  auto r = proxy.Request(
      "GET", "/v1/auth",
      {{"x-api-key", "k1"}, {"traceparent", "00-" + trusted_trace + "-" + kParentId + "-01"}});
  ASSERT_EQ(r.status, 204) << r.error << r.body;
  ASSERT_TRUE(WaitFor([&] { return !Named(collector.spans(), "tollgate.decision").empty(); }));
  const std::vector<ReceivedSpan> spans = Named(collector.spans(), "tollgate.decision");
  ASSERT_EQ(spans.size(), 1u) << spans[0].trace_id;  // only the trusted proxy's
  EXPECT_EQ(spans[0].trace_id, trusted_trace);
  EXPECT_EQ(spans[0].parent_span_id, kParentId);
}

// An untrusted caller's decisions are sampled by the configured ratio, and a
// sampled one still continues the caller's trace (its trace id, its span as
// the parent), whatever the flag says: here ratio 1 and a flag of 00.
TEST(Tracing, AnUntrustedTraceparentIsSampledByTheRatioAndStillContinued) {
  OtlpCollector collector;
  server::ServerConfig config = TracingConfig(collector.endpoint());
  config.trusted_proxies.clear();
  std::string error;
  auto t = TestServer::Start(config, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(t) << error;
  ASSERT_EQ(Auth(t->port, "k1", Traceparent("00")), 204);
  ASSERT_TRUE(WaitFor([&] { return !Named(collector.spans(), "tollgate.decision").empty(); }));
  const std::vector<ReceivedSpan> spans = Named(collector.spans(), "tollgate.decision");
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].trace_id, kTraceId);
  EXPECT_EQ(spans[0].parent_span_id, kParentId);
}

#if TOLLGATE_TEST_REDIS
TEST(Tracing, RedisDecisionsHaveAnEvalshaChildSpan) {
  auto redis = RedisServer::Start();
  if (redis.missing) GTEST_SKIP() << redis.error;
  ASSERT_TRUE(redis.server != nullptr) << redis.error;
  OtlpCollector collector;
  server::ServerConfig c = TracingConfig(collector.endpoint());
  c.store = redis->url();
  std::string error;
  auto t = TestServer::Start(c, TightPolicy(), &error);
  ASSERT_TRUE(t) << error;
  ASSERT_EQ(Auth(t->port, "k1", Traceparent("01")), 204);
  ASSERT_TRUE(WaitFor([&] { return collector.spans().size() >= 2; }));
  std::vector<ReceivedSpan> decision = Named(collector.spans(), "tollgate.decision");
  std::vector<ReceivedSpan> store = Named(collector.spans(), "EVALSHA");
  ASSERT_EQ(decision.size(), 1u);
  ASSERT_EQ(store.size(), 1u);
  EXPECT_EQ(decision[0].trace_id, kTraceId);
  EXPECT_EQ(decision[0].attributes.at("tollgate.store"), "redis");
  EXPECT_EQ(store[0].trace_id, kTraceId);
  EXPECT_EQ(store[0].parent_span_id, decision[0].span_id);
  EXPECT_EQ(store[0].kind, 3);  // CLIENT
  EXPECT_EQ(store[0].attributes.at("db.system"), "redis");
  EXPECT_EQ(store[0].attributes.at("db.operation"), "EVALSHA");
  EXPECT_GE(store[0].start_ns, decision[0].start_ns);
  EXPECT_LE(store[0].end_ns, decision[0].end_ns);
}
#endif

// A collector that never answers: decisions go on, the bounded queue fills
// and the spans beyond it are dropped and counted.
TEST(Tracing, AHangingCollectorCostsDropsNotDecisions) {
  OtlpCollector collector(OtlpCollector::Mode::kHang);
  server::ServerConfig c = TracingConfig(collector.endpoint());
  c.trace_max_queue = 8;
  c.trace_max_batch = 4;
  c.trace_timeout = server::Millis(60000);  // the export in flight hangs for the whole test
  std::string error;
  auto t = TestServer::Start(c, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(t) << error;
  ASSERT_TRUE(WaitFor([&] {
    Auth(t->port, "k1");
    return collector.requests() >= 1;
  }));
  for (int i = 0; i < 40; ++i) ASSERT_EQ(Auth(t->port, "k1"), 204) << i;
  EXPECT_GE(MetricValue(t->admin_port, "tollgate_trace_spans_total{outcome=\"dropped\"}"), 40 - 8);
  EXPECT_LE(MetricValue(t->admin_port, "tollgate_trace_queue_spans"), 8);
  EXPECT_EQ(MetricValue(t->admin_port, "tollgate_trace_spans_total{outcome=\"exported\"}"), 0);
}

// A collector that is down (connection refused): every batch fails and is
// counted; decisions never notice.
TEST(Tracing, ACollectorThatIsDownCountsFailedSpans) {
  server::ServerConfig c =
      TracingConfig("http://127.0.0.1:" + std::to_string(ClosedLoopbackPort()) + "/v1/traces");
  std::string error;
  auto t = TestServer::Start(c, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(t) << error;
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Auth(t->port, "k1"), 204) << i;
  EXPECT_TRUE(WaitFor([&] {
    return MetricValue(t->admin_port, "tollgate_trace_spans_total{outcome=\"failed\"}") >= 20;
  }));
}

}  // namespace
}  // namespace tollgate::testing
