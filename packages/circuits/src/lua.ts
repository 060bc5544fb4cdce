/**
 * The Redis side of the breaker: each script reads and writes one agent's circuit atomically
 * (Redis runs a script to completion before any other command), so concurrent outcomes from
 * every dispatcher instance and probe claims from every router instance see one consistent
 * state. The rules are those of `policy.ts`, line for line; the conformance test replays the
 * same outcome sequences through both.
 *
 * Keys: `reach:circuit:{agent}` (hash: state, reason, opened_at, open_until, probe_by,
 * probe_until, probe_ok), `reach:circuit:{agent}:win` (hash of bucket counters) and the set
 * `reach:circuits` (sorted set of non-CLOSED agents, score = open_until) that routers scan.
 * The per-agent keys share a hash tag; the global set does not, so on Redis Cluster the
 * record script would need the set moved into the tag (single-node and replicated Redis, the
 * deployed shapes, are fine).
 */

/** Shared helpers: number formatting without exponent, and opening a circuit. */
const PRELUDE = `
local function fmt(n) return string.format('%.0f', n) end
`;

/**
 * KEYS: state, counters, open set. ARGV: agent, ok (1|0), now, errorRate, windowMs, minVolume,
 * openMs, ejectSuccessRate, ejectWindowMs, ejectMinVolume, ejectProbes, shortSize, longSize,
 * count (outcomes of this kind at once; absent = 1; HALF_OPEN counts them as one probe).
 * Returns {state, from-or-empty, reason-or-empty}.
 */
export const RECORD_OUTCOME = `${PRELUDE}
local agent = ARGV[1]
local ok = ARGV[2] == '1'
local now = tonumber(ARGV[3])
local errorRate = tonumber(ARGV[4])
local windowMs = tonumber(ARGV[5])
local minVolume = tonumber(ARGV[6])
local openMs = tonumber(ARGV[7])
local ejectRate = tonumber(ARGV[8])
local ejectWindowMs = tonumber(ARGV[9])
local ejectMinVolume = tonumber(ARGV[10])
local ejectProbes = tonumber(ARGV[11])
local shortSize = tonumber(ARGV[12])
local longSize = tonumber(ARGV[13])
local count = tonumber(ARGV[14]) or 1
local keepMs = math.max(windowMs, ejectWindowMs) + longSize

local st = redis.call('HMGET', KEYS[1], 'state', 'reason', 'open_until', 'probe_ok')
local state = st[1] or 'CLOSED'
local reason = st[2] or ''
local openUntil = tonumber(st[3])
local eff = state
if state == 'OPEN' and openUntil and now >= openUntil then eff = 'HALF_OPEN' end

local function open(r)
  redis.call('HSET', KEYS[1], 'state', 'OPEN', 'reason', r, 'opened_at', fmt(now), 'open_until', fmt(now + openMs), 'probe_ok', '0')
  redis.call('HDEL', KEYS[1], 'probe_by', 'probe_until')
  redis.call('PEXPIRE', KEYS[1], openMs + 86400000)
  redis.call('ZADD', KEYS[3], now + openMs, agent)
end

if eff == 'OPEN' then return {'OPEN', '', reason} end

if eff == 'HALF_OPEN' then
  if not ok then
    if reason == '' then reason = 'failure_rate' end
    open(reason)
    return {'OPEN', 'HALF_OPEN', reason}
  end
  local needed = 1
  if reason == 'eject' then needed = ejectProbes end
  local probeOk = (tonumber(st[4]) or 0) + 1
  if probeOk >= needed then
    redis.call('DEL', KEYS[1], KEYS[2])
    redis.call('ZREM', KEYS[3], agent)
    return {'CLOSED', 'HALF_OPEN', ''}
  end
  redis.call('HSET', KEYS[1], 'state', 'HALF_OPEN', 'probe_ok', tostring(probeOk))
  redis.call('HDEL', KEYS[1], 'probe_by', 'probe_until')
  return {'HALF_OPEN', '', reason}
end

-- CLOSED: count the outcome in both windows, drop buckets that left them, evaluate.
local sCur = math.floor(now / shortSize)
local lCur = math.floor(now / longSize)
local sSpan = math.ceil(windowMs / shortSize)
local lSpan = math.ceil(ejectWindowMs / longSize)
local kind = 'ko'
if ok then kind = 'ok' end
redis.call('HINCRBY', KEYS[2], 's:' .. fmt(sCur) .. ':' .. kind, count)
redis.call('HINCRBY', KEYS[2], 'l:' .. fmt(lCur) .. ':' .. kind, count)
redis.call('PEXPIRE', KEYS[2], keepMs)
local all = redis.call('HGETALL', KEYS[2])
local sOk, sKo, lOk, lKo = 0, 0, 0, 0
for i = 1, #all, 2 do
  local field = all[i]
  local n = tonumber(all[i + 1])
  local p, idx, k = string.match(field, '^(%a):(%-?%d+):(%a+)$')
  idx = tonumber(idx)
  if p == 's' then
    if idx <= sCur - sSpan then redis.call('HDEL', KEYS[2], field)
    elseif idx <= sCur then
      if k == 'ok' then sOk = sOk + n else sKo = sKo + n end
    end
  elseif p == 'l' then
    if idx <= lCur - lSpan then redis.call('HDEL', KEYS[2], field)
    elseif idx <= lCur then
      if k == 'ok' then lOk = lOk + n else lKo = lKo + n end
    end
  end
end
local sTotal = sOk + sKo
if sTotal >= minVolume and sKo / sTotal > errorRate then
  open('failure_rate')
  return {'OPEN', 'CLOSED', 'failure_rate'}
end
local lTotal = lOk + lKo
if lTotal >= ejectMinVolume and lOk / lTotal < ejectRate then
  open('eject')
  return {'OPEN', 'CLOSED', 'eject'}
end
return {'CLOSED', '', ''}
`;

