import { randomBytes } from 'node:crypto';
import { ReachError, AGENT_ID_PATTERN, AGENT_TYPE_PATTERN, DOMAIN_PATTERN, TAG_PATTERN } from '@reach/core';
import type { AgentMetadata, CapabilityMode, Consumption, Endpoints } from '@reach/envelope';
import { CapabilityModeValues, ConsumptionValues } from '@reach/envelope';
import { capabilityNameProblem, capabilityNameWarning, majorOf, parseCapabilityName } from './capability-name.js';

/**
 * The capability descriptor an agent registers with (R-A1), as validated by the registry
 * (R-A2). The JSON field names are those of R-A1 and of reach.v1.AgentRecord.
 */
export interface CapabilitySpec {
  name: string;
  mode: CapabilityMode;
  tags: string[];
  /** Data sources, access level, acceptable timeout range: opaque JSON to Agent-Reach. */
  scope: unknown;
  /** Opaque JSON to Agent-Reach (e.g. input limits). */
  constraints: unknown;
  consumption: Consumption;
  version: string | null;
}

export interface AgentDescriptor {
  agent_id: string;
  agent_type: string;
  endpoints: Endpoints;
  capabilities: CapabilitySpec[];
  metadata: AgentMetadata;
  ttl_s: number;
}

export interface DescriptorWarning {
  field: string;
  message: string;
}

export interface DescriptorRules {
  /** REACH_MAX_CAPABILITIES [10]. */
  maxCapabilities: number;
  /** REACH_CAPABILITY_DICTIONARY as a set; empty = no allow-list. */
  dictionary: ReadonlySet<string>;
  /** REACH_AGENT_TTL_S [60]: the lease TTL of a descriptor without ttl_s. */
  defaultTtlS: number;
  minTtlS?: number;
  maxTtlS?: number;
}

/** The descriptor's name grammars: @reach/core's grammar.ts, re-exported for the agents' users. */
export { AGENT_ID_PATTERN, AGENT_TYPE_PATTERN, DOMAIN_PATTERN, TAG_PATTERN };

const MAX_TAGS = 32;
const MAX_EXTRA_METADATA = 32;
const MAX_OPAQUE_JSON_BYTES = 16 * 1024;
const MAX_CONCURRENCY = 100_000;
const DEFAULT_MAX_CONCURRENCY = 10;
const KNOWN_METADATA = new Set(['max_concurrency', 'region', 'timezone', 'model', 'domain', 'weight', 'extra']);

/** A 4104 naming the offending field in `details.field` (and in the message). */
export function invalidRegistration(field: string, message: string): ReachError {
  return new ReachError('INVALID_REGISTRATION', `${field}: ${message}`, { details: { field } });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function optString(v: unknown, field: string, max = 128): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw invalidRegistration(field, 'must be a string');
  if (v.length > max) throw invalidRegistration(field, `must be at most ${max} characters`);
  return v;
}

function opaqueJson(v: unknown, field: string): unknown {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'object') throw invalidRegistration(field, 'must be a JSON object or array');
  if (Buffer.byteLength(JSON.stringify(v)) > MAX_OPAQUE_JSON_BYTES) throw invalidRegistration(field, `must be at most ${MAX_OPAQUE_JSON_BYTES} bytes of JSON`);
  return v;
}

function url(v: unknown, field: string, protocols: readonly string[]): string | null {
  const s = optString(v, field, 2048);
  if (s === null) return null;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw invalidRegistration(field, `must be a URL (${protocols.join(' or ')})`);
  }
  if (!protocols.includes(u.protocol)) throw invalidRegistration(field, `must be a URL with scheme ${protocols.join(' or ')}`);
  return s;
}

/**
 * The `protocol_version` of an A2A agent's endpoints (docs/a2a.md): `endpoints.a2a` (its JSON-RPC
 * URL) is stored as `http` with this version, and the dispatcher speaks A2A to it.
 */
export const A2A_ENDPOINT_VERSION = 'a2a/1.0';

