#include "runtime/etcd_watch.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "runtime/etcd_http.h"

namespace tollgate::etcd {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

EtcdWatch::EtcdWatch(EtcdOptions options, int64_t after_revision, OnValue on_value,
                     OnError on_error)
    : options_(std::move(options)),
      on_value_(std::move(on_value)),
      on_error_(std::move(on_error)),
      thread_([this, after_revision] { Run(after_revision); }) {}

EtcdWatch::~EtcdWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  thread_.join();
}

void EtcdWatch::Run(int64_t after_revision) {
  int64_t revision = after_revision;
  size_t endpoint = 0;
  auto backoff = options_.retry_min;
  bool resync = false;
  while (!stop_.load()) {
    Status s = Status::Ok();
    if (resync) {
      EtcdOptions one = options_;
      one.url.endpoints = {options_.url.endpoints[endpoint]};
      Result<RangeReply> r = EtcdRange(one);
      if (r.ok()) {
        if (r->kv && r->kv->mod_revision > revision) on_value_(r->kv->mod_revision, r->kv->value);
        revision = std::max(revision, r->revision);
        resync = false;
      } else {
        s = r.status();
      }
    }
    if (s.ok() && !resync) s = WatchOnce(endpoint, &revision, &backoff);
    if (stop_.load()) break;
    if (!s.ok()) on_error_(s);
    resync = true;
    endpoint = (endpoint + 1) % options_.url.endpoints.size();
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, backoff, [this] { return stop_.load(); });
    backoff = std::min(backoff * 2, options_.retry_max);
  }
}

Status EtcdWatch::WatchOnce(size_t endpoint, int64_t* revision,
                            std::chrono::milliseconds* backoff) {
  Connection c;
  std::string raw;
  ReplyHead head;
  const auto& member = options_.url.endpoints[endpoint];
  const Clock::time_point deadline = Clock::now() + options_.io_timeout;
  Result<std::string> token = TokenFor(options_, member, deadline);
  if (!token.ok()) return token.status();
  bool rejected = false;
  Status s = c.Open(member, options_.session.get(), deadline);
  if (s.ok())
    s = c.Post("/v3/watch", WatchRequest(options_.url.key, *revision + 1), *token, deadline);
  if (s.ok()) s = ReadHead(c, &raw, &head, Clock::now() + options_.io_timeout, &rejected);
  if (rejected && options_.session) options_.session->DropToken(*token);
  if (!s.ok()) return s;
  const bool chunked = head.chunked;
  Clock::time_point heard = Clock::now();  // the stream's last sign of life
  std::string lines;
  bool done = false;
  while (!stop_.load()) {
    if (chunked) {
      if (!Dechunk(&raw, &lines, &done)) return UnavailableError("etcd: malformed chunk");
    } else {
      lines.append(raw);
      raw.clear();
    }
    std::string line;
    while (TakeWatchLine(&lines, &line)) {
      Result<WatchReply> reply = ParseWatchLine(line);
      if (!reply.ok()) return reply.status();
      if (reply->created) *backoff = options_.retry_min;  // a healthy member again
      for (const WatchEvent& e : reply->events) {
        *revision = std::max(*revision, e.kv.mod_revision);
        if (e.deleted) {
          on_error_(InvalidArgument("etcd key " + options_.url.key +
                                    " was deleted; the running policy stays"));
        } else {
          on_value_(e.kv.mod_revision, e.kv.value);
        }
      }
      if (reply->canceled && TokenRejected(reply->cancel_reason) && options_.session) {
        options_.session->DropToken(*token);  // the re-read logs in again
        return UnavailableError("etcd " + c.where() + ": watch refused the auth token (" +
                                reply->cancel_reason + "); logging in again");
      }
      if (reply->canceled) {
        return UnavailableError(reply->compact_revision > 0
                                    ? "etcd watch from revision " + std::to_string(*revision + 1) +
                                          " compacted (at " +
                                          std::to_string(reply->compact_revision) + "): re-reading"
                                    : "etcd watch canceled: " + reply->cancel_reason);
      }
    }
    if (lines.size() > kMaxReplyBytes) return UnavailableError("etcd: watch line too large");
    if (done) return UnavailableError("etcd " + c.where() + ": watch stream ended");
    const ssize_t n =
        c.Read(&raw, Clock::now() + std::min(options_.io_timeout, options_.probe_interval));
    if (n == 0) return UnavailableError("etcd " + c.where() + ": connection closed");
    if (n < -1) return c.Error("read");
    if (n > 0) {
      heard = Clock::now();
      continue;
    }
    // Nothing said: a watch may be quiet for hours, or its member frozen (a
    // stopped process keeps its sockets open). Past probe_interval, read the
    // key from the same member: no answer in io_timeout moves to the next
    // one; a newer value than the watch delivered means the stream is stale.
    if (stop_.load() || Clock::now() - heard < options_.probe_interval) continue;
    EtcdOptions one = options_;
    one.url.endpoints = {options_.url.endpoints[endpoint]};
    Result<RangeReply> probe = EtcdRange(one);
    if (!probe.ok()) {
      return UnavailableError("etcd " + c.where() + ": watch silent and a read failed (" +
                              probe.status().message() + "); trying the next member");
    }
    if (probe->kv && probe->kv->mod_revision > *revision) {
      return UnavailableError("etcd " + c.where() + ": watch behind the key (revision " +
                              std::to_string(probe->kv->mod_revision) + "); re-reading");
    }
    heard = Clock::now();
  }
  return Status::Ok();
}

}  // namespace tollgate::etcd
