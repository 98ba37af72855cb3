#include "rls/rlqs_service.h"

#include <deque>

namespace tollgate::rls {

bool PeerAllowed(const grpc::CallbackServerContext& ctx, const std::vector<std::string>& allowed) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth) return false;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      const std::string_view name(value.data(), value.size());
      for (const auto& want : allowed) {
        if (name == want) return true;
      }
    }
  }
  return false;
}

// One stream. Reads one report at a time (the next read starts once the
// report is answered); writes go through `queue_`, one in flight at a time.
// Finishes once, after the queued writes (finish_ holds the status meanwhile).
class RlqsService::Reactor final
    : public grpc::ServerBidiReactor<rlqspb::RateLimitQuotaUsageReports,
                                     rlqspb::RateLimitQuotaResponse> {
 public:
  Reactor(RlqsService* service, grpc::CallbackServerContext* ctx) : service_(service) {
    if (!service->allowed_names_.empty() && !PeerAllowed(*ctx, service->allowed_names_)) {
      Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "the client certificate's names are not in grpc.tls.allowed_names"));
      return;
    }
    Result<uint64_t> id = service->quota_->OpenStream();
    if (!id.ok()) {
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, id.status().message()));
      return;
    }
    stream_ = *id;
    {
      std::lock_guard<std::mutex> lock(service->mu_);
      service->reactors_.insert(this);
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the data plane half-closed, or the call broke
      End(grpc::Status::OK);
      return;
    }
    rlqspb::RateLimitQuotaResponse response;
    const Status st = service_->quota_->OnReports(stream_, request_, &response);
    if (!st.ok()) {
      End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, st.message()));
      return;
    }
    if (response.bucket_action_size() > 0) Send(std::move(response));
    request_.Clear();
    StartRead(&request_);
  }

  // A reload's assignments (RlqsService::PushAll).
  void Push() {
    rlqspb::RateLimitQuotaResponse response;
    service_->quota_->Reassign(stream_, &response);
    if (response.bucket_action_size() > 0) Send(std::move(response));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.pop_front();
    if (!ok) {
      queue_.clear();
      EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke"));
    }
    if (!queue_.empty()) {
      StartWrite(&queue_.front());
    } else if (finish_ && !finished_) {
      finished_ = true;
      Finish(*finish_);
    }
  }

  void OnDone() override {
    if (stream_ != 0) {
      {
        std::lock_guard<std::mutex> lock(service_->mu_);
        service_->reactors_.erase(this);
      }
      service_->quota_->CloseStream(stream_);
    }
    delete this;
  }

 private:
  void Send(rlqspb::RateLimitQuotaResponse response) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) return;
    if (queue_.size() >= kMaxQueuedResponses) {
      EndLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "the data plane does not read its assignments"));
      return;
    }
    queue_.push_back(std::move(response));
    if (queue_.size() == 1) StartWrite(&queue_.front());
  }

  void End(grpc::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    EndLocked(std::move(status));
  }

  void EndLocked(grpc::Status status) {
    if (finish_) return;
    finish_ = std::move(status);
    if (queue_.empty() && !finished_) {
      finished_ = true;
      Finish(*finish_);
    }
  }

  RlqsService* service_;
  uint64_t stream_ = 0;  // 0: refused, never opened
  rlqspb::RateLimitQuotaUsageReports request_;
  std::mutex mu_;                                     // guards queue_, finish_, finished_
  std::deque<rlqspb::RateLimitQuotaResponse> queue_;  // front: the write in flight
  std::optional<grpc::Status> finish_;
  bool finished_ = false;
};

RlqsService::RlqsService(RlqsQuota* quota, std::vector<std::string> allowed_names,
                         std::chrono::milliseconds reload_poll)
    : quota_(quota), allowed_names_(std::move(allowed_names)), reload_poll_(reload_poll) {
  watcher_ = std::thread([this] { Watch(); });
}

RlqsService::~RlqsService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

grpc::ServerBidiReactor<rlqspb::RateLimitQuotaUsageReports, rlqspb::RateLimitQuotaResponse>*
RlqsService::StreamRateLimitQuotas(grpc::CallbackServerContext* ctx) {
  return new Reactor(this, ctx);
}

void RlqsService::PushAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Reactor* r : reactors_) r->Push();
}

void RlqsService::Watch() {
  std::shared_ptr<const RlsConfig> seen = quota_->CurrentConfig();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, reload_poll_, [this] { return stop_; });
    if (stop_) return;
    lock.unlock();
    std::shared_ptr<const RlsConfig> now = quota_->CurrentConfig();
    const bool changed = now != seen;
    seen = std::move(now);
    if (changed) PushAll();
    lock.lock();
  }
}

}  // namespace tollgate::rls