function parseEndpoints(v: unknown): Endpoints {
  if (v === undefined || v === null) return { ws: null, http: null, protocol_version: '1' };
  if (!isObject(v)) throw invalidRegistration('endpoints', 'must be an object {ws?, http?, a2a?, protocol_version?}');
  if (v.a2a !== undefined && v.a2a !== null) {
    if (v.http !== undefined && v.http !== null)
      throw invalidRegistration('endpoints.a2a', 'an A2A agent is reached at its A2A URL: give a2a or http, not both');
    return { ws: url(v.ws, 'endpoints.ws', ['ws:', 'wss:']), http: url(v.a2a, 'endpoints.a2a', ['http:', 'https:']), protocol_version: A2A_ENDPOINT_VERSION };
  }
  const pv = v.protocol_version;
  if (pv !== undefined && pv !== null && typeof pv !== 'string' && typeof pv !== 'number') {
    throw invalidRegistration('endpoints.protocol_version', 'must be a string');
  }
  return {
    ws: url(v.ws, 'endpoints.ws', ['ws:', 'wss:']),
    http: url(v.http, 'endpoints.http', ['http:', 'https:']),
    protocol_version: pv === undefined || pv === null ? '1' : String(pv),
  };
}

function parseTags(v: unknown, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalidRegistration(field, 'must be an array of strings');
  if (v.length > MAX_TAGS) throw invalidRegistration(field, `must hold at most ${MAX_TAGS} tags`);
  return v.map((t, i) => {
    if (typeof t !== 'string' || !TAG_PATTERN.test(t)) throw invalidRegistration(`${field}[${i}]`, 'must be 1–64 characters without spaces or commas');
    return t;
  });
}

const MAX_DESCRIPTION = 1024;
const MAX_EXAMPLES = 20;

/**
 * A capability's `description` and `examples` (what an A2A Agent Card shows for its skill,
 * docs/a2a.md) are kept in its scope — `scope.description`, `scope.examples` — so the record
 * on reach.agents.v1 needs no new field. Given at the capability level, they are folded in.
 */
function withDescription(scope: unknown, c: Record<string, unknown>, field: string): unknown {
  if (c.description === undefined && c.examples === undefined) return scope;
  const extra: Record<string, unknown> = {};
  if (c.description !== undefined) {
    if (typeof c.description !== 'string' || c.description.length > MAX_DESCRIPTION)
      throw invalidRegistration(`${field}.description`, `must be a string of at most ${MAX_DESCRIPTION} characters`);
    extra.description = c.description;
  }
  if (c.examples !== undefined) {
    const ok = Array.isArray(c.examples) && c.examples.length <= MAX_EXAMPLES && c.examples.every((e) => typeof e === 'string' && e.length <= MAX_DESCRIPTION);
    if (!ok) throw invalidRegistration(`${field}.examples`, `must be at most ${MAX_EXAMPLES} strings of at most ${MAX_DESCRIPTION} characters`);
    extra.examples = c.examples;
  }
  if (Array.isArray(scope)) throw invalidRegistration(`${field}.scope`, 'must be an object to hold a description or examples');
  return opaqueJson({ ...((scope ?? {}) as Record<string, unknown>), ...extra }, `${field}.scope`);
}

