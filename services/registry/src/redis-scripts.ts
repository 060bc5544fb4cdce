/**
 * The registry's Redis mutations, each one Lua script so it is atomic (R-A3) and safe
 * with several registry instances sharing one Redis: nobody ever sees a record without its
 * index entries or an index entry without its record.
 *
 * Keys (prefix `reach:`):
 *   agent:<id>      hash: the agent record, one field per AgentRecord field (JSON for nested
 *                   ones) plus `index`, the JSON list of capability index names it is in
 *   cap:<name>      set of agent ids offering the capability <name> (and <base>@<major>)
 *   agents          set of every registered agent id
 *   agent-rev:<id>  the agent's revision counter (INCR); outlives a deregistration for a
 *                   while so a re-registered agent's revisions keep increasing
 *   lease:<id>      the lease, with the lease's TTL (PX)
 *   leases          sorted set: agent id → time (ms) its lease runs out; the sweeper claims
 *                   due entries with ZREM inside a script, so exactly one instance wins each
 *   offline         sorted set: OFFLINE agent id → time (ms) its record is purged
 *
 * The scripts build `cap:`, `agent:` and `agent-rev:` keys from the prefix themselves
 * (capability names are only known inside the script): fine on a single Redis or a
 * replicated one, not on Redis Cluster.
 */

/** Replaces an agent's record and capability index in one step. Returns {revision, existed (1/0)}. */
export const REGISTER_SCRIPT = `
-- KEYS: 1 agent hash, 2 agents set, 3 leases zset, 4 revision counter, 5 lease key, 6 offline zset
-- ARGV: 1 id, 2 must-not-exist (1/0), 3 index names (JSON), 4 lease deadline ms, 5 lease ttl ms,
--       6 lease id, 7 key prefix, 8.. field/value pairs of the record
local id = ARGV[1]
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('REACH_EXISTS')
end
local existed = redis.call('EXISTS', KEYS[1])
local old = redis.call('HGET', KEYS[1], 'index')
if old then
  for _, name in ipairs(cjson.decode(old)) do redis.call('SREM', ARGV[7] .. 'cap:' .. name, id) end
end
redis.call('DEL', KEYS[1])
local rev = redis.call('INCR', KEYS[4])
redis.call('PERSIST', KEYS[4])
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'revision', rev, 'index', ARGV[3], unpack(fields))
for _, name in ipairs(cjson.decode(ARGV[3])) do redis.call('SADD', ARGV[7] .. 'cap:' .. name, id) end
redis.call('SADD', KEYS[2], id)
redis.call('ZADD', KEYS[3], ARGV[4], id)
redis.call('ZREM', KEYS[6], id)
redis.call('SET', KEYS[5], ARGV[6], 'PX', ARGV[5])
return {rev, existed}
`;

/**
 * Renews the lease and records the load of a heartbeat. Refuses (REACH_STALE) when the agent
 * re-registered since the caller read it — its QoS was computed against the old record.
 * Returns nil for an unknown agent, else {revision, previous status}.
 */
export const HEARTBEAT_SCRIPT = `
-- KEYS: 1 agent hash, 2 leases zset, 3 revision counter, 4 lease key, 5 offline zset
-- ARGV: 1 id, 2 expected lease id, 3 lease deadline ms, 4 lease ttl ms, 5 status, 6 load JSON,
--       7 qos, 8 now ms
local lease = redis.call('HGET', KEYS[1], 'lease_id')
if not lease then return nil end
if lease ~= ARGV[2] then return redis.error_reply('REACH_STALE') end
local previous = redis.call('HGET', KEYS[1], 'status')
local rev = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'status', ARGV[5], 'load', ARGV[6], 'qos', ARGV[7],
  'lease_expires_at', ARGV[3], 'updated_at', ARGV[8], 'revision', rev)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('SET', KEYS[4], lease, 'PX', ARGV[4])
return {rev, previous}
`;

/** Removes an agent and its index entries at once. Returns 1, or 0 when it was not there. */
export const DEREGISTER_SCRIPT = `
-- KEYS: 1 agent hash, 2 agents set, 3 leases zset, 4 revision counter, 5 lease key, 6 offline zset
-- ARGV: 1 id, 2 key prefix, 3 seconds to keep the revision counter
local id = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local old = redis.call('HGET', KEYS[1], 'index')
if old then
  for _, name in ipairs(cjson.decode(old)) do redis.call('SREM', ARGV[2] .. 'cap:' .. name, id) end
end
redis.call('DEL', KEYS[1], KEYS[5])
redis.call('SREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[6], id)
redis.call('EXPIRE', KEYS[4], ARGV[3])
return 1
`;

/**
 * The sweeper's claim: every agent whose lease ran out is marked OFFLINE (and scheduled for
 * purging). ZREM inside the script is the claim, so with several instances each expiry is
 * handled once. Returns the ids that changed.
 */
export const EXPIRE_SCRIPT = `
-- KEYS: 1 leases zset, 2 offline zset
-- ARGV: 1 now ms, 2 limit, 3 purge at ms, 4 key prefix
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local changed = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[4] .. 'agent:' .. id
  local status = redis.call('HGET', key, 'status')
  if status and status ~= 'OFFLINE' then
    local rev = redis.call('INCR', ARGV[4] .. 'agent-rev:' .. id)
    redis.call('HSET', key, 'status', 'OFFLINE', 'updated_at', ARGV[1], 'revision', rev)
    redis.call('ZADD', KEYS[2], ARGV[3], id)
    changed[#changed + 1] = id
  end
end
return changed
`;

/**
 * Purges agents that stayed OFFLINE past the retention: record and index entries go, the
 * change feed gets a tombstone. An agent that came back meanwhile is left alone.
 */
export const PURGE_SCRIPT = `
-- KEYS: 1 offline zset, 2 agents set, 3 leases zset
-- ARGV: 1 now ms, 2 limit, 3 key prefix, 4 seconds to keep the revision counter
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local purged = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[3] .. 'agent:' .. id
  if redis.call('HGET', key, 'status') == 'OFFLINE' then
    local old = redis.call('HGET', key, 'index')
    if old then
      for _, name in ipairs(cjson.decode(old)) do redis.call('SREM', ARGV[3] .. 'cap:' .. name, id) end
    end
    redis.call('DEL', key, ARGV[3] .. 'lease:' .. id)
    redis.call('SREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('EXPIRE', ARGV[3] .. 'agent-rev:' .. id, ARGV[4])
    purged[#purged + 1] = id
  end
end
return purged
`;
