/**
 * The Lua scripts behind ReplayBuffer (replay-buffer.ts explains the keys). Every script that
 * can free or fill an in-flight slot of an agent runs the same `fill` function, so the
 * concurrency cap (R-D7) and the lane choice (R-D9, lanes.ts) are decided inside
 * Redis, atomically, whichever dispatcher instance runs the script.
 *
 * Shared layout of those scripts:
 *   KEYS[1] seq counter   KEYS[2] in-flight buffer   KEYS[3] ack deadlines (global)
 *   KEYS[4..6] waiting lanes HIGH, NORMAL, LOW   KEYS[7] lane credits   KEYS[8] wait deadlines (global)
 *   ARGV[1] max_concurrency (0 = no cap)   ARGV[2..4] lane weights   ARGV[5] now (epoch ms)
 *   ARGV[6] buffer TTL s   ARGV[7] counter TTL s   ARGV[8] agent id
 * Script-specific keys and arguments follow; the promoting ones also name ENDED_MESSAGES (the
 * messages marked ended: `fill` drops their waiting entries instead of promoting them), KEYS[10]
 * in APPEND_MANY, KEYS[12] in TAKE, KEYS[9] in TAKE_EXPIRED and FILL.
 *
 * A waiting entry (member of a lane, score = arrival order) is
 *     "<window_ms> <budget_at|0> <queued_at> <attempt>\n<head>\n<message part>"
 * where the message part is the end of the deliver frame (`,"message":{…}}`, see entry.ts).
 * Promotion turns it into a buffer entry like any other: next seq, ack deadline = now + window
 * (never past the budget), registered with the entry. Promotions are returned flat, five values
 * each: seq, entry, lane (1..3), queued_at, deadline.
 */

import { MIN_SEND_BUDGET_MS } from './deadline-holds.js';

