#include "redis/settle_script.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <mutex>

#include "redis/gcra_script.h"
#include "tollgate/algorithm.h"

namespace tollgate::redis {
namespace {

// Times are limbs (s, n) as in the batch script: exact in Lua's doubles.
constexpr std::string_view kSettleHead =
    "-- tollgate settle v1: cost after the response and refunds, one key\n";

// After LimbsLua (gcra_script.h).
constexpr std::string_view kSettleBody = R"lua(local function add(as, an, bs, bn)
  local s, n = as + bs, an + bn
  if n >= E9 then s, n = s + 1, n - E9 end
  return s, n
end
local function less(as, an, bs, bn) return as < bs or (as == bs and an < bn) end
local function diff(as, an, bs, bn)
  local s, n = as - bs, an - bn
  if n < 0 then s, n = s - 1, n + E9 end
  return s, n
end
local now_s, now_n
local ttl_slack = 0
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
else
  now_s, now_n = split(ARGV[1])
  ttl_slack = 1000
end
local key, kind = KEYS[1], tonumber(ARGV[2])
local function ttl(rs, rn)
  local ms = rs * 1000 + math.ceil(rn / 1000000) + ttl_slack
  if ms < 1 then ms = 1 end
  return string.format('%d', ms)
end
local v = redis.call('GET', key)
if kind == 0 then
  local cs, cn = split(ARGV[3])
  local fs, fn = split(ARGV[4])
  local ms, mn = split(ARGV[5])
  local bs, bn = 0, 0
  if v then
    local ts, tn = split(v)
    if ts == nil or tn == nil then return redis.error_reply('tollgate: bad bucket state') end
    if less(now_s, now_n, ts, tn) then bs, bn = diff(ts, tn, now_s, now_n) end
  end
  local xs, xn = bs, bn
  if less(xs, xn, fs, fn) then xs, xn = 0, 0 else xs, xn = diff(xs, xn, fs, fn) end
  local ys, yn = add(xs, xn, cs, cn)
  if less(ms, mn, ys, yn) then
    ys, yn = ms, mn
    if less(ys, yn, xs, xn) then ys, yn = xs, xn end
  end
  if ys ~= bs or yn ~= bn then
    if ys == 0 and yn == 0 then
      redis.call('DEL', key)
    else
      local as, an = add(now_s, now_n, ys, yn)
      local val
      if as > 0 then val = string.format('%d%09d', as, an) else val = string.format('%d', an) end
      redis.call('SET', key, val, 'PX', ttl(ys, yn))
    end
  end
  return {bs, bn, ys, yn}
end
local ws, wn = split(ARGV[3])
local charge, refund = tonumber(ARGV[4]), tonumber(ARGV[5])
local ags, agn = split(ARGV[6])
local maxc, digits = tonumber(ARGV[7]), tonumber(ARGV[8])
-- floor(t / w) and the end of that window - t, on exact limbs.
local function window(ts, tn)
  local q = floor((ts * E9 + tn) / (ws * E9 + wn))
  local ps, pn = mul(q, ws, wn)
  while less(ts, tn, ps, pn) do
    q, ps, pn = q - 1, diff(ps, pn, ws, wn)
  end
  local es, en = add(ps, pn, ws, wn)
  while not less(ts, tn, es, en) do
    q = q + 1
    es, en = add(es, en, ws, wn)
  end
  es, en = diff(es, en, ts, tn)
  return q, es, en
end
local cur, rs, rn = window(now_s, now_n)
local cts, ctn = 0, 0
if less(ags, agn, now_s, now_n) then cts, ctn = diff(now_s, now_n, ags, agn) end
local charged_in = window(cts, ctn)
local prev, count, held = 0, 0, false
if v then
  local len, idx = #v, nil
  if kind == 4 then
    idx, count = tonumber(sub(v, 1, len - digits)), tonumber(sub(v, len - digits + 1))
  else
    idx = tonumber(sub(v, 1, len - 14))
    prev, count = tonumber(sub(v, len - 13, len - 7)), tonumber(sub(v, len - 6))
  end
  if idx == nil or count == nil or prev == nil then
    return redis.error_reply('tollgate: bad window state')
  end
  if idx >= cur then
    -- the stored window is current, or ahead of a clock that stepped back: stay in it
    if idx > cur then
      local xs, xn = mul(idx - cur, ws, wn)
      rs, rn = add(rs, rn, xs, xn)
    end
    cur, held = idx, true
  elseif kind == 5 and idx == cur - 1 then
    prev, count = count, 0
  else
    prev, count = 0, 0
  end
end
local refunded, charged = 0, 0
if refund > 0 and held and charged_in == cur then
  refunded = math.min(count, refund)
  count = count - refunded
end
if charge > 0 then
  charged = math.min(charge, maxc - count)
  count = count + charged
end
if charged > 0 or refunded > 0 then
  if kind == 4 then
    redis.call('SET', key, string.format('%d%0' .. digits .. 'd', cur, count), 'PX', ttl(rs, rn))
  else
    local ts, tn = add(rs, rn, ws, wn)
    redis.call('SET', key, string.format('%d%07d%07d', cur, prev, count), 'PX', ttl(ts, tn))
  end
end
return {charged, refunded, prev * C20 + count, rs, rn}
)lua";

using i128 = __int128;

// A synthetic time far from 0, so a reconstructed state word is never 0 ("never seen").
constexpr int64_t kSyntheticNow = int64_t{1} << 61;

Status Bad(std::string_view what) {
  return Status(StatusCode::kScript, "redis settle reply: " + std::string(what));
}

bool Limb(const RedisReply& r, int64_t max_s, int64_t* s) {
  if (r.type != RedisReply::Type::kInteger || r.integer < 0 || r.integer > max_s) return false;
  *s = r.integer;
  return true;
}

// The index of the synthetic window a window reply is decoded in: far enough
// from 0 that its state word is never 0 and the window before it exists
// (sliding), small enough that core's window arithmetic ((index + 1) * w, the
// window's end) stays within int64 for every window length up to 366 days
// (2^20 for a 1 ms window, 289 for a 366-day one), and within every state
// layout's index bits (2^23 and up).
int64_t SyntheticWindowIndex(int64_t window_ns) {
  return std::min<int64_t>(int64_t{1} << 20, std::numeric_limits<int64_t>::max() / window_ns - 2);
}

// The decision core's Settle reports for `state` at `now` (nothing settled).
Decision Report(const Limit& limit, uint64_t state, int64_t now) {
  return Settle(limit, state, SettleOp{}, now).step.decision;
}

}  // namespace

