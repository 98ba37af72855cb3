#include "redis/gcra_script.h"

#include <algorithm>

namespace tollgate::redis {
namespace {

// Shared with the settle script (LimbsLua).
constexpr std::string_view kLimbs =
    R"lua(if redis.replicate_commands then pcall(redis.replicate_commands) end
local E9, C20 = 1000000000, 1048576
local tonumber, sub, floor = tonumber, string.sub, math.floor
local function split(v)
  local len = #v
  if len <= 9 then return 0, tonumber(v) end
  return tonumber(sub(v, 1, len - 9)), tonumber(sub(v, len - 8))
end
-- q, r of x / d for integers x < 2^53 (the double quotient may be 1 off).
local function divmod(x, d)
  local q = floor(x / d)
  local r = x - q * d
  if r < 0 then return q - 1, r + d end
  if r >= d then return q + 1, r - d end
  return q, r
end
-- k * (s, n) as limbs, exact while k*s and floor(k/1e6)*n stay below 2^53.
local function mul(k, s, n)
  local kh, kl = divmod(k, 1000000)
  local hq, hr = divmod(kh * n, 1000)  -- kh*n units of 1e6 ns
  local lq, lr = divmod(kl * n, E9)
  local rs, rn = k * s + hq + lq, hr * 1000000 + lr
  if rn >= E9 then rs, rn = rs + 1, rn - E9 end
  return rs, rn
end
)lua";

// Times are pairs (s, n): s whole seconds, 0 <= n < 1e9 nanoseconds.
constexpr std::string_view kScriptHead =
    "-- tollgate batch v9: gcra + fixed/sliding/calendar window, msgpack groups and reply\n";

constexpr std::string_view kScriptBody = R"lua(local now_s, now_n
-- Client clocks may disagree: keep keys 1 s longer than the writer's refill
-- time so a client whose clock is behind still sees the debt.
local ttl_slack = 0
if ARGV[1] ~= '' then ttl_slack = 1000 end
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now_s, now_n = tonumber(t[1]), tonumber(t[2]) * 1000
else
  now_s, now_n = split(ARGV[1])
end
-- Keys: declared in KEYS, or (cluster, several slots of this node) in ARGV.
local keys, a = KEYS, 3
local nk = tonumber(ARGV[2])
if nk > 0 then
  keys = {}
  for i = 1, nk do keys[i] = ARGV[a + i - 1] end
  a = a + nk
end
-- Entries. GCRA kinds 0-3: kind, increment, threshold (both split; els/eln =
-- now + threshold). Windows 4 (fixed) and 5 (sliding): kind, cost, window,
-- burst; eidx = the current window's index, ers/ern = its end - now (limbs).
-- 6 (window index; its args are ignored): reports the window index its key's
-- state holds at that point of its group (cluster cross-node refunds).
local nent = tonumber(ARGV[a])
a = a + 1
local ekind, eis, ein, els, eln, ewr, ewd = {}, {}, {}, {}, {}, {}, {}
local ecost, eburst, eidx, ers, ern, ebnd, ebase = {}, {}, {}, {}, {}, {}, {}
for e = 1, nent do
  local kind = tonumber(ARGV[a])
  ekind[e] = kind
  if kind < 4 then
    eis[e], ein[e] = split(ARGV[a + 1])
    local hs, hn = split(ARGV[a + 2])
    local ls, ln = now_s + hs, now_n + hn
    if ln >= E9 then ls, ln = ls + 1, ln - E9 end
    els[e], eln[e] = ls, ln
    ewr[e] = kind < 2
    a = a + 3
  elseif kind == 6 then
    ewr[e] = false
    a = a + 4
  else
    local cost = tonumber(ARGV[a + 1])
    ecost[e], eburst[e], ewr[e] = cost, tonumber(ARGV[a + 3]), cost > 0
    if kind == 7 then
      -- A calendar window: from then on a fixed window (kind 4) whose index
      -- and end come from the client's boundaries, chosen by this clock.
      ekind[e], kind = 4, 7
    end
    -- A fixed window's count is 7 decimal digits, 13 for quotas above 9999999.
    ewd[e] = 7
    if kind ~= 5 and eburst[e] > 9999999 then ewd[e] = 13 end
    if kind == 7 then
      local b, base = {}, nil
      for v in string.gmatch(ARGV[a + 2], '[^,]+') do
        if base == nil then base = tonumber(v) else b[#b + 1] = tonumber(v) end
      end
      local i = 1
      while i < #b and b[i + 1] <= now_s do i = i + 1 end
      if i >= #b or b[i] > now_s then
        return redis.error_reply('tollgate: calendar window out of range: the store clock is over a window away from the client clock')
      end
      ebnd[e], ebase[e], eidx[e] = b, base, base + i - 1
      local es, en = b[i + 1] - now_s, -now_n
      if en < 0 then es, en = es - 1, en + E9 end
      ers[e], ern[e] = es, en
      a = a + 4
    else
    local ws, wn = split(ARGV[a + 2])
    eis[e], ein[e] = ws, wn
    -- q = floor(now / w): a double estimate, then corrected on exact limbs.
    local q = floor((now_s * E9 + now_n) / (ws * E9 + wn))
    local ps, pn = mul(q, ws, wn)
    while ps > now_s or (ps == now_s and pn > now_n) do
      q, ps, pn = q - 1, ps - ws, pn - wn
      if pn < 0 then ps, pn = ps - 1, pn + E9 end
    end
    local es, en = ps + ws, pn + wn
    if en >= E9 then es, en = es + 1, en - E9 end
    while es < now_s or (es == now_s and en <= now_n) do
      q, es, en = q + 1, es + ws, en + wn
      if en >= E9 then es, en = es + 1, en - E9 end
    end
    es, en = es - now_s, en - now_n
    if en < 0 then es, en = es - 1, en + E9 end
    eidx[e], ers[e], ern[e] = q, es, en
    a = a + 4
    end
  end
end
local vals
if nk > 0 then
  vals = {}  -- one GET per key: MGET may not span slots
  for i = 1, nk do vals[i] = redis.call('GET', keys[i]) end
else
  vals = redis.call('MGET', unpack(KEYS))
end
-- A key's state, parsed at first use (its entries' kind tells the format):
-- GCRA: TAT (s, n); windows: (window index, count) where count is `used`
-- (fixed) or prev * 2^20 + curr (sliding); -1 = never seen.
local ts, tn = {}, {}
local function state(key, e)
  local s = ts[key]
  if s ~= nil then return s, tn[key] end
  local v, n = vals[key]
  if ekind[e] < 4 then
    if v then s, n = split(v) else s, n = now_s, now_n end
  elseif not v then
    s, n = -1, 0
  else
    local len = #v
    if ekind[e] == 4 then
      local wd = ewd[e]
      s, n = tonumber(sub(v, 1, len - wd)), tonumber(sub(v, len - wd + 1))
    else
      s = tonumber(sub(v, 1, len - 14))
      n = tonumber(sub(v, len - 13, len - 7)) * C20 + tonumber(sub(v, len - 6))
    end
  end
  ts[key], tn[key] = s, n
  return s, n
end
-- A window item against (idx, count): allowed?, idx', count' (core's rules:
-- a stored window ahead of now means the clock stepped back: stay in it).
local function wstep(idx, cnt, e)
  local cur, cost, burst = eidx[e], ecost[e], eburst[e]
  if ekind[e] == 4 then
    local used = 0
    if idx >= cur then cur, used = idx, cnt end
    if used + cost <= burst then return true, cur, used + cost end
    return false, cur, used
  end
  local prev, curr, back = 0, 0, false
  if idx >= cur then
    back, cur = idx > cur, idx
    prev = floor(cnt / C20)
    curr = cnt - prev * C20
  elseif idx == cur - 1 then
    prev = cnt % C20
  end
  -- allowed iff prev * (w - elapsed) <= (burst - curr - cost) * w, where
  -- w - elapsed = ers (or w when the clock stepped back: elapsed = 0)
  local room = burst - curr - cost
  local ok = room >= 0
  if ok and prev > 0 then
    if back then
      ok = prev <= room
    else
      local xs, xn = mul(prev, ers[e], ern[e])
      local ys, yn = mul(room, eis[e], ein[e])
      ok = xs < ys or (xs == ys and xn <= yn)
    end
  end
  if ok then curr = curr + cost end
  return ok, cur, prev * C20 + curr
end
-- One item against its key's state: allowed?, state after.
local function step(s, n, e)
  local kind = ekind[e]
  if kind >= 4 then
    if kind == 6 then return true, s, n end
    return wstep(s, n, e)
  end
  if s < now_s or (s == now_s and n < now_n) then s, n = now_s, now_n end
  if kind >= 2 then return kind == 3, s, n end
  local ls, ln = els[e], eln[e]
  if kind == 0 then
    local xs, xn = s + eis[e], n + ein[e]
    if xn >= E9 then xs, xn = xs + 1, xn - E9 end
    if xs < ls or (xs == ls and xn <= ln) then return true, xs, xn end
    return false, s, n
  end
  if s < ls or (s == ls and n <= ln) then
    local xs, xn = s + eis[e], n + ein[e]
    if xn >= E9 then xs, xn = xs + 1, xn - E9 end
    return true, xs, xn
  end
  return false, s, n
end
-- End of window idx (>= the entry's current window) - now, as limbs.
local function wend(e, idx)
  local rs, rn = ers[e], ern[e]
  local b = ebnd[e]
  if b then
    -- A calendar window ahead of now: its end if the boundaries reach it.
    local bend = b[idx - ebase[e] + 2]
    if idx > eidx[e] and bend then
      rs, rn = bend - now_s, -now_n
      if rn < 0 then rs, rn = rs - 1, rn + E9 end
    end
  elseif idx > eidx[e] then
    local xs, xn = mul(idx - eidx[e], eis[e], ein[e])
    rs, rn = rs + xs, rn + xn
    if rn >= E9 then rs, rn = rs + 1, rn - E9 end
  end
  return rs, rn
end
local out, o = {}, 0
local dirty = {}
-- GCRA: code, TAT - now (limbs); windows: code + 8 * count, window end - now;
-- 6: code, the window index (limbs).
local function emit(code, e, s, n)
  local rs, rn
  if ekind[e] >= 4 then
    if ekind[e] == 6 then
      rs, rn = divmod(s, E9)
    else
      code = code + 8 * n
      rs, rn = wend(e, s)
    end
  else
    rs, rn = s - now_s, n - now_n
    if rn < 0 then rs, rn = rs - 1, rn + E9 end
  end
  out[o + 1], out[o + 2], out[o + 3] = code, rs, rn
  o = o + 3
end
-- The groups: one MessagePack array of integers (decoded in C). An item is
-- one number: key index * PB + entry index.
local groups = cmsgpack.unpack(ARGV[a])
local gi, gn = 1, #groups
local PB = 2097152
while gi <= gn do
  local v = groups[gi]
  gi = gi + 1
  if v >= PB then
    -- The common case, without tables: one charged item, its own group.
    local key = floor(v / PB)
    local e = v - key * PB
    local s, n = ts[key], nil
    if s == nil then s, n = state(key, e) else n = tn[key] end
    if ekind[e] == 0 then
      -- A token bucket (or leaky meter), inlined: the hottest path.
      if s < now_s or (s == now_s and n < now_n) then s, n = now_s, now_n end
      local xs, xn = s + eis[e], n + ein[e]
      if xn >= E9 then xs, xn = xs + 1, xn - E9 end
      local ls = els[e]
      local code = 0
      if xs < ls or (xs == ls and xn <= eln[e]) then
        s, n, code = xs, xn, 1
        ts[key], tn[key] = s, n
        dirty[key] = e
      end
      local rs, rn = s - now_s, n - now_n
      if rn < 0 then rs, rn = rs - 1, rn + E9 end
      out[o + 1], out[o + 2], out[o + 3] = code, rs, rn
      o = o + 3
    else
      local ok
      ok, s, n = step(s, n, e)
      if ok then
        if ewr[e] then
          ts[key], tn[key] = s, n
          dirty[key] = e
        end
        emit(1, e, s, n)
      else
        emit(0, e, s, n)
      end
    end
  else
    -- A group of v items; -v items: a dry run (decide the group, write nothing).
    local dry = v < 0
    local count = v
    if dry then count = -v end
    local k, ent = {}, {}
    for j = 1, count do
      local x = groups[gi]
      gi = gi + 1
      local key = floor(x / PB)
      k[j], ent[j] = key, x - key * PB
    end
    -- Phase 1: every item alone against the current state.
    local ok1, s1, n1 = {}, {}, {}
    local denied = false
    for j = 1, count do
      local s0, n0 = state(k[j], ent[j])
      ok1[j], s1[j], n1[j] = step(s0, n0, ent[j])
      if not ok1[j] then denied = true end
    end
    local fail = 0
    local cs, cn, s2, n2, we = {}, {}, {}, {}, {}
    if not denied then
      -- Phase 2: the items together, in order, on a working copy.
      for j = 1, count do
        local key, e = k[j], ent[j]
        local s0, n0 = cs[key], cn[key]
        if s0 == nil then s0, n0 = ts[key], tn[key] end
        local ok, s, n = step(s0, n0, e)
        if not ok then fail = j; break end
        s2[j], n2[j] = s, n
        if ewr[e] then cs[key], cn[key], we[key] = s, n, e end
      end
    end
    if denied or fail > 0 then
      -- Nothing is charged: each item reports its state alone (3: it would fit).
      for j = 1, count do
        local code = 0
        if j == fail then code = 2 elseif ok1[j] then code = 3 end
        emit(code, ent[j], s1[j], n1[j])
      end
    else
      if not dry then
        for key, s in pairs(cs) do
          ts[key], tn[key] = s, cn[key]
          dirty[key] = we[key]
        end
      end
      -- A dry run reports each item's state alone (the client reports it
      -- uncharged), like a denied group; a charged group the states in order.
      if dry then
        for j = 1, count do emit(1, ent[j], s1[j], n1[j]) end
      else
        for j = 1, count do emit(1, ent[j], s2[j], n2[j]) end
      end
    end
  end
end
local ttls = {}
-- Write back; each key expires when its state no longer matters: a bucket
-- when full again, a fixed window at its end, a sliding window's counts at
-- the end of the next window.
for key, e in pairs(dirty) do
  local s, n = ts[key], tn[key]
  local rs, rn, v
  local kind = ekind[e]
  if kind < 4 then
    rs, rn = s - now_s, n - now_n
    if rn < 0 then rs, rn = rs - 1, rn + E9 end
    if s > 0 then v = string.format('%d%09d', s, n) else v = string.format('%d', n) end
  else
    rs, rn = wend(e, s)
    if kind == 4 then
      if ewd[e] == 13 then v = string.format('%d%013d', s, n) else v = string.format('%d%07d', s, n) end
    else
      local prev = floor(n / C20)
      v = string.format('%d%07d%07d', s, prev, n - prev * C20)
      rs, rn = rs + eis[e], rn + ein[e]
      if rn >= E9 then rs, rn = rs + 1, rn - E9 end
    end
  end
  local ms = rs * 1000 + math.ceil(rn / 1000000) + ttl_slack
  if ms < 1 then ms = 1 end
  -- Redis would print a number argument with "%.17g"; TTLs repeat within a
  -- call, so each distinct one is formatted once.
  local mss = ttls[ms]
  if mss == nil then
    mss = string.format('%d', ms)  -- ms < 2^45
    ttls[ms] = mss
  end
  redis.call('SET', keys[key], v, 'PX', mss)
end
-- One bulk string (MessagePack array of integers, encoded in C) instead of
-- three integer replies per item.
return cmsgpack.pack(out)
)lua";