const FILL_FUNCTIONS = `
local LANE_NAMES = {'HIGH', 'NORMAL', 'LOW'}
local CREDIT_FIELDS = {'H', 'N', 'L'}
local MAX_PROMOTIONS = 1000
local MAX_PASSED = 1000
local SCAN_BATCH = 32
local TOO_LATE_MS = ${MIN_SEND_BUDGET_MS}

-- epoch ms -> RFC 3339 UTC with milliseconds (what Date.prototype.toISOString gives)
local function iso(ms)
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local rem = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(rem / 3600), math.floor((rem % 3600) / 60), rem % 60, ms - s * 1000)
end

-- A head's ctx_ttl_s (entry.ts entryHead: a top-level integer written before \`message\`, so the
-- first match is it), read without decoding the whole head; 0 when absent.
local function ctxTtl(head)
  return tonumber(string.match(head, '"ctx_ttl_s":(%d+)')) or 0
end

local function flow()
  return {
    limit = tonumber(ARGV[1]),
    w = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])},
    now = tonumber(ARGV[5]),
    bufTtl = ARGV[6],
    seqTtl = ARGV[7],
    agent = ARGV[8],
  }
end

-- A lane ran empty: its credit goes to the busy lanes in proportion to their weights, and it
-- restarts at 0 (lanes.ts laneEmptied: the same operations in the same order).
local function emptied(credit, w, sizes, lane)
  local left = credit[lane]
  credit[lane] = 0
  local busy = 0
  for i = 1, 3 do
    if i ~= lane and sizes[i] > 0 then busy = busy + w[i] end
  end
  if busy == 0 then
    credit[1], credit[2], credit[3] = 0, 0, 0
    return
  end
  for i = 1, 3 do
    if i ~= lane and sizes[i] > 0 then credit[i] = credit[i] + (left * w[i]) / busy end
  end
end

local function waitMember(f, lane, order)
  return f.agent .. '|' .. LANE_NAMES[lane] .. '|' .. order
end

-- A waiting entry with less than MIN_SEND_BUDGET_MS of its budget left: it could not be
-- answered in time. Its first line holds budget_at but not created_at, so the margin is the
-- whole second even for a budget under 4 s (tooLateToSend in deadline-holds.ts takes a quarter
-- of those; the Promoter checks that rule again before it sends).
local function tooLate(f, member)
  local budget = tonumber(string.match(member, '^%d+ (%d+) '))
  return budget ~= nil and budget > 0 and budget - TOO_LATE_MS <= f.now
end

-- The first entry of a lane from position \`from\` that can still be sent (member, order), and
-- how many too-late ones it passed over (at most MAX_PASSED). The head alone first (the common
-- case: it can be sent, and members carry whole messages); behind a late head, SCAN_BATCH at a
-- time. One ZRANGE per late entry made every freed slot of a backlogged agent cost up to a
-- thousand calls (\`pnpm chaos\` at 500 msg/s: 4.8 million ZRANGEs, 228 µs per script).
local function firstSendable(f, lane, from)
  local head = redis.call('ZRANGE', KEYS[3 + lane], from, from, 'WITHSCORES')
  if #head == 0 then return nil, nil, 0 end
  if not tooLate(f, head[1]) then return head[1], head[2], 0 end
  local passed = 1
  while passed < MAX_PASSED do
    local r = redis.call('ZRANGE', KEYS[3 + lane], from + passed, from + passed + SCAN_BATCH - 1, 'WITHSCORES')
    if #r == 0 then return nil, nil, passed end
    for i = 1, #r, 2 do
      if not tooLate(f, r[i]) then return r[i], r[i + 1], passed end
      passed = passed + 1
      if passed >= MAX_PASSED then return nil, nil, passed end
    end
  end
  return nil, nil, passed
end

-- The message id of a waiting entry (its head opens with {"mid":"…", entry.ts midPrefix).
local function waitingMid(member)
  return string.match(member, '\\n{"mid":"([^"]*)",')
end

-- Promotes waiting entries while the agent has a free slot: the lane by smooth weighted round
-- robin over the non-empty lanes (lanes.ts), FIFO within it. An entry whose message is marked
-- ended (\`ended\`, ENDED_MESSAGES: canceled by its sender with A2A CancelTask, or declared DEAD
-- by the stuck sweep) leaves its lane without a slot: its end is recorded already, and the
-- agent must never get it (a canceled task that waited behind max_concurrency was handed to
-- the agent when a slot freed, and only its answer was refused). An entry too late to be sent is
-- passed over and stays in its lane, where the wait-deadline sweep ends it at its budget
-- (2002 → DEAD 3005). Promoted, it held a slot until its ack deadline with nothing sent, and
-- after a broker restart a backlog of them starved agents for good: each freed slot went to the
-- next late entry, the live ones behind waited until they were late too (\`pnpm chaos --long\`:
-- 8 of 9 SDK agents acked nothing for the ten minutes after a broker kill).
local function fill(f, ended)
  local out = {}
  if redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6]) == 0 then return out end -- the common case: nothing waits
  local avail = {redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]), redis.call('ZCARD', KEYS[6])}
  local inflight = redis.call('ZCARD', KEYS[2])
  if f.limit > 0 and inflight >= f.limit then return out end
  local raw = redis.call('HMGET', KEYS[7], 'H', 'N', 'L')
  local credit = {tonumber(raw[1]) or 0, tonumber(raw[2]) or 0, tonumber(raw[3]) or 0}
  -- Too-late entries passed over at the head of each lane in this call.
  local skipped = {0, 0, 0}
  local n = 0
  while (f.limit <= 0 or inflight < f.limit) and n < MAX_PROMOTIONS do
    local total, best = 0, 0
    for i = 1, 3 do
      if avail[i] > 0 then
        credit[i] = credit[i] + f.w[i]
        total = total + f.w[i]
        if best == 0 or credit[i] > credit[best] then best = i end
      end
    end
    if best == 0 then break end
    credit[best] = credit[best] - total
    local member, order, passed = firstSendable(f, best, skipped[best])
    skipped[best] = skipped[best] + passed
    avail[best] = avail[best] - passed
    if member == nil then
      -- Nothing in this lane can be sent any more: for this call it is empty.
      avail[best] = 0
      emptied(credit, f.w, avail, best)
    else
      redis.call('ZREM', KEYS[3 + best], member)
      avail[best] = avail[best] - 1
      if avail[best] == 0 then emptied(credit, f.w, avail, best) end
      redis.call('ZREM', KEYS[8], waitMember(f, best, order))
      local window, budget, queuedAt, attempt, at = string.match(member, '^(%d+) (%d+) (%d+) (%d+)\\n()')
      local mid = waitingMid(member)
      if window and mid and redis.call('ZSCORE', ended, mid) then
        window = nil -- ended while it waited: dropped, the slot stays free
      end
      if window then
        local nl = string.find(member, '\\n', at, true)
        local deadline = f.now + tonumber(window)
        budget = tonumber(budget)
        if budget > 0 and budget < deadline then deadline = budget end
        local seq = redis.call('INCR', KEYS[1])
        local entry = string.sub(member, at, nl - 1) .. '\\n{"type":"deliver","seq":' .. seq .. ',"attempt":' .. attempt ..
          ',"deadline":"' .. iso(deadline) .. '"' .. string.sub(member, nl + 1)
        redis.call('ZADD', KEYS[2], seq, entry)
        redis.call('ZADD', KEYS[3], deadline, f.agent .. '|' .. seq)
        inflight = inflight + 1
        out[#out + 1] = seq
        out[#out + 1] = entry
        out[#out + 1] = best
        out[#out + 1] = tonumber(queuedAt)
        out[#out + 1] = deadline
      end
    end
    n = n + 1
  end
  if n > 0 then
    redis.call('HSET', KEYS[7], 'H', credit[1], 'N', credit[2], 'L', credit[3])
    redis.call('EXPIRE', KEYS[7], f.seqTtl)
    redis.call('EXPIRE', KEYS[1], f.seqTtl)
    redis.call('EXPIRE', KEYS[2], f.bufTtl)
  end
  return out
end
`;

