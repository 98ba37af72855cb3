#include "redis/gcra_script.h"

#include <algorithm>

namespace tollgate::redis {
namespace {

// Times are pairs (s, n): s whole seconds, 0 <= n < 1e9 nanoseconds.
constexpr std::string_view kScript = R"lua(-- tollgate gcra batch v3
if redis.replicate_commands then pcall(redis.replicate_commands) end
local E9 = 1000000000
local tonumber, sub = tonumber, string.sub
local function split(v)
  local len = #v
  if len <= 9 then return 0, tonumber(v) end
  return tonumber(sub(v, 1, len - 9)), tonumber(sub(v, len - 8))
end
local now_s, now_n
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
-- Entries: kind, increment and threshold (both split), and now + threshold.
local nent = tonumber(ARGV[a])
a = a + 1
local ekind, eis, ein, els, eln = {}, {}, {}, {}, {}
for e = 1, nent do
  ekind[e] = tonumber(ARGV[a])
  eis[e], ein[e] = split(ARGV[a + 1])
  local hs, hn = split(ARGV[a + 2])
  local ls, ln = now_s + hs, now_n + hn
  if ln >= E9 then ls, ln = ls + 1, ln - E9 end
  els[e], eln[e] = ls, ln
  a = a + 3
end
local ts, tn = {}, {}
local vals
if nk > 0 then
  vals = {}  -- one GET per key: MGET may not span slots
  for i = 1, nk do vals[i] = redis.call('GET', keys[i]) end
else
  vals = redis.call('MGET', unpack(KEYS))
end
for i = 1, #keys do
  local v = vals[i]
  if v then ts[i], tn[i] = split(v) else ts[i], tn[i] = now_s, now_n end
end
-- One item against TAT (s, n): allowed?, tat_after (s, n).
local function step(s, n, e)
  if s < now_s or (s == now_s and n < now_n) then s, n = now_s, now_n end
  local kind = ekind[e]
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
local out, o = {}, 0
local dirty = {}
local function emit(code, s, n)
  local rs, rn = s - now_s, n - now_n
  if rn < 0 then rs, rn = rs - 1, rn + E9 end
  out[o + 1], out[o + 2], out[o + 3] = code, rs, rn
  o = o + 3
end
local nargs = #ARGV
while a <= nargs do
  local count = tonumber(ARGV[a])
  a = a + 1
  -- A negative count is a dry run: decide the group, write nothing.
  local dry = count < 0
  if dry then count = -count end
  if count == 1 then
    -- The common case, without tables: one item is its own all-or-nothing group.
    local key, e = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    a = a + 2
    local ok, s, n = step(ts[key], tn[key], e)
    if ok then
      if ekind[e] < 2 and not dry then
        ts[key], tn[key] = s, n
        dirty[key] = true
      end
      emit(1, s, n)
    else
      emit(0, s, n)
    end
  else
    local k, ent = {}, {}
    for j = 1, count do
      k[j], ent[j] = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
      a = a + 2
    end
    -- Phase 1: every item alone against the current state.
    local ok1, s1, n1 = {}, {}, {}
    local denied = false
    for j = 1, count do
      ok1[j], s1[j], n1[j] = step(ts[k[j]], tn[k[j]], ent[j])
      if not ok1[j] then denied = true end
    end
    local fail = 0
    local ws, wn, s2, n2 = {}, {}, {}, {}
    if not denied then
      -- Phase 2: the items together, in order, on a working copy.
      for j = 1, count do
        local key = k[j]
        local cs, cn = ws[key], wn[key]
        if cs == nil then cs, cn = ts[key], tn[key] end
        local ok, s, n = step(cs, cn, ent[j])
        if not ok then fail = j; break end
        s2[j], n2[j] = s, n
        if ekind[ent[j]] < 2 then ws[key], wn[key] = s, n end
      end
    end
    if denied or fail > 0 then
      -- Nothing is charged: each item reports its state alone (3: it would fit).
      for j = 1, count do
        local code = 0
        if j == fail then code = 2 elseif ok1[j] then code = 3 end
        emit(code, s1[j], n1[j])
      end
    else
      if not dry then
        for key, s in pairs(ws) do
          ts[key], tn[key] = s, wn[key]
          dirty[key] = true
        end
      end
      for j = 1, count do emit(1, s2[j], n2[j]) end
    end
  end
end
for key in pairs(dirty) do
  local s, n = ts[key], tn[key]
  local rs, rn = s - now_s, n - now_n
  if rn < 0 then rs, rn = rs - 1, rn + E9 end
  local ms = rs * 1000 + math.ceil(rn / 1000000) + ttl_slack
  if ms < 1 then ms = 1 end
  local v
  if s > 0 then v = string.format('%d%09d', s, n) else v = string.format('%d', n) end
  redis.call('SET', keys[key], v, 'PX', ms)  -- ms < 2^41: printed as an integer
end
return out
)lua";

}  // namespace

constexpr std::string_view kClusterScript = "#!lua flags=allow-cross-slot-keys\n";

std::string_view GcraScript() { return kScript; }

const std::string& GcraClusterScript() {
  static const std::string script = std::string(kClusterScript) + std::string(kScript);
  return script;
}

Status CheckScriptLimit(const Limit& limit) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      break;
    default:
      return InvalidArgument("algorithm " + std::string(AlgorithmName(limit.algorithm())) +
                             " is not supported by the redis store yet");
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

ScriptItem MakeScriptItem(const Limit& limit, int64_t cost) {
  const bool shaper = limit.algorithm() == Algorithm::kLeakyBucket && limit.max_delay_ns() > 0;
  ScriptItem item;
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

Decision DecodeDecision(const Limit& limit, const ScriptItem& item, int64_t code, int64_t rel) {
  const bool shaper = limit.algorithm() == Algorithm::kLeakyBucket && limit.max_delay_ns() > 0;
  Decision d;
  d.limit = limit.burst();
  d.allowed = code == 1 || code == 3;
  // 3: the item would fit, but its batch was denied and nothing was charged.
  // The script reports the state the item alone would leave; Store's contract
  // is the state without the charge.
  if (code == 3) rel -= item.increment;
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

}  // namespace tollgate::redis