const std::string& Script() {
  static const std::string script =
      std::string(kScriptHead) + std::string(kLimbs) + std::string(kScriptBody);
  return script;
}

}  // namespace

constexpr std::string_view kClusterScript = "#!lua flags=allow-cross-slot-keys\n";

std::string_view LimbsLua() { return kLimbs; }

std::string_view GcraScript() { return Script(); }

const std::string& GcraClusterScript() {
  static const std::string script = std::string(kClusterScript) + Script();
  return script;
}

int WindowCountDigits(const Limit& limit) {
  return limit.algorithm() == Algorithm::kFixedWindow && limit.burst() > kMaxNarrowWindowCount ? 13
                                                                                               : 7;
}

Status CheckScriptLimit(const Limit& limit) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      break;
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindow: {
      // Counts are 7 or 13 decimal digits in the stored value (all below 2^53
      // in Lua); windows stay below 2^60 ns like every other time
      // (Limit::Create allows at most 366 days).
      const int64_t max_burst = limit.algorithm() == Algorithm::kFixedWindow
                                    ? Limit::kMaxFixedWindowBurst
                                    : Limit::kMaxWindowBurst;
      if (limit.burst() < 1 || limit.burst() > max_burst || limit.window_ns() < 1 ||
          limit.window_ns() >= (int64_t{1} << 60)) {
        return InvalidArgument("limit " + limit.ToString() +
                               " is outside what the redis script represents exactly (burst "
                               "1..2^40 fixed, 1..2^20-1 sliding, window below 2^60 ns)");
      }
      return Status::Ok();
    }
    case Algorithm::kSlidingLog:
      return InvalidArgument(
          "algorithm sliding_log is not supported by the redis store: its state is a log of up "
          "to `burst` grants per key (up to 1e6 entries, tens of MB), which one atomic script "
          "cannot keep bounded and fast; use sliding_window (two counters, one small string) "
          "or fixed_window");
  }
  // The script holds times as (seconds, ns) limbs: any int64 >= 0 is exact.
  // Limit::Create already keeps every constant below 2^60 ns; check anyway.
  constexpr int64_t kMax = int64_t{1} << 60;
  if (limit.tolerance_ns() <= 0 || limit.tolerance_ns() >= kMax || limit.max_delay_ns() < 0 ||
      limit.max_delay_ns() >= kMax || limit.IncrementFor(limit.burst()) >= kMax) {
    return InvalidArgument("limit " + limit.ToString() +
                           " has time constants outside [0, 2^60) ns; the redis script cannot "
                           "represent them exactly");
  }
  return Status::Ok();
}