/**
 * Routed deliveries of one agent, in their order: each straight into the in-flight buffer when
 * the agent has a free slot and nothing waits before it (its reply {seq}); else into its lane
 * ({0, order, promotions…} — a raised max_concurrency may promote at once, this entry or others).
 * Returns one reply per delivery.
 *
 * One call per agent and fetch, not per delivery: what every delivery of the call shares is read
 * and written once — the ended check (ZMSCORE), the repeat markers (MGET), the slot count and
 * the lanes (ZCARD, EXISTS), one ZADD into the buffer and one into the deadlines, the TTLs. A
 * delivery that goes out at once costs its marker's SET on top; its seq is counted in the script
 * and stored once per call (issue 27: 10 commands and a script call per delivery before, 22
 * Redis commands per message in all).
 *
 * Each delivery (agent, message id, attempt) is appended once. The consumer is at-least-once:
 * a batch whose offsets were not committed yet — its outputs failed and kafkajs retries it, a
 * rebalance moved the partition, an instance stopped or crashed — is consumed again, and a
 * second append would queue (or send) the delivery twice: a second seq taking a slot of the
 * cap, a second place in a lane shifting the lane order. So the first append leaves a marker
 * (its marker key: 's<seq>' or 'w<lane>:<order>', for ARGV[9] s) and a repeat changes nothing: its
 * reply is {-1, seq, entry} while the delivery is still in flight (the caller sends the stored
 * entry again and repeats its DELIVERING: the first pass may have failed before doing so),
 * {-2, order} while it still waits, {-3} once it has moved on (answered, failed, promoted by
 * whoever freed its slot, or given up). A message marked ended (KEYS[10], ENDED_MESSAGES:
 * declared DEAD by the stuck sweep, or canceled by its sender with A2A CancelTask) is not
 * appended at all: {-3}, as if it had moved on.
 *   KEYS[9] arrival-order counter  KEYS[10] ended messages  KEYS[10 + i] delivery i's marker
 *   ARGV[9] marker TTL s; delivery i's ten arguments from b = 9 + 10 (i - 1):
 *   b+1 head  b+2 attempt  b+3 ack deadline as JSON string  b+4 message part  b+5 ack deadline
 *   ms ('' = none)  b+6 ack window ms  b+7 budget end ms (0 = none)  b+8 lane 1..3  b+9 wait
 *   deadline ms  b+10 message id
 */
