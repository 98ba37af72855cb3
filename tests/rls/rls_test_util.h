// Test helpers: a running RlsServer on a free loopback port with a LocalStore,
// and a gRPC client stub built from tollgate's own .proto.
#ifndef TOLLGATE_TESTS_RLS_RLS_TEST_UTIL_H_
#define TOLLGATE_TESTS_RLS_RLS_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/rls_decider.h"
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#include "standalone_enforcer.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"

namespace tollgate::rls::testing {

using Entries = std::initializer_list<std::pair<std::string, std::string>>;

// Appends one descriptor to `req`; hits < 0 leaves the descriptor's hits_addend unset.
void AddDescriptor(rlspb::RateLimitRequest* req, Entries entries, int64_t hits = -1);
rlspb::RateLimitRequest Request(const std::string& domain, Entries entries, int64_t hits = -1);

class RlsFixture {
 public:
  // Compiles `yaml` (one or more documents separated by "\n---\n") and starts a
  // server on 127.0.0.1:0 deciding on an Enforcer of the fixture's over a
  // LocalStore, both driven by `clock` (a real clock when null).
  explicit RlsFixture(const std::string& yaml, const Clock* clock = nullptr,
                      RlsDecideOptions decide = {}, RlsCompileOptions compile = {});
  ~RlsFixture();

  grpc::Status Call(const rlspb::RateLimitRequest& req, rlspb::RateLimitResponse* resp);
  rlspb::RateLimitService::Stub& stub() { return *stub_; }
  RlsServer& server() { return *server_; }
  LocalStore& store() { return *store_; }
  Enforcer& enforcer() { return *enforcer_; }
  std::shared_ptr<grpc::Channel> NewChannel() const;

 private:
  std::unique_ptr<LocalStore> store_;
  std::unique_ptr<Enforcer> enforcer_;  // outlives the server
  std::unique_ptr<RlsServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rlspb::RateLimitService::Stub> stub_;
};

// Compiles YAML documents separated by "\n---\n"; asserts success.
std::shared_ptr<const RlsConfig> CompileOrDie(const std::string& yaml,
                                              const RlsCompileOptions& options = {});

}  // namespace tollgate::rls::testing

#endif  // TOLLGATE_TESTS_RLS_RLS_TEST_UTIL_H_