std::string CalendarBoundaries(const Calendar& calendar, int64_t wall_now_ns) {
  const int64_t base = calendar.At(wall_now_ns).index - 1;
  std::string out = std::to_string(base);
  for (int64_t i = 0; i <= 4; ++i) out += "," + std::to_string(calendar.StartSeconds(base + i));
  return out;
}

std::string StateKeySuffix(const Limit& limit) {
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
      if (limit.calendar() != nullptr) {
        return (WindowCountDigits(limit) == 13 ? "|fcq:" : "|fc:") + limit.calendar()->ToString();
      }
      // The wide layout (13 digits of count) under its own name, so a quota
      // that crosses 9999999 never reads a value of the other width.
      return (WindowCountDigits(limit) == 13 ? "|fq:" : "|fw:") + std::to_string(limit.window_ns());
    case Algorithm::kSlidingWindow:
      return "|sw:" + std::to_string(limit.window_ns());
    default:
      return std::string();
  }
}

ScriptItem MakeScriptItem(const Limit& limit, int64_t cost) {
  ScriptItem item;
  if (limit.algorithm() == Algorithm::kFixedWindow ||
      limit.algorithm() == Algorithm::kSlidingWindow) {
    item.kind = limit.algorithm() == Algorithm::kFixedWindow ? ItemKind::kFixedWindow
                                                             : ItemKind::kSlidingWindow;
    // Any cost above burst is denied alike; clamp it so Lua holds it exactly.
    item.increment = std::clamp<int64_t>(cost, 0, limit.burst() + 1);
    item.threshold = limit.window_ns();
    item.burst = limit.burst();
    item.calendar = limit.calendar();
    return item;
  }
  const bool shaper = limit.algorithm() == Algorithm::kLeakyBucket && limit.max_delay_ns() > 0;
  item.threshold = shaper ? limit.max_delay_ns() : limit.tolerance_ns();
  item.increment = 0;
  if (cost > limit.burst()) {
    item.kind = ItemKind::kNever;
  } else if (cost <= 0) {
    item.kind = ItemKind::kPeek;
  } else {
    item.kind = shaper ? ItemKind::kShaper : ItemKind::kGcra;
    item.increment = limit.IncrementFor(cost);
  }
  return item;
}

