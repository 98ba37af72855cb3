// Penalty boxes ("block_for", docs/configuration.md "Penalty box"): once an
// enforced decision of a block_for rule refuses a key, every request of that
// key is refused for block_for, whatever the rule's own bucket holds.
//
// A box is one more key in the store, beside the rule's bucket
// (BlockKey: "<rule>\x1fblock\x1f<identity>"), decided by the store's own
// token bucket arithmetic with Rule::block_limit (burst 1, one token per
// block_for), so every store keeps it exactly as it keeps buckets (the local
// store's CAS and state file, the Redis and Cluster scripts, a fleet on one
// Redis):
//  - open: the box's bucket is full (or absent);
//  - closing it takes its one token (a cost-1 acquire): the bucket is then
//    empty until block_for has passed. A box already closed refuses that
//    acquire and is left as it is, so concurrent refusals close it once and
//    the block lasts exactly block_for from the first;
//  - a request peeks the boxes of its enforced block_for rules (cost 0)
//    before its batch: no token left means closed, refused until the
//    bucket's reset, and the batch is then only peeked (nothing charged).
#include <algorithm>
#include <utility>

#include "policy/enforcer_impl.h"

namespace tollgate {
namespace {

// The peeks (cost 0) of the plan's boxes, recording which items they belong to.
std::vector<AcquireItem> BlockPeeks(Plan& plan) {
  std::vector<AcquireItem> batch;
  for (size_t i = 0; i < plan.enforced_count; ++i) {
    const PlannedItem& item = plan.items[i];
    if (item.block_limit == nullptr) continue;
    plan.block_items.push_back(i);
    batch.push_back({item.block_key, item.block_limit, 0, item.failure_mode});
  }
  return batch;
}

void AbsorbBlocks(Plan& plan, Result<BatchDecision> r) {
  if (!r.ok()) {
    plan.error = r.status();
    return;
  }
  // A failure mode answered without state: no box is known to be closed.
  if (!r->enforced || r->decisions.size() != plan.block_items.size()) return;
  for (size_t k = 0; k < plan.block_items.size(); ++k) {
    const Decision& d = r->decisions[k];
    const size_t i = plan.block_items[k];
    if (plan.explain) {
      plan.trace.push_back(plan.items[i].name + ": " +
                           (d.remaining < 1 ? "key blocked for " +
                                                  std::to_string(d.reset_after.count() / 1000000) +
                                                  " ms more (block_for)"
                                            : std::string("key not blocked (block_for)")));
    }
    if (d.remaining < 1 && plan.blocked_item < 0) {
      plan.blocked_item = static_cast<int>(i);
      plan.blocked_for = std::max(d.reset_after, Nanos(1));
    }
  }
  if (plan.blocked_item >= 0) plan.peek = true;  // the batch then charges nothing
}

// The boxes a refused plan closes: its enforced block_for items that did not fit.
std::vector<AcquireItem> BlockCloses(Plan& plan) {
  std::vector<AcquireItem> batch;
  plan.block_items.clear();
  if (plan.explain || !plan.error.ok() || plan.unenforced || plan.allowed || plan.peek ||
      plan.blocked_item >= 0) {
    return batch;
  }
  for (size_t i = 0; i < plan.enforced_count; ++i) {
    const PlannedItem& item = plan.items[i];
    if (item.block_limit == nullptr || plan.decisions[i].allowed) continue;
    plan.block_items.push_back(i);
    batch.push_back({item.block_key, item.block_limit, 1, item.failure_mode});
  }
  return batch;
}

// The refusals that closed (or found closed) a box tell the client to come
// back when the block ends.
void AbsorbCloses(Plan& plan, const Result<BatchDecision>& r) {
  if (!r.ok() || !r->enforced || r->decisions.size() != plan.block_items.size()) return;
  for (size_t k = 0; k < plan.block_items.size(); ++k) {
    const Decision& box = r->decisions[k];
    Decision& d = plan.decisions[plan.block_items[k]];
    // Closed by this call: its token taken, open again at its reset; closed
    // already (a concurrent refusal): open again when a token is back. A
    // failed call leaves a default Decision (nothing known, a 0 wait).
    const Nanos left = box.allowed ? box.reset_after : box.retry_after;
    if (left <= Nanos(0)) continue;
    if (static_cast<int>(plan.block_items[k]) == plan.denied_item) plan.closed_denied = true;
    d.retry_after = std::max(d.retry_after, left);
    d.reset_after = std::max(d.reset_after, left);
  }
}

}  // namespace

void Enforcer::Impl::CheckBlocks(Plan& plan) {
  std::vector<AcquireItem> batch = BlockPeeks(plan);
  if (batch.empty()) return;
  AbsorbBlocks(plan, store_->Acquire(batch));
}

void Enforcer::Impl::CheckBlocksAsync(std::shared_ptr<Plan> plan, std::function<void()> next) {
  std::vector<AcquireItem> batch = BlockPeeks(*plan);
  if (batch.empty()) {
    next();
    return;
  }
  store_->AcquireAsync(batch, [plan, next = std::move(next)](Result<BatchDecision> r) {
    AbsorbBlocks(*plan, std::move(r));
    next();
  });
}

void Enforcer::Impl::ApplyBlock(Plan& plan) const {
  if (plan.blocked_item < 0 || !plan.error.ok() || plan.unenforced) return;
  plan.allowed = false;
  plan.denied_item = plan.blocked_item;
  Decision& d = plan.decisions[static_cast<size_t>(plan.blocked_item)];
  d.allowed = false;
  d.remaining = 0;
  d.retry_after = plan.blocked_for;
  d.reset_after = std::max(d.reset_after, plan.blocked_for);
}

void Enforcer::Impl::StartBlocks(Plan& plan) {
  std::vector<AcquireItem> batch = BlockCloses(plan);
  if (batch.empty()) return;
  // Each box alone (a batch is all-or-nothing; one box already closed must
  // not stop another from closing).
  BatchDecision all;
  for (const AcquireItem& item : batch) {
    Result<BatchDecision> r = store_->Acquire(std::span<const AcquireItem>(&item, 1));
    all.decisions.push_back(r.ok() && r->enforced && r->decisions.size() == 1 ? r->decisions[0]
                                                                              : Decision{});
  }
  AbsorbCloses(plan, Result<BatchDecision>(std::move(all)));
}

namespace {

// Closes the boxes of `closes` from the k-th on, one store call at a time, then `next`.
struct Closing {
  std::shared_ptr<Plan> plan;
  std::vector<AcquireItem> batch;
  BatchDecision decided;
  std::function<void()> next;
};

void CloseFrom(Store* store, std::shared_ptr<Closing> c, size_t k) {
  if (k == c->batch.size()) {
    AbsorbCloses(*c->plan, Result<BatchDecision>(std::move(c->decided)));
    c->next();
    return;
  }
  store->AcquireAsync(
      std::span<const AcquireItem>(&c->batch[k], 1), [store, c, k](Result<BatchDecision> r) {
        c->decided.decisions.push_back(
            r.ok() && r->enforced && r->decisions.size() == 1 ? r->decisions[0] : Decision{});
        CloseFrom(store, c, k + 1);
      });
}

}  // namespace

void Enforcer::Impl::StartBlocksAsync(std::shared_ptr<Plan> plan, std::function<void()> next) {
  std::vector<AcquireItem> batch = BlockCloses(*plan);
  if (batch.empty()) {
    next();
    return;
  }
  auto c = std::make_shared<Closing>();
  c->plan = std::move(plan);
  c->batch = std::move(batch);
  c->next = std::move(next);
  CloseFrom(store_, std::move(c), 0);
}

}  // namespace tollgate