std::string_view SettleScript() {
  static const std::string script =
      std::string(kSettleHead) + std::string(LimbsLua()) + std::string(kSettleBody);
  return script;
}

Status CheckSettleLimit(const Limit& limit) {
  if (limit.algorithm() == Algorithm::kSlidingLog) {
    return InvalidArgument("sliding_log limits cannot be settled after the response");
  }
  if (limit.calendar() != nullptr) {
    return InvalidArgument("calendar quotas cannot be settled after the response on redis");
  }
  return CheckScriptLimit(limit);
}

std::vector<std::string> SettleArgs(const SettleItem& item, const std::string& now) {
  const Limit& limit = *item.limit;
  std::vector<std::string> argv{now};
  if (limit.algorithm() == Algorithm::kTokenBucket ||
      limit.algorithm() == Algorithm::kLeakyBucket) {
    // Increments below 2^62 (IncrementFor saturates); the bound below 2^61.
    argv.push_back("0");
    argv.push_back(std::to_string(limit.IncrementFor(item.charge)));
    argv.push_back(std::to_string(limit.IncrementFor(item.refund)));
    argv.push_back(std::to_string(limit.tolerance_ns() + kMaxDebtNs));
    return argv;
  }
  const int64_t max = MaxSettleCount(limit);
  argv.push_back(limit.algorithm() == Algorithm::kFixedWindow ? "4" : "5");
  argv.push_back(std::to_string(limit.window_ns()));
  argv.push_back(std::to_string(std::clamp<int64_t>(item.charge, 0, max)));
  argv.push_back(std::to_string(std::clamp<int64_t>(item.refund, 0, max)));
  argv.push_back(std::to_string(std::clamp<int64_t>(item.age.count(), 0, int64_t{1} << 61)));
  argv.push_back(std::to_string(max));
  argv.push_back(std::to_string(WindowCountDigits(limit)));
  return argv;
}