const APPEND_FIELDS = 10;
export const APPEND_MANY =
  FILL_FUNCTIONS +
  `
local f = flow()
local n = #KEYS - 10
local ttl = ARGV[9]
local ids = {}
for i = 1, n do ids[i] = ARGV[9 + (i - 1) * ${APPEND_FIELDS} + 10] end
local ended = redis.call('ZMSCORE', KEYS[10], unpack(ids))
local marks = redis.call('MGET', unpack(KEYS, 11, 10 + n))
local out = {}
local inflight, lanesBusy = nil, nil
local bufAdds, dlAdds = {}, {}
local seqUsed, orderUsed = false, false
local setHere = {}
-- The seqs given here are counted locally from one GET and written back with one SET (and its
-- TTL), not an INCR each: before fill(), which counts on from the stored value, and at the end.
local lastSeq = nil
local function nextSeq()
  if lastSeq == nil then lastSeq = tonumber(redis.call('GET', KEYS[1]) or '0') end
  lastSeq = lastSeq + 1
  return lastSeq
end
-- Appends are gathered into one ZADD each; written before anything reads the buffer again.
local function flush()
  if #bufAdds > 0 then redis.call('ZADD', KEYS[2], unpack(bufAdds)) bufAdds = {} end
  if #dlAdds > 0 then redis.call('ZADD', KEYS[3], unpack(dlAdds)) dlAdds = {} end
  if lastSeq ~= nil then redis.call('SET', KEYS[1], lastSeq, 'EX', f.seqTtl) lastSeq = nil end
end
for i = 1, n do
  local b = 9 + (i - 1) * ${APPEND_FIELDS}
  local marker = KEYS[10 + i]
  -- the same delivery twice in one call: the second is a repeat of the first
  local seen = setHere[marker] or marks[i]
  if ended[i] then
    out[i] = {-3}
  elseif seen then
    flush()
    local wlane, worder = string.match(seen, '^w(%d):(%d+)$')
    local sseq = string.match(seen, '^s(%d+)$')
    if wlane then
      out[i] = #redis.call('ZRANGEBYSCORE', KEYS[3 + tonumber(wlane)], worder, worder) > 0 and {-2, tonumber(worder)} or {-3}
    else
      local m = sseq and redis.call('ZRANGEBYSCORE', KEYS[2], sseq, sseq) or {}
      out[i] = #m > 0 and {-1, tonumber(sseq), m[1]} or {-3}
    end
  else
    if inflight == nil then inflight = redis.call('ZCARD', KEYS[2]) + #bufAdds / 2 end
    if lanesBusy == nil then lanesBusy = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6]) > 0 end
    if (f.limit <= 0 or inflight < f.limit) and not lanesBusy then
      local seq = nextSeq()
      seqUsed = true
      bufAdds[#bufAdds + 1] = seq
      bufAdds[#bufAdds + 1] = ARGV[b + 1] .. '\\n{"type":"deliver","seq":' .. seq .. ',"attempt":' .. ARGV[b + 2] .. ',"deadline":' .. ARGV[b + 3] .. ARGV[b + 4]
      if ARGV[b + 5] ~= '' then
        dlAdds[#dlAdds + 1] = ARGV[b + 5]
        dlAdds[#dlAdds + 1] = f.agent .. '|' .. seq
      end
      inflight = inflight + 1
      seen = 's' .. seq
      out[i] = {seq}
    else
      flush()
      local lane = tonumber(ARGV[b + 8])
      local order = redis.call('INCR', KEYS[9])
      orderUsed = true
      redis.call('ZADD', KEYS[3 + lane], order, ARGV[b + 6] .. ' ' .. ARGV[b + 7] .. ' ' .. f.now .. ' ' .. ARGV[b + 2] .. '\\n' .. ARGV[b + 1] .. '\\n' .. ARGV[b + 4])
      redis.call('ZADD', KEYS[8], ARGV[b + 9], waitMember(f, lane, order))
      seen = 'w' .. lane .. ':' .. order
      local r = {0, order}
      for _, v in ipairs(fill(f, KEYS[10])) do r[#r + 1] = v end
      out[i] = r
      inflight, lanesBusy = nil, nil -- fill may have promoted: read again
    end
    redis.call('SET', marker, seen, 'EX', ttl)
    setHere[marker] = seen
  end
end
flush()
if seqUsed then redis.call('EXPIRE', KEYS[2], f.bufTtl) end
if orderUsed then redis.call('EXPIRE', KEYS[9], f.seqTtl) end
return out`;