namespace {

using i128 = __int128;

Nanos NonNegative(int64_t ns) { return Nanos(ns < 0 ? 0 : ns); }

// Core's FixedWindowStep / SlidingWindowStep decision, from the counts after
// the item and r = (end of the item's window) - now. r <= w means `now` lies
// in that window (elapsed = w - r); r > w means the stored window is ahead of
// a clock that stepped back, where core decides at the window's start
// (elapsed = 0, r - w after now).
Decision DecodeWindow(const Limit& limit, const ScriptItem& item, int64_t code, int64_t r,
                      int64_t count) {
  const int64_t w = limit.window_ns(), burst = limit.burst(), cost = item.increment;
  Decision d;
  d.limit = burst;
  d.allowed = code == 1 || code == 3;
  // 2 and 3: the script reports the state the item alone would leave; the
  // contract is the state without the charge (see DecodeDecision).
  const int64_t uncharge = code == 2 || code == 3 ? cost : 0;
  if (item.kind == ItemKind::kFixedWindow) {
    d.remaining = std::max<int64_t>(0, burst - (count - uncharge));  // < 0 in settled debt
    d.reset_after = NonNegative(r);
    if (code == 0) d.retry_after = cost > burst ? Decision::kNever : NonNegative(r);
    return d;
  }
  const int64_t prev = count >> 20;
  const int64_t curr = (count & ((int64_t{1} << 20) - 1)) - uncharge;
  const int64_t elapsed = r <= w ? w - r : 0;
  const int64_t ahead = r <= w ? 0 : r - w;  // core's t - now
  if (code == 0) {
    if (cost > burst) {
      d.retry_after = Decision::kNever;
    } else {
      const int64_t room = burst - curr - cost;
      i128 wait;
      if (room >= 0 && prev > 0) {
        wait = w - (static_cast<i128>(room) * w) / prev - elapsed;
      } else {
        i128 e2 = 0;
        if (curr > 0) e2 = w - (static_cast<i128>(burst - cost) * w) / curr;
        wait = (w - elapsed) + e2;
      }
      // wait counts from the window's start, `ahead` after now (core adds t - now).
      // The script's counts give 1 <= wait <= 2w (the rest of this window and the
      // next); counts it cannot send (a denied item that fits) are held to that too.
      d.retry_after = Nanos(static_cast<int64_t>(std::clamp<i128>(wait, 1, 2 * i128{w})) + ahead);
    }
  }
  const i128 est_scaled = static_cast<i128>(prev) * (w - elapsed) + static_cast<i128>(curr) * w;
  const int64_t est = static_cast<int64_t>((est_scaled + w - 1) / w);
  d.remaining = std::max<int64_t>(0, burst - est);
  const int64_t idle =
      curr > 0 ? ahead - elapsed + 2 * w : (prev > 0 ? ahead - elapsed + w : ahead);
  d.reset_after = NonNegative(idle);
  return d;
}

}  // namespace