function parseCapability(v: unknown, i: number, rules: DescriptorRules, warnings: DescriptorWarning[]): CapabilitySpec {
  const field = `capabilities[${i}]`;
  // A bare string is shorthand for {name, mode: "handle"}.
  const c: Record<string, unknown> = typeof v === 'string' ? { name: v } : isObject(v) ? v : {};
  if (typeof v !== 'string' && !isObject(v))
    throw invalidRegistration(field, 'must be an object {name, mode, tags, scope, constraints, consumption, version?}');
  const problem = capabilityNameProblem(c.name, rules.dictionary);
  if (problem) throw invalidRegistration(`${field}.name`, problem.message);
  const name = c.name as string;
  const warning = capabilityNameWarning(name);
  if (warning) warnings.push({ field: `${field}.name`, message: warning });

  const mode = c.mode ?? 'handle';
  if (!(CapabilityModeValues as readonly unknown[]).includes(mode))
    throw invalidRegistration(`${field}.mode`, `must be one of ${CapabilityModeValues.join(', ')}`);
  const consumption = c.consumption ?? 'single';
  if (!(ConsumptionValues as readonly unknown[]).includes(consumption)) {
    throw invalidRegistration(`${field}.consumption`, `must be one of ${ConsumptionValues.join(', ')}`);
  }
  const rawVersion = c.version;
  if (rawVersion !== undefined && rawVersion !== null && typeof rawVersion !== 'string' && typeof rawVersion !== 'number') {
    throw invalidRegistration(`${field}.version`, 'must be a string');
  }
  const version = rawVersion === undefined || rawVersion === null ? null : String(rawVersion);
  if (version !== null && version.length > 64) throw invalidRegistration(`${field}.version`, 'must be at most 64 characters');
  // `summarize@2` with version "3.0" would be reachable under two majors at once.
  const pinned = parseCapabilityName(name)?.major;
  const versionMajor = majorOf(version);
  if (pinned !== undefined && versionMajor !== undefined && pinned !== versionMajor) {
    throw invalidRegistration(`${field}.version`, `major ${versionMajor} disagrees with the name's @${pinned}`);
  }
  // Stored normalised: `summarize@2` becomes name `summarize`, version `2`, so every reader
  // matches names exactly and reads the major from `version` (R-A7).
  const base = parseCapabilityName(name)!.base;
  return {
    name: base,
    mode: mode as CapabilityMode,
    tags: parseTags(c.tags, `${field}.tags`),
    scope: withDescription(opaqueJson(c.scope, `${field}.scope`), c, field),
    constraints: opaqueJson(c.constraints, `${field}.constraints`),
    consumption: consumption as Consumption,
    version: version ?? (pinned === undefined ? null : String(pinned)),
  };
}

function parseMetadata(v: unknown): AgentMetadata {
  if (v === undefined || v === null) v = {};
  if (!isObject(v)) throw invalidRegistration('metadata', 'must be an object {max_concurrency, region, timezone, model, domain, weight?}');
  const mc = v.max_concurrency ?? DEFAULT_MAX_CONCURRENCY;
  if (typeof mc !== 'number' || !Number.isInteger(mc) || mc < 1 || mc > MAX_CONCURRENCY) {
    throw invalidRegistration('metadata.max_concurrency', `must be an integer in [1, ${MAX_CONCURRENCY}]`);
  }
  const domain = v.domain ?? 'default';
  if (typeof domain !== 'string' || !DOMAIN_PATTERN.test(domain)) {
    throw invalidRegistration('metadata.domain', 'must be 1–64 letters, digits, ".", "_" or "-"');
  }
  const weight = v.weight ?? 1;
  if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0 || weight > 1000) {
    throw invalidRegistration('metadata.weight', 'must be a number in [0, 1000]');
  }
  const timezone = optString(v.timezone, 'metadata.timezone', 64);
  if (timezone !== null) {
    try {
      new Intl.DateTimeFormat('en', { timeZone: timezone });
    } catch {
      throw invalidRegistration('metadata.timezone', `"${timezone}" is not an IANA time zone`);
    }
  }
  // Anything else the agent says about itself is kept as strings in `extra` (tolerant reader).
  const extra: Record<string, string> = {};
  const given = v.extra;
  if (given !== undefined && given !== null && !isObject(given)) throw invalidRegistration('metadata.extra', 'must be an object');
  const extras = [...Object.entries(isObject(given) ? given : {}), ...Object.entries(v).filter(([k]) => !KNOWN_METADATA.has(k))];
  if (extras.length > MAX_EXTRA_METADATA) throw invalidRegistration('metadata', `must hold at most ${MAX_EXTRA_METADATA} extra fields`);
  for (const [k, val] of extras) {
    if (val === undefined || val === null) continue;
    const s = typeof val === 'string' ? val : JSON.stringify(val);
    if (s.length > 1024) throw invalidRegistration(`metadata.${k}`, 'must be at most 1024 characters');
    extra[k] = s;
  }
  return {
    max_concurrency: mc,
    region: optString(v.region, 'metadata.region', 64),
    timezone,
    model: optString(v.model, 'metadata.model'),
    domain,
    weight,
    extra,
  };
}

