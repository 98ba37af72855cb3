// The Rate Limit Quota Service over real gRPC (server/rls/rlqs_service.h):
// clients built from tollgate's rlqs.proto open StreamRateLimitQuotas
// streams to an RlsServer on loopback. A new bucket is answered at its first
// report, two data planes share a rule, a reload is pushed to an open stream
// without a report, and protocol violations and excess streams end with the
// documented gRPC codes. Every read has a generous deadline; nothing sleeps.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "rlqs_fixture.h"
#include "rls/rls_server.h"

namespace tollgate::rls {
namespace {

using testing::Only;
using testing::Report;
using testing::Reports;
using testing::Response;
using testing::Tokens;
using Stream = grpc::ClientReaderWriter<Reports, Response>;

// 100 a second per user (burst 6000: a minute's worth) under name=api.
constexpr const char* kYaml = R"(domain: edge
descriptors:
  - key: name
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 6000}
)";

class RlqsGrpcTest : public ::testing::Test {
 protected:
  void Start(RlqsOptions options = {}) {
    harness_.Start(&SystemClock::Instance(), kYaml, options);
    RlsServerOptions o;
    o.address = "127.0.0.1:0";
    o.enforcer = &harness_.enforcer();
    o.config = testing::CompileOrDie("domain: unused\ndescriptors: []\n");
    o.rlqs = &harness_.quota();
    auto server = StartRlsServer(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    stub_ = rlqspb::RateLimitQuotaService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }

  void SetConfig(const std::string& yaml) { harness_.SetConfig(yaml); }

  struct Client {
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> stream;
  };

  std::unique_ptr<Client> Connect() {
    auto c = std::make_unique<Client>();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    c->stream = stub_->StreamRateLimitQuotas(&c->ctx);
    return c;
  }

  testing::RlqsHarness harness_;  // outlives the server
  std::unique_ptr<RlsServer> server_;
  std::unique_ptr<rlqspb::RateLimitQuotaService::Stub> stub_;
};

TEST_F(RlqsGrpcTest, NewBucketsAreAnsweredAtOnceAndTwoDataPlanesShare) {
  Start();
  auto a = Connect();
  ASSERT_TRUE(a->stream->Write(Report("edge", 1)));
  Response ra;
  ASSERT_TRUE(a->stream->Read(&ra));
  EXPECT_EQ(ra.bucket_action(0).bucket_id().bucket().at("user"), "alice");
  EXPECT_EQ(Tokens(Only(ra)), 100);  // alone: the whole rule for a one-second round
  auto b = Connect();
  ASSERT_TRUE(b->stream->Write(Report("edge", 1)));
  Response rb;
  ASSERT_TRUE(b->stream->Read(&rb));
  EXPECT_EQ(Tokens(Only(rb)), 50);  // two data planes of unknown demand: an equal split
  for (auto* c : {a.get(), b.get()}) {
    c->stream->WritesDone();
    EXPECT_TRUE(c->stream->Finish().ok());
  }
}

TEST_F(RlqsGrpcTest, AReloadIsPushedToOpenStreams) {
  Start();
  auto a = Connect();
  ASSERT_TRUE(a->stream->Write(Report("edge", 1)));
  Response first;
  ASSERT_TRUE(a->stream->Read(&first));
  EXPECT_EQ(Tokens(Only(first)), 100);
  // A new rule (its own bucket: another algorithm) reaches the stream
  // without another report.
  SetConfig(R"(domain: edge
descriptors:
  - key: name
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 10, algorithm: fixed_window}
)");
  Response pushed;
  ASSERT_TRUE(a->stream->Read(&pushed));  // the context's deadline bounds the wait
  EXPECT_GE(Tokens(Only(pushed)), 1);
  EXPECT_LE(Tokens(Only(pushed)), 10);
  a->stream->WritesDone();
  EXPECT_TRUE(a->stream->Finish().ok());
}

TEST_F(RlqsGrpcTest, ADomainChangeEndsTheStream) {
  Start();
  auto a = Connect();
  ASSERT_TRUE(a->stream->Write(Report("edge", 1)));
  Response r;
  ASSERT_TRUE(a->stream->Read(&r));
  a->stream->Write(Report("elsewhere", 1));
  while (a->stream->Read(&r)) {
  }
  EXPECT_EQ(a->stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RlqsGrpcTest, StreamsBeyondTheBoundAreRefused) {
  RlqsOptions o;
  o.max_streams = 1;
  Start(o);
  auto a = Connect();
  ASSERT_TRUE(a->stream->Write(Report("edge", 1)));
  Response r;
  ASSERT_TRUE(a->stream->Read(&r));
  auto b = Connect();
  b->stream->Write(Report("edge", 1));
  EXPECT_FALSE(b->stream->Read(&r));
  EXPECT_EQ(b->stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  a->stream->WritesDone();
  EXPECT_TRUE(a->stream->Finish().ok());
}

}  // namespace
}  // namespace tollgate::rls