Decision DecodeDecision(const Limit& limit, const ScriptItem& item, int64_t code, int64_t rel,
                        int64_t count) {
  if (item.kind == ItemKind::kFixedWindow || item.kind == ItemKind::kSlidingWindow) {
    return DecodeWindow(limit, item, code, rel, count);
  }
  if (item.kind == ItemKind::kWindowIndex) {
    Decision d;
    d.allowed = code == 1 || code == 3;
    d.reset_after = Nanos(rel);  // the window index, not a duration
    return d;
  }
  const bool shaper = limit.algorithm() == Algorithm::kLeakyBucket && limit.max_delay_ns() > 0;
  Decision d;
  d.limit = limit.burst();
  d.allowed = code == 1 || code == 3;
  // 3: the item would fit, but its batch was denied and nothing was charged;
  // 2: the item at which the batch stopped fitting. The script reports the
  // state the item alone would leave; Store's contract (LocalStore) is the
  // state without the charge.
  if (code == 2 || code == 3) rel -= item.increment;
  d.reset_after = Nanos(rel < 0 ? 0 : rel);
  if (shaper) {
    const int64_t slack = limit.max_delay_ns() - rel;
    d.remaining = slack < 0 ? 0 : std::min(limit.burst(), limit.TokensIn(slack) + 1);
    if (code == 0) {
      d.retry_after =
          item.kind == ItemKind::kNever ? Decision::kNever : Nanos(rel - limit.max_delay_ns());
    } else if (code == 1 && item.kind == ItemKind::kShaper) {
      d.delay = Nanos(rel - item.increment);
    }
  } else {
    d.remaining = std::min(limit.burst(), limit.TokensIn(limit.tolerance_ns() - rel));
    if (code == 0) {
      d.retry_after = item.kind == ItemKind::kNever
                          ? Decision::kNever
                          : Nanos(rel + item.increment - limit.tolerance_ns());
    }
  }
  return d;
}