/**
 * An ack or reject: removes the entry with this seq if it is the named message and, having freed
 * a slot, promotes. Returns {status, value, promotions…}: status 1 = taken (value = the head, or
 * the whole entry with ARGV[13] = '1'), 0 = gone (failed past its deadline, or never here), 2 = the seq holds
 * another message. With ARGV[11] = '1' the head is kept as the message's result context
 * (KEYS[9]) for its ctx_ttl_s. The delivery's ack deadline (member ARGV[12]) goes too.
 * An ack (ARGV[14] = its time, epoch ms; '' otherwise) is journaled in the same step:
 * `<agent>|<seq>|<acked at>|<head>` under the message id in KEYS[10] and the id in KEYS[11] scored by the ack time, until its
 * DELIVERED event is produced (ack-journal.ts) — an ack taken here is never lost to a Kafka
 * outage or a crash before the produce. Status 3 = the stuck sweep declared the message DEAD
 * (KEYS[12], ENDED_MESSAGES): the entry and its deadline go, nothing is journaled.
 *
 * KEYS[9] also tells later frames about the same delivery that its outcome is counted
 * (answer-outcome.ts): it holds the head while a result may follow, else the answered marker
 * ARGV[16] for ARGV[17] seconds — set by a take that keeps no context (a reject, a message
 * nobody answers), by the DEAD case, and by a miss that finds nothing (a late answer, counted
 * once). A miss that finds KEYS[9] returns status 4 = answered before (a repeat, not late).
 *   ARGV[9] seq  ARGV[10] message id prefix  ARGV[15] message id
 */
export const TAKE =
  FILL_FUNCTIONS +
  `
local m = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[9], ARGV[9])
if #m == 0 then
  if redis.call('EXISTS', KEYS[9]) == 1 then return {4, ''} end
  redis.call('SET', KEYS[9], ARGV[16], 'EX', ARGV[17])
  return {0, ''}
end
local e = m[1]
if string.sub(e, 1, #ARGV[10]) ~= ARGV[10] then return {2, ''} end
redis.call('ZREM', KEYS[2], e)
if redis.call('ZSCORE', KEYS[12], ARGV[15]) then
  redis.call('ZREM', KEYS[3], ARGV[12])
  redis.call('SET', KEYS[9], ARGV[16], 'EX', ARGV[17])
  local ended = {3, ''}
  for _, v in ipairs(fill(flow(), KEYS[12])) do ended[#ended + 1] = v end
  return ended
end
local nl = string.find(e, '\\n', 1, true)
local head = string.sub(e, 1, nl - 1)
local kept = false
if ARGV[11] == '1' then
  local ttl = ctxTtl(head)
  if ttl and ttl > 0 then
    redis.call('SET', KEYS[9], head, 'EX', math.floor(ttl))
    kept = true
  end
end
if not kept then redis.call('SET', KEYS[9], ARGV[16], 'EX', ARGV[17]) end
redis.call('ZREM', KEYS[3], ARGV[12])
if ARGV[14] ~= '' then
  redis.call('HSET', KEYS[10], ARGV[15], ARGV[8] .. '|' .. ARGV[9] .. '|' .. ARGV[14] .. '|' .. head)
  redis.call('ZADD', KEYS[11], ARGV[14], ARGV[15])
end
local out = {1, head}
if ARGV[13] == '1' then out[2] = e end
for _, v in ipairs(fill(flow(), KEYS[12])) do out[#out + 1] = v end
return out`;

