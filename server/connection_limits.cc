#include "server/connection_limits.h"

#include <algorithm>
#include <utility>

namespace tollgate::server {

ConnectionLimits::ConnectionLimits(size_t main_max, size_t admin_max, size_t per_ip_max)
    : max_{main_max, admin_max}, per_ip_max_(per_ip_max) {}

std::optional<ConnectionLimits::Slot> ConnectionLimits::TryAcquire(
    ListenerKind kind, const boost::asio::ip::address& peer) {
  AddressKey key{};
  key[0] = static_cast<unsigned char>(kind);
  boost::asio::ip::address_v6::bytes_type bytes =
      peer.is_v4()
          ? boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, peer.to_v4()).to_bytes()
          : peer.to_v6().to_bytes();
  std::copy(bytes.begin(), bytes.end(), key.begin() + 1);
  const size_t k = static_cast<size_t>(kind);
  std::lock_guard lock(mu_);
  if (open_[k] >= max_[k]) return std::nullopt;
  size_t& mine = per_ip_[key];
  if (mine >= per_ip_max_) return std::nullopt;
  ++mine;
  ++open_[k];
  return Slot(this, kind, key);
}

size_t ConnectionLimits::open(ListenerKind kind) const {
  std::lock_guard lock(mu_);
  return open_[static_cast<size_t>(kind)];
}

void ConnectionLimits::Release(ListenerKind kind, const AddressKey& key) {
  std::lock_guard lock(mu_);
  --open_[static_cast<size_t>(kind)];
  auto it = per_ip_.find(key);
  if (it != per_ip_.end() && --it->second == 0) per_ip_.erase(it);
}

ConnectionLimits::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), kind_(other.kind_), key_(other.key_) {}

ConnectionLimits::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(kind_, key_);
}

}  // namespace tollgate::server