Result<Settled> DecodeSettleReply(const SettleItem& item, const RedisReply& reply) {
  const Limit& limit = *item.limit;
  if (reply.type == RedisReply::Type::kError) return Bad(reply.str.substr(0, 200));
  if (reply.type != RedisReply::Type::kArray) return Bad("not an array");
  const auto& e = reply.elements;
  Settled out;
  if (limit.algorithm() == Algorithm::kTokenBucket ||
      limit.algorithm() == Algorithm::kLeakyBucket) {
    int64_t bs, bn, as, an;
    constexpr int64_t kMaxS = (int64_t{1} << 61) / 1'000'000'000;
    if (e.size() != 4 || !Limb(e[0], kMaxS, &bs) || !Limb(e[1], 999'999'999, &bn) ||
        !Limb(e[2], kMaxS, &as) || !Limb(e[3], 999'999'999, &an)) {
      return Bad("expected 4 integers (base and after, s and ns, in range)");
    }
    const int64_t base = bs * 1'000'000'000 + bn, after = as * 1'000'000'000 + an;
    const int64_t charge_ns = limit.IncrementFor(item.charge);
    const int64_t kept = std::max<int64_t>(0, base - limit.IncrementFor(item.refund));
    const int64_t charged_ns = after - kept;
    if (charged_ns < 0 || charged_ns > charge_ns ||
        after > std::max(kept, limit.tolerance_ns() + kMaxDebtNs)) {
      return Bad("the bucket moved by more than the settlement asked");
    }
    out.refunded = static_cast<int64_t>((static_cast<i128>(base - kept) + limit.interval_ns() - 1) /
                                        limit.interval_ns());
    out.charged = charged_ns == charge_ns ? item.charge : limit.TokensIn(charged_ns);
    const uint64_t state = after == 0 ? 0 : static_cast<uint64_t>(kSyntheticNow + after);
    out.decision = Report(limit, state, kSyntheticNow);
    return out;
  }
  const int64_t max = MaxSettleCount(limit);
  const bool sliding = limit.algorithm() == Algorithm::kSlidingWindow;
  int64_t charged, refunded, count, rs, rn;
  if (e.size() != 5 || !Limb(e[0], max, &charged) || !Limb(e[1], max, &refunded) ||
      !Limb(e[2], sliding ? (max << 20) | max : max, &count) ||
      !Limb(e[3], kMaxReplySeconds, &rs) || !Limb(e[4], 999'999'999, &rn)) {
    return Bad("expected 5 integers (charged, refunded, count, s and ns, in range)");
  }
  if (charged > item.charge || refunded > item.refund) return Bad("settled more than asked");
  out.charged = charged;
  out.refunded = refunded;
  // The state word core would hold, in a synthetic window K whose end lies
  // `rel` after the synthetic now (a stored window ahead of the clock: at its start).
  const int64_t w = limit.window_ns();
  const i128 rel = std::min<i128>(static_cast<i128>(rs) * 1'000'000'000 + rn, w);
  if (rel <= 0) return Bad("window end not after now");
  const int64_t window = SyntheticWindowIndex(w);
  const int64_t now = static_cast<int64_t>((window + 1) * static_cast<i128>(w) - rel);
  uint64_t state;
  if (sliding) {
    state = (static_cast<uint64_t>(window) << 40) | static_cast<uint64_t>(count);
    if ((count & ((1 << 20) - 1)) > max || (count >> 20) > max) return Bad("counts out of range");
  } else {
    state = (static_cast<uint64_t>(window) << FixedWindowCountBits(limit)) |
            static_cast<uint64_t>(count);
  }
  if (count == 0) state = 0;
  out.decision = Report(limit, state, now);
  return out;
}

void SettleEachAsync(std::span<const SettleItem> items,
                     const std::function<std::string(std::string_view key, const Limit&)>& key_of,
                     const std::string& now, const SettleRun& run, Store::SettleCallback done) {
  for (size_t i = 0; i < items.size(); ++i) {
    const SettleItem& item = items[i];
    Status bad;
    if (item.limit == nullptr || item.charge < 0 || item.refund < 0 || item.age.count() < 0) {
      bad = InvalidArgument("needs a limit, a charge and refund >= 0 and an age >= 0");
    } else {
      bad = CheckSettleLimit(*item.limit);
    }
    if (!bad.ok()) {
      done(InvalidArgument("items[" + std::to_string(i) + "]: " + bad.message()));
      return;
    }
  }
  if (items.empty()) {
    done(std::vector<Settled>{});
    return;
  }
  // Shared by the replies: each fills its slot; the last one calls done.
  struct Pending {
    std::vector<Limit> limits;
    std::vector<SettleItem> items;  // limit pointers into `limits`; keys not kept
    std::vector<Settled> out;
    Status error;
    std::mutex mu;  // guards error
    std::atomic<size_t> left;
    Store::SettleCallback done;
  };
  auto p = std::make_shared<Pending>();
  p->limits.reserve(items.size());
  for (const SettleItem& item : items) p->limits.push_back(*item.limit);
  for (size_t i = 0; i < items.size(); ++i) {
    SettleItem copy = items[i];
    copy.key = {};
    copy.limit = &p->limits[i];
    p->items.push_back(copy);
  }
  p->out.resize(items.size());
  p->left = items.size();
  p->done = std::move(done);
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<std::string> argv{"EVAL", std::string(SettleScript()), "1",
                                  key_of(items[i].key, *items[i].limit)};
    std::vector<std::string> args = SettleArgs(items[i], now);
    argv.insert(argv.end(), std::make_move_iterator(args.begin()),
                std::make_move_iterator(args.end()));
    std::string redis_key = argv[3];
    run(std::move(redis_key), std::move(argv), [p, i](Result<RedisReply> r) {
      Result<Settled> s = r.ok() ? DecodeSettleReply(p->items[i], *r) : Result<Settled>(r.status());
      if (s.ok()) {
        p->out[i] = *s;
      } else {
        std::lock_guard<std::mutex> lock(p->mu);
        if (p->error.ok()) p->error = s.status();
      }
      if (p->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        if (p->error.ok()) {
          p->done(std::move(p->out));
        } else {
          p->done(p->error);
        }
      }
    });
  }
}

}  // namespace tollgate::redis