/**
 * The acks (and results taken as acks) of one agent gathered in one call: TAKE with a context
 * kept and the ack journaled, for each in order, with what every ack of the call shares done
 * once — the ended check (ZMSCORE), the deadlines' ZREM, the journal's HSET and ZADD, and one
 * `fill` for all the slots freed. Returns one {status, head} per ack (TAKE's statuses: 1 taken,
 * 0 gone, 2 another message, 3 ended, 4 answered before), then the promotions as a last element.
 *   KEYS[9] ack journal (hash)  KEYS[10] ack journal by time  KEYS[11] ended messages
 *   KEYS[11 + i] ack i's result context
 *   ARGV[9] answered marker  ARGV[10] its TTL s; ack i's four arguments from b = 10 + 4 (i - 1):
 *   b+1 seq  b+2 message id prefix  b+3 message id  b+4 acked at (epoch ms)
 */
const ACK_FIELDS = 4;
export const TAKE_ACKS =
  FILL_FUNCTIONS +
  `
local f = flow()
local n = #KEYS - 11
local ids = {}
for i = 1, n do ids[i] = ARGV[10 + (i - 1) * ${ACK_FIELDS} + 3] end
local ended = redis.call('ZMSCORE', KEYS[11], unpack(ids))
local out = {}
local deadlines, journal, byTime, taken = {}, {}, {}, {}
local freed = false
-- The acked entries: with seqs close together (acks come back roughly in order) one range read
-- finds them all; else one read per seq. Each is removed at most once (a repeat in the call
-- finds nothing), all with one ZREM before fill().
local lo, hi = math.huge, -math.huge
for i = 1, n do
  local s = tonumber(ARGV[10 + (i - 1) * ${ACK_FIELDS} + 1])
  if s < lo then lo = s end
  if s > hi then hi = s end
end
local bySeq = nil
if n > 1 and hi - lo < 4 * n then
  bySeq = {}
  local r = redis.call('ZRANGEBYSCORE', KEYS[2], lo, hi, 'WITHSCORES')
  for j = 1, #r, 2 do bySeq[tonumber(r[j + 1])] = r[j] end
end
local function entryAt(seq)
  if taken[seq] then return nil end
  if bySeq then return bySeq[tonumber(seq)] end
  return redis.call('ZRANGEBYSCORE', KEYS[2], seq, seq)[1]
end
local removed = {}
for i = 1, n do
  local b = 10 + (i - 1) * ${ACK_FIELDS}
  local seq, res = ARGV[b + 1], KEYS[11 + i]
  local e = entryAt(seq)
  if e == nil then
    if redis.call('EXISTS', res) == 1 then
      out[i] = {4, ''}
    else
      redis.call('SET', res, ARGV[9], 'EX', ARGV[10])
      out[i] = {0, ''}
    end
  elseif string.sub(e, 1, #ARGV[b + 2]) ~= ARGV[b + 2] then
    out[i] = {2, ''}
  else
    taken[seq] = true
    removed[#removed + 1] = e
    freed = true
    deadlines[#deadlines + 1] = f.agent .. '|' .. seq
    if ended[i] then
      redis.call('SET', res, ARGV[9], 'EX', ARGV[10])
      out[i] = {3, ''}
    else
      local head = string.sub(e, 1, string.find(e, '\\n', 1, true) - 1)
      local ttl = ctxTtl(head)
      if ttl and ttl > 0 then
        redis.call('SET', res, head, 'EX', math.floor(ttl))
      else
        redis.call('SET', res, ARGV[9], 'EX', ARGV[10])
      end
      journal[#journal + 1] = ARGV[b + 3]
      journal[#journal + 1] = f.agent .. '|' .. seq .. '|' .. ARGV[b + 4] .. '|' .. head
      byTime[#byTime + 1] = ARGV[b + 4]
      byTime[#byTime + 1] = ARGV[b + 3]
      out[i] = {1, head}
    end
  end
end
if #removed > 0 then redis.call('ZREM', KEYS[2], unpack(removed)) end
if #deadlines > 0 then redis.call('ZREM', KEYS[3], unpack(deadlines)) end
if #journal > 0 then
  redis.call('HSET', KEYS[9], unpack(journal))
  redis.call('ZADD', KEYS[10], unpack(byTime))
end
out[n + 1] = freed and fill(f, KEYS[11]) or {}
return out`;