/** `<agent_type>.<6 hex>`, the R-A1 id shape (e.g. data.retriever.8f3a2c). */
export function generateAgentId(agentType: string): string {
  return `${agentType}.${randomBytes(3).toString('hex')}`;
}

/**
 * Validates a registration body (R-A1/R-A2). Throws 4104 INVALID_REGISTRATION with
 * `details.field` naming the first offending field (e.g. `capabilities[2].name`). Returns the
 * normalised descriptor (defaults filled, agent_id generated when absent) and warnings about
 * acceptable-but-imprecise names.
 */
export function validateDescriptor(body: unknown, rules: DescriptorRules): { descriptor: AgentDescriptor; warnings: DescriptorWarning[] } {
  if (!isObject(body)) throw invalidRegistration('body', 'must be a JSON object (the capability descriptor)');
  const warnings: DescriptorWarning[] = [];

  const agentType = body.agent_type;
  if (typeof agentType !== 'string' || !AGENT_TYPE_PATTERN.test(agentType)) {
    throw invalidRegistration('agent_type', 'is required: 1–64 letters, digits, ".", "_" or "-"');
  }
  let agentId = body.agent_id;
  if (agentId === undefined || agentId === null || agentId === '') agentId = generateAgentId(agentType);
  if (typeof agentId !== 'string' || !AGENT_ID_PATTERN.test(agentId)) {
    throw invalidRegistration('agent_id', 'must be 1–128 letters, digits, ".", "_" or "-", starting with a letter or digit');
  }

  const minTtl = rules.minTtlS ?? 2;
  const maxTtl = rules.maxTtlS ?? 3600;
  const ttl = body.ttl_s ?? rules.defaultTtlS;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < minTtl || ttl > maxTtl) {
    throw invalidRegistration('ttl_s', `must be an integer number of seconds in [${minTtl}, ${maxTtl}]`);
  }

  const caps = body.capabilities ?? [];
  if (!Array.isArray(caps)) throw invalidRegistration('capabilities', 'must be an array');
  if (caps.length > rules.maxCapabilities) {
    throw invalidRegistration('capabilities', `${caps.length} capabilities is more than the limit of ${rules.maxCapabilities} (REACH_MAX_CAPABILITIES)`);
  }
  const capabilities = caps.map((c, i) => parseCapability(c, i, rules, warnings));
  // One entry per (name, major): `summarize@1` next to `summarize@2` is an upgrade that keeps
  // the old major reachable (R-A7); the same name and major twice is a mistake.
  const seen = new Map<string, number>();
  capabilities.forEach((c, i) => {
    const major = majorOf(c.version);
    const key = `${c.name}@${major ?? ''}`;
    const first = seen.get(key);
    if (first !== undefined) {
      throw invalidRegistration(
        `capabilities[${i}].name`,
        `"${c.name}${major === undefined ? '' : `@${major}`}" is already declared by capabilities[${first}]`,
      );
    }
    seen.set(key, i);
  });

  return {
    descriptor: {
      agent_id: agentId,
      agent_type: agentType,
      endpoints: parseEndpoints(body.endpoints),
      capabilities,
      metadata: parseMetadata(body.metadata),
      ttl_s: ttl,
    },
    warnings,
  };
}

/** REACH_CAPABILITY_DICTIONARY ("a,b,c") as a set. */
export function parseCapabilityDictionary(raw: string): Set<string> {
  return new Set(
    raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
}
