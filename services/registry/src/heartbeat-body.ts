import type { AgentLoad } from '@reach/envelope';
import { healthValue, invalidRegistration } from '@reach/agents';

const MAX_COUNT = 1_000_000_000;

function count(v: unknown, field: string, previous: number): number {
  if (v === undefined || v === null) return previous;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_COUNT) throw invalidRegistration(field, `must be an integer in [0, ${MAX_COUNT}]`);
  return v;
}

/**
 * A heartbeat body `{current_load, queue_length, avg_latency_ms, health}` (docs/design.md §3,
 * R-A5). Every field is optional: one the agent leaves out keeps its last reported value, so a
 * bare `{}` just renews the lease. Invalid values are 4104 naming the field.
 */
export function parseHeartbeat(body: unknown, previous: AgentLoad): AgentLoad {
  if (body === undefined || body === null) return previous;
  if (typeof body !== 'object' || Array.isArray(body))
    throw invalidRegistration('body', 'must be a JSON object {current_load, queue_length, avg_latency_ms, health}');
  const b = body as Record<string, unknown>;
  let latency = previous.avg_latency_ms;
  if (b.avg_latency_ms !== undefined && b.avg_latency_ms !== null) {
    if (typeof b.avg_latency_ms !== 'number' || !Number.isFinite(b.avg_latency_ms) || b.avg_latency_ms < 0) {
      throw invalidRegistration('avg_latency_ms', 'must be a number ≥ 0');
    }
    latency = b.avg_latency_ms;
  }
  let health = previous.health;
  if (b.health !== undefined && b.health !== null) {
    const h = healthValue(b.health);
    if (h === undefined) throw invalidRegistration('health', 'must be a number in [0, 1] (or ok, degraded, unhealthy)');
    health = h;
  }
  return {
    current_load: count(b.current_load, 'current_load', previous.current_load),
    queue_length: count(b.queue_length, 'queue_length', previous.queue_length),
    avg_latency_ms: latency,
    health,
  };
}