/**
 * The deadline sweeper's take: removes the entry with this seq whatever message it holds and
 * promotes into the freed slot. Returns {entry or '', promotions…} ('' = answered meanwhile).
 *   ARGV[9] seq
 */
export const TAKE_EXPIRED =
  FILL_FUNCTIONS +
  `
local m = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[9], ARGV[9])
if #m == 0 then return {''} end
redis.call('ZREM', KEYS[2], m[1])
local out = {m[1]}
for _, v in ipairs(fill(flow(), KEYS[9])) do out[#out + 1] = v end
return out`;

/** Promotes into whatever slots are free (e.g. after max_concurrency was raised). */
export const FILL = FILL_FUNCTIONS + `return fill(flow(), KEYS[9])`;

/**
 * A waiting entry whose wait deadline passed: removes it from its lane and returns it; nil when
 * it was promoted meanwhile. A lane that runs empty hands on its credit, as when it empties by
 * promotion.
 *   ARGV[9] lane 1..3  ARGV[10] arrival order
 */
export const TAKE_WAITING =
  FILL_FUNCTIONS +
  `
local f = flow()
local lane = tonumber(ARGV[9])
local key = KEYS[3 + lane]
local m = redis.call('ZRANGEBYSCORE', key, ARGV[10], ARGV[10])
if #m == 0 then return false end
redis.call('ZREM', key, m[1])
if redis.call('EXISTS', key) == 0 and redis.call('EXISTS', KEYS[7]) == 1 then
  local raw = redis.call('HMGET', KEYS[7], 'H', 'N', 'L')
  local credit = {tonumber(raw[1]) or 0, tonumber(raw[2]) or 0, tonumber(raw[3]) or 0}
  emptied(credit, f.w, {redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]), redis.call('ZCARD', KEYS[6])}, lane)
  redis.call('HSET', KEYS[7], 'H', credit[1], 'N', credit[2], 'L', credit[3])
end
return m[1]`;

/**
 * An agent's socket died and it did not come back within the reconnect grace: every buffered
 * delivery's ack deadline moves to now (`LT`: never later than it was; `XX`: only deliveries
 * still waiting for their ack), and the agent is marked lost until it connects again.
 *   KEYS[1] in-flight buffer   KEYS[2] ack deadlines (global)   KEYS[3] lost marker
 *   ARGV[1] agent   ARGV[2] now (epoch ms)   ARGV[3] marker lifetime (ms)   ARGV[4] marker (lostMark)
 * Returns how many deadlines were pulled forward.
 */
export const FAIL_OVER = `
local seqs = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local moved = 0
for i = 2, #seqs, 2 do
  moved = moved + redis.call('ZADD', KEYS[2], 'XX', 'LT', 'CH', ARGV[2], ARGV[1] .. '|' .. seqs[i])
end
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[3])
return moved`;