/**
 * KEYS: state. ARGV: now, instance, probeTimeoutMs.
 * Returns CLAIMED | CLOSED | OPEN | BUSY (see `claimProbe` in policy.ts).
 */
export const CLAIM_PROBE = `${PRELUDE}
local now = tonumber(ARGV[1])
local st = redis.call('HMGET', KEYS[1], 'state', 'open_until', 'probe_by', 'probe_until')
local state = st[1] or 'CLOSED'
local openUntil = tonumber(st[2])
if state == 'OPEN' and openUntil and now >= openUntil then state = 'HALF_OPEN' end
if state ~= 'HALF_OPEN' then return state end
local probeUntil = tonumber(st[4])
if st[3] and probeUntil and probeUntil > now then return 'BUSY' end
redis.call('HSET', KEYS[1], 'state', 'HALF_OPEN', 'probe_by', ARGV[2], 'probe_until', fmt(now + tonumber(ARGV[3])))
return 'CLAIMED'
`;

/** KEYS: state. ARGV: instance. Frees the probe when this instance holds it; returns 1 if freed. */
export const RELEASE_PROBE = `
if redis.call('HGET', KEYS[1], 'probe_by') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'probe_by', 'probe_until')
  return 1
end
return 0
`;

/**
 * KEYS: open set. ARGV: key prefix, limit. Every non-CLOSED circuit as a flat list of
 * agent, state, reason, open_until, probe_by, probe_until; entries whose record is gone or
 * closed are removed from the set on the way (self-healing after a key expiry).
 */
export const SNAPSHOT = `
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local out = {}
for _, id in ipairs(ids) do
  local st = redis.call('HMGET', ARGV[1] .. '{' .. id .. '}', 'state', 'reason', 'open_until', 'probe_by', 'probe_until')
  if not st[1] or st[1] == 'CLOSED' then
    redis.call('ZREM', KEYS[1], id)
  else
    table.insert(out, id)
    table.insert(out, st[1])
    table.insert(out, st[2] or '')
    table.insert(out, st[3] or '')
    table.insert(out, st[4] or '')
    table.insert(out, st[5] or '')
  end
end
return out
`;
