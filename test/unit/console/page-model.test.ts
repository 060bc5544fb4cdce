import { describe, expect, it } from 'vitest';
import { QosHistory } from '../../../services/console/dist/qos-history.js';
import { resolveUpstreams } from '../../../services/console/dist/upstreams.js';
import { capabilityIndex } from '../../../services/console/web/dist/capabilities.js';
import { formatDuration, formatRate } from '../../../services/console/web/dist/format.js';
import { sparklinePath, sparklinePoints, trendOf } from '../../../services/console/web/dist/sparkline.js';

describe('console QoS history', () => {
  it('keeps the last samples per agent and hands out only what is new since a sequence number', () => {
    const h = new QosHistory(3, 10);
    for (let i = 1; i <= 5; i++) h.record('a', i * 1000, 1 - i / 10, i / 10);
    const all = h.since(0);
    expect(all.agents.a!.map((p) => p[0])).toEqual([3000, 4000, 5000]);
    h.record('b', 9000, 0.5, 0.5);
    expect(h.since(all.seq)).toEqual({ seq: all.seq + 1, agents: { b: [[9000, 0.5, 0.5]] } });
  });

  it('ignores a record seen again and forgets deregistered agents', () => {
    const h = new QosHistory();
    h.record('a', 1000, 1, 0);
    h.record('a', 1000, 1, 0);
    h.record('a', 500, 1, 0);
    expect(h.since(0).agents.a).toHaveLength(1);
    h.forget('a');
    expect(h.since(0).agents).toEqual({});
  });

  it('bounds the number of agents, dropping the least recently updated', () => {
    const h = new QosHistory(5, 2);
    h.record('a', 1, 1, 0);
    h.record('b', 1, 1, 0);
    h.record('a', 2, 1, 0);
    h.record('c', 1, 1, 0);
    expect(Object.keys(h.since(0).agents).sort()).toEqual(['a', 'c']);
  });
});

describe('console upstreams', () => {
  const ports = {
    ingressPort: 7410,
    registryPort: 7411,
    dispatcherPort: 7412,
    trackerPort: 7413,
    deadLetterPort: 7414,
    routerPort: 7415,
    retrySchedulerPort: 7416,
  };
  it('derives every service from REACH_HTTP_HOST and its port unless REACH_CONSOLE_UPSTREAMS names it', () => {
    const u = resolveUpstreams({ ...ports, httpHost: '0.0.0.0', consoleUpstreams: '{"ingress":"http://ingress:8080/","dead-letter":"https://dlq.internal"}' });
    expect(u).toEqual({
      ingress: 'http://ingress:8080',
      registry: 'http://127.0.0.1:7411',
      dispatcher: 'http://127.0.0.1:7412',
      tracker: 'http://127.0.0.1:7413',
      'dead-letter': 'https://dlq.internal',
      router: 'http://127.0.0.1:7415',
      'retry-scheduler': 'http://127.0.0.1:7416',
    });
    expect(resolveUpstreams({ ...ports, httpHost: '::1', consoleUpstreams: '{}' }).registry).toBe('http://[::1]:7411');
  });
});

describe('console page helpers', () => {
  it('indexes capabilities to their agents, available ones first', () => {
    const agent = (agent_id: string, status: string, qos: number, caps: string[]) => ({
      agent_id,
      status,
      qos,
      load: { load_rate: 0.1 },
      capabilities: caps.map((name) => ({ name })),
    });
    const idx = capabilityIndex([agent('x', 'OFFLINE', 1, ['ocr']), agent('y', 'ONLINE', 0.5, ['ocr', 'ocr', 'pdf']), agent('z', 'ONLINE', 0.9, ['ocr'])]);
    expect(idx.map((e) => [e.capability, e.agents.map((a) => a.agent_id), e.available])).toEqual([
      ['ocr', ['z', 'y', 'x'], 2],
      ['pdf', ['y'], 1],
    ]);
  });

  it('draws a sparkline on a fixed range and tells its trend', () => {
    expect(sparklinePoints([0, 0.5, 1], { width: 12, height: 12, min: 0, max: 1, pad: 1 })).toEqual([
      [1, 11],
      [6, 6],
      [11, 1],
    ]);
    expect(sparklinePath([0, 1], { width: 10, height: 10, min: 0, max: 1, pad: 0 })).toBe('M0,10L10,0');
    expect(sparklinePath([], { width: 10, height: 10 })).toBe('');
    expect(sparklinePath([0.5], { width: 10, height: 10, min: 0, max: 1, pad: 0 })).toBe('M6,5L10,5');
    expect(trendOf([1, 1, 0.9, 0.7, 0.6, 0.5])).toBe('down');
    expect(trendOf([0.2, 0.2, 0.5, 0.9])).toBe('up');
    expect(trendOf([1, 1, 1])).toBe('flat');
  });

  it('formats durations and rates for people', () => {
    expect([0, 0.25, 3, 999.6, 1234, 12_345, 125_000, 3_725_000].map(formatDuration)).toEqual([
      '0 ms',
      '0.25 ms',
      '3 ms',
      '1.00 s',
      '1.23 s',
      '12.3 s',
      '2 min 5 s',
      '1 h 2 min',
    ]);
    expect([null, 0, 2.345, 1234.4].map(formatRate)).toEqual(['–', '0/s', '2.3/s', '1,234/s']);
  });
});
