import type { ServiceMetrics } from '@reach/service-kit';
import type { Acceptance } from './acceptance.js';

type Counter = ReturnType<ServiceMetrics['counter']>;

/** Ingress's own metrics, next to the service kit's consume-loop ones. Labels stay bounded. */
export class IngressMetrics {
  private readonly messages: Counter;
  private readonly rejections: Counter;

  constructor(metrics: ServiceMetrics) {
    this.messages = metrics.counter('messages_total', 'Submitted messages by path (kafka, http) and outcome (accepted, duplicate, rejected).', [
      'path',
      'outcome',
    ]);
    this.rejections = metrics.counter('rejected_messages_total', 'Rejected submissions by path and error code.', ['path', 'code']);
  }

  count(path: 'kafka' | 'http', a: Acceptance): void {
    this.messages.inc({ path, outcome: a.outcome });
    if (a.outcome === 'rejected') this.rejections.inc({ path, code: String(a.error.code) });
  }

  undecodable(code: number): void {
    this.messages.inc({ path: 'kafka', outcome: 'rejected' });
    this.rejections.inc({ path: 'kafka', code: String(code) });
  }
}
