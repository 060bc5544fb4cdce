import type { ConfigOf } from '@reach/core';
import type { CircuitPolicy } from './policy.js';

/** The REACH_* options a breaker needs (declared in @reach/core's OPTIONS). */
export const CIRCUIT_OPTIONS = [
  'circuitErrorRate',
  'circuitWindowMs',
  'circuitMinVolume',
  'circuitOpenMs',
  'circuitProbeTimeoutMs',
  'ejectSuccessRate',
  'ejectWindowMs',
  'ejectMinVolume',
  'ejectProbes',
] as const;

export type CircuitConfig = ConfigOf<(typeof CIRCUIT_OPTIONS)[number]>;

export function circuitPolicy(c: CircuitConfig): CircuitPolicy {
  return {
    errorRate: c.circuitErrorRate,
    windowMs: c.circuitWindowMs,
    minVolume: c.circuitMinVolume,
    openMs: c.circuitOpenMs,
    probeTimeoutMs: c.circuitProbeTimeoutMs,
    ejectSuccessRate: c.ejectSuccessRate,
    ejectWindowMs: c.ejectWindowMs,
    ejectMinVolume: c.ejectMinVolume,
    ejectProbes: c.ejectProbes,
  };
}