bool ValidScriptTriple(const ScriptItem& item, int64_t head, int64_t rel_s, int64_t rel_ns) {
  if (head < 0 || (head & 7) > 3 || (head >> 3) >= (int64_t{1} << 41) || rel_s < 0 ||
      rel_s > kMaxReplySeconds || rel_ns < 0 || rel_ns >= 1'000'000'000) {
    return false;
  }
  const int64_t code = head & 7;
  const int64_t rel = rel_s * 1'000'000'000 + rel_ns;
  switch (item.kind) {
    case ItemKind::kPeek:
    case ItemKind::kWindowIndex:
      return code == 1 || code == 3;
    case ItemKind::kNever:
      return code == 0;
    case ItemKind::kGcra:
      return code != 0 || rel > item.threshold - item.increment;
    case ItemKind::kShaper:
      return code == 0 ? rel > item.threshold : code != 1 || rel >= item.increment;
    case ItemKind::kFixedWindow:
    case ItemKind::kSlidingWindow:
      return true;
  }
  return false;
}

bool IsScriptSha(std::string_view sha) {
  if (sha.size() != 40) return false;
  for (char c : sha) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void AppendMsgpackArrayHeader(std::string& out, size_t n) {
  out += static_cast<char>(0xdd);  // array 32
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
}

void AppendMsgpackInt(std::string& out, int64_t v) {
  if (v >= 0 && v < 128) {
    out += static_cast<char>(v);  // positive fixint
    return;
  }
  const uint64_t u = static_cast<uint64_t>(v);
  int bytes = 8;
  if (v >= 0 && v <= 0xffffffffLL) {
    out += static_cast<char>(0xce);  // uint 32
    bytes = 4;
  } else {
    out += static_cast<char>(v < 0 ? 0xd3 : 0xcf);  // int 64 / uint 64
  }
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
    out += static_cast<char>((u >> shift) & 0xff);
  }
}

