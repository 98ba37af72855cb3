// RlqsService: Envoy's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas,
// one bidirectional stream per data plane) on the RLS listener. Transport
// only: every assignment is RlqsQuota's (src/rls/rlqs_quota.h); this class
// moves each stream's reports to it and its responses back, in order.
//
// Per stream: a stream beyond RlqsOptions::max_streams is refused
// (RESOURCE_EXHAUSTED); a protocol violation (no domain first, a changed
// domain) ends it with INVALID_ARGUMENT; a client that half-closes gets OK.
// Responses wait in a queue of at most kMaxQueuedResponses (a data plane that
// stops reading is ended with RESOURCE_EXHAUSTED instead of growing it).
// A policy reload is pushed: a watcher thread compares RlqsQuota's
// configuration every `reload_poll` and, when it changed, sends every open
// stream a fresh assignment for each of its buckets (RlqsQuota::Reassign).
//
// Thread safety: gRPC calls the reactors on its threads; PushAll and the
// destructor may run on any thread. Ownership: the quota is borrowed and
// must outlive the service (the server it is registered on must be shut
// down before the service is destroyed).
#ifndef TOLLGATE_SERVER_RLS_RLQS_SERVICE_H_
#define TOLLGATE_SERVER_RLS_RLQS_SERVICE_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "rls/rlqs_quota.h"

namespace tollgate::rls {

// Whether the call's client certificate has a CN or SAN (DNS, URI) in
// `allowed` (grpc.tls.allowed_names; shared with the RLS service).
bool PeerAllowed(const grpc::CallbackServerContext& ctx, const std::vector<std::string>& allowed);

class RlqsService final
    : public ::envoy::service::rate_limit_quota::v3::RateLimitQuotaService::CallbackService {
 public:
  static constexpr size_t kMaxQueuedResponses = 64;

  RlqsService(RlqsQuota* quota, std::vector<std::string> allowed_names,
              std::chrono::milliseconds reload_poll = std::chrono::milliseconds(250));
  ~RlqsService() override;

  grpc::ServerBidiReactor<rlqspb::RateLimitQuotaUsageReports, rlqspb::RateLimitQuotaResponse>*
  StreamRateLimitQuotas(grpc::CallbackServerContext* ctx) override;

  // Sends every open stream a fresh assignment for each of its buckets.
  void PushAll();

  class Reactor;

 private:
  friend class Reactor;
  void Watch();

  RlqsQuota* quota_;
  const std::vector<std::string> allowed_names_;  // empty: any verified client
  const std::chrono::milliseconds reload_poll_;
  std::mutex mu_;  // guards reactors_ and stop_
  std::set<Reactor*> reactors_;
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread watcher_;
};

}  // namespace tollgate::rls

#endif  // TOLLGATE_SERVER_RLS_RLQS_SERVICE_H_
