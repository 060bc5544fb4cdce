import type { CpuUse } from './proc-cpu.js';
import type { ComponentCost, CpuCost } from './results.js';

/**
 * What a message costs in CPU, per component: the loaded window's CPU minus what the same
 * component burns idle over as long (timers, polls, heartbeats: measured just before), divided
 * by the messages delivered in the window. Pure arithmetic over two /proc readings.
 */
export function cpuCost(o: {
  idle: CpuUse;
  loaded: CpuUse;
  messages: number;
  /** process.cpuUsage() of the bench over the loaded window, µs. */
  benchCpuUs: number;
  cores: number;
}): CpuCost {
  const { idle, loaded } = o;
  const net = new Map<string, number>();
  for (const [component, cpuS] of loaded.byComponent) {
    const idleRate = idle.seconds > 0 ? (idle.byComponent.get(component) ?? 0) / idle.seconds : 0;
    // Noise (10 ms ticks) can put a nearly idle component slightly below its idle rate.
    net.set(component, Math.max(0, cpuS - idleRate * loaded.seconds));
  }
  const totalS = [...net.values()].reduce((a, b) => a + b, 0);
  const perMsgUs = (cpuS: number) => (o.messages > 0 ? (cpuS * 1e6) / o.messages : NaN);
  const pctCore = (cpuS: number, seconds: number) => (seconds > 0 ? (cpuS / seconds) * 100 : NaN);
  const components: Record<string, ComponentCost> = {};
  for (const [component, cpuS] of net) {
    components[component] = {
      usPerMsg: perMsgUs(cpuS),
      share: totalS > 0 ? cpuS / totalS : NaN,
      loadedPctCore: pctCore(loaded.byComponent.get(component) ?? 0, loaded.seconds),
      idlePctCore: pctCore(idle.byComponent.get(component) ?? 0, idle.seconds),
    };
  }
  const loadedS = [...loaded.byComponent.values()].reduce((a, b) => a + b, 0);
  const machineS = loaded.seconds * o.cores;
  return {
    windowS: loaded.seconds,
    messages: o.messages,
    components,
    totalUsPerMsg: perMsgUs(totalS),
    stackMachineShare: machineS > 0 ? loadedS / machineS : NaN,
    bench: { usPerMsg: perMsgUs(o.benchCpuUs / 1e6), machineShare: machineS > 0 ? o.benchCpuUs / 1e6 / machineS : NaN },
    churned: [...new Set([...idle.churned, ...loaded.churned])].sort(),
    noisyIdle: Object.entries(components)
      .filter(([, c]) => isNoisyIdle(c))
      .map(([name]) => name)
      .sort(),
  };
}

/** Busier idle than loaded (by more than a point): something else was running in the idle window. */
export function isNoisyIdle(c: Pick<ComponentCost, 'idlePctCore' | 'loadedPctCore'>): boolean {
  return c.idlePctCore > c.loadedPctCore + 1;
}

/** % of one core per component over a window (the idle tables). */
export function pctCoreByComponent(use: CpuUse): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [component, cpuS] of use.byComponent) out[component] = use.seconds > 0 ? (cpuS / use.seconds) * 100 : NaN;
  return out;
}