bool ParseMsgpackInts(std::string_view in, std::vector<int64_t>* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const unsigned char* end = p + in.size();
  auto take = [&](int bytes, uint64_t* v) {
    if (end - p < bytes) return false;
    *v = 0;
    for (int i = 0; i < bytes; ++i) *v = (*v << 8) | *p++;
    return true;
  };
  if (p == end) return false;
  uint64_t n = 0;
  const unsigned char head = *p++;
  if ((head & 0xf0) == 0x90) {
    n = head & 0x0f;
  } else if (head == 0xdc) {
    if (!take(2, &n)) return false;
  } else if (head == 0xdd) {
    if (!take(4, &n)) return false;
  } else {
    return false;
  }
  if (n > in.size()) return false;
  out->clear();
  out->reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (p == end) return false;
    const unsigned char t = *p++;
    uint64_t v = 0;
    if (t < 0x80) {
      v = t;
    } else if (t >= 0xe0) {
      v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(t)));
    } else if (t == 0xcc || t == 0xcd || t == 0xce || t == 0xcf) {
      if (!take(1 << (t - 0xcc), &v)) return false;
    } else if (t >= 0xd0 && t <= 0xd3) {
      const int bytes = 1 << (t - 0xd0);
      if (!take(bytes, &v)) return false;
      if (bytes < 8 && (v >> (8 * bytes - 1)) != 0) v |= ~uint64_t{0} << (8 * bytes);  // sign
    } else {
      return false;  // not an integer (the script returns only integers)
    }
    out->push_back(static_cast<int64_t>(v));
  }
  return p == end;
}

}  // namespace tollgate::redis
