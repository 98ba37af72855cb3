#include "rls/rls_test_util.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tollgate::rls::testing {

void AddDescriptor(rlspb::RateLimitRequest* req, Entries entries, int64_t hits) {
  auto* d = req->add_descriptors();
  for (const auto& [k, v] : entries) {
    auto* e = d->add_entries();
    e->set_key(k);
    e->set_value(v);
  }
  if (hits >= 0) d->mutable_hits_addend()->set_value(static_cast<uint64_t>(hits));
}

rlspb::RateLimitRequest Request(const std::string& domain, Entries entries, int64_t hits) {
  rlspb::RateLimitRequest req;
  req.set_domain(domain);
  AddDescriptor(&req, entries, hits);
  return req;
}

std::shared_ptr<const RlsConfig> CompileOrDie(const std::string& yaml,
                                              const RlsCompileOptions& options) {
  std::vector<RlsDomainSpec> domains;
  size_t start = 0;
  int n = 0;
  while (start <= yaml.size()) {
    size_t end = yaml.find("\n---\n", start);
    if (end == std::string::npos) end = yaml.size();
    RlsYamlResult r = ParseRlsYaml(yaml.substr(start, end - start), "doc" + std::to_string(n++));
    for (const auto& e : r.errors) ADD_FAILURE() << e.ToString();
    for (auto& d : r.domains) domains.push_back(std::move(d));
    start = end + 5;
  }
  ParsedRlsConfig parsed = CompileRlsConfig(domains, options);
  for (const auto& e : parsed.errors) ADD_FAILURE() << e.ToString();
  return parsed.config;
}

RlsFixture::RlsFixture(const std::string& yaml, const Clock* clock, RlsDecideOptions decide,
                       RlsCompileOptions compile) {
  LocalStoreOptions so;
  so.max_keys = 1 << 14;
  so.shards = 4;
  if (clock != nullptr) so.clock = clock;
  auto store = LocalStore::Create(so);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  store_ = std::move(*store);
  auto enforcer =
      StandaloneEnforcer(store_.get(), clock != nullptr ? clock : &SystemClock::Instance());
  EXPECT_TRUE(enforcer.ok()) << enforcer.status().ToString();
  enforcer_ = std::move(*enforcer);
  RlsServerOptions o;
  o.address = "127.0.0.1:0";
  o.enforcer = enforcer_.get();
  o.config = CompileOrDie(yaml, compile);
  if (clock != nullptr) o.clock = clock;
  o.decide = decide;
  auto server = StartRlsServer(o);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  server_ = std::move(*server);
  channel_ = NewChannel();
  stub_ = rlspb::RateLimitService::NewStub(channel_);
}

RlsFixture::~RlsFixture() { server_->Shutdown(); }

std::shared_ptr<grpc::Channel> RlsFixture::NewChannel() const {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // a separate connection per channel
  return grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
}

grpc::Status RlsFixture::Call(const rlspb::RateLimitRequest& req, rlspb::RateLimitResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return stub_->ShouldRateLimit(&ctx, req, resp);
}

}  // namespace tollgate::rls::testing
