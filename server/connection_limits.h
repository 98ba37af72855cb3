// Internal: connection caps per listener and per client address.
//
// Each listener has its own cap (http.max_connections for the main listener,
// admin.max_connections for the admin one), so idle or slow sockets on the
// public port cannot take the slots /healthz, /metrics and /v1/reload need;
// and within a listener one client address holds at most
// http.max_connections_per_ip. An IPv4-mapped IPv6 address counts as its IPv4
// address.
//
// TryAcquire returns a Slot that gives its place back when destroyed (the
// session owns it for the connection's life), or nothing when a cap is
// reached: the caller closes the socket.
//
// Thread safety: TryAcquire and Slot's destructor may run on any thread (one
// mutex guards the counts); the object must outlive every Slot.
#ifndef TOLLGATE_SERVER_CONNECTION_LIMITS_H_
#define TOLLGATE_SERVER_CONNECTION_LIMITS_H_

#include <array>
#include <boost/asio/ip/address.hpp>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

#include "server/route.h"

namespace tollgate::server {

class ConnectionLimits {
 public:
  ConnectionLimits(size_t main_max, size_t admin_max, size_t per_ip_max);
  ConnectionLimits(const ConnectionLimits&) = delete;
  ConnectionLimits& operator=(const ConnectionLimits&) = delete;

  using AddressKey = std::array<unsigned char, 17>;  // listener + IPv6 (v4-mapped) bytes

  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot();

   private:
    friend class ConnectionLimits;
    Slot(ConnectionLimits* owner, ListenerKind kind, AddressKey key)
        : owner_(owner), kind_(kind), key_(key) {}
    ConnectionLimits* owner_;
    ListenerKind kind_;
    AddressKey key_;
  };

  std::optional<Slot> TryAcquire(ListenerKind kind, const boost::asio::ip::address& peer);

  size_t open(ListenerKind kind) const;

 private:
  void Release(ListenerKind kind, const AddressKey& key);

  const size_t max_[2];
  const size_t per_ip_max_;
  mutable std::mutex mu_;
  size_t open_[2] = {0, 0};              // guarded by mu_
  std::map<AddressKey, size_t> per_ip_;  // guarded by mu_; only addresses with connections
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_CONNECTION_LIMITS_H_
