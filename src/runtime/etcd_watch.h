// Internal: the etcd policy source's client: read one key, then watch it.
//
// `etcd[s]://host:port[,host:port]/key` names the key (etcd_client.h: the
// URL, TLS, authentication, the unary calls). EtcdRange reads it once
// (startup: the policy to open with and the revision it was read at).
// EtcdWatch runs one thread that watches the key from a revision and calls
// `on_value` with every new value (a PUT; a DELETE is reported as an error,
// the running policy stays). When the connection drops (etcd restarted, a
// member gone) or etcd cancels the watch because the revision was compacted,
// it backs off (bounded, doubling), reads the key again with a range (calling
// `on_value` if it changed meanwhile) and watches from there, trying the
// endpoints in turn (a name resolved again at each). A watch etcd cancels
// because its token is no longer valid (an expired simple token or JWT, an
// etcd that restarted) drops the token: the re-read logs in again. Talks to
// etcd's v3 API over its HTTP/JSON gateway (runtime/etcd_reply.h), plain or
// TLS, with the session's token.
//
// Bounds: a read of the key (connect, request, whole reply) takes at most
// `io_timeout` per member, then the next member is tried; a watch reply head
// arrives within `io_timeout`. A watch with nothing to say waits in slices of
// at most io_timeout (checking Stop); once silent for `probe_interval` it
// reads the key from its member: no answer (a frozen, partitioned or dead
// member) ends the stream and the watch moves to the next member and
// re-reads; a newer value than the stream delivered does the same. A reply
// line is at most kMaxReplyBytes; a chunk header at most 16 bytes.
//
// Thread safety: `on_value` and `on_error` run on the watch thread, one at a
// time. The destructor stops and joins the thread (within about io_timeout).
#ifndef TOLLGATE_RUNTIME_ETCD_WATCH_H_
#define TOLLGATE_RUNTIME_ETCD_WATCH_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/etcd_client.h"
#include "runtime/etcd_reply.h"
#include "tollgate/status.h"

namespace tollgate::etcd {

class EtcdWatch {
 public:
  using OnValue = std::function<void(int64_t mod_revision, std::string value)>;
  using OnError = std::function<void(const Status& status)>;
  // Watches from `after_revision` + 1 (the revision EtcdRange returned).
  EtcdWatch(EtcdOptions options, int64_t after_revision, OnValue on_value, OnError on_error);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

 private:
  void Run(int64_t after_revision);
  // One watch stream until it ends or Stop; *revision is the last one seen,
  // *backoff reset once the watch is established.
  Status WatchOnce(size_t endpoint, int64_t* revision, std::chrono::milliseconds* backoff);

  EtcdOptions options_;
  OnValue on_value_;
  OnError on_error_;
  std::mutex mu_;  // with wake_: the backoff wait, cut short by the destructor
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once every member above exists
};

}  // namespace tollgate::etcd

#endif  // TOLLGATE_RUNTIME_ETCD_WATCH_H_
