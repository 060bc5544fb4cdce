/**
 * Spans per pipeline stage (R-F1), exported over OTLP/HTTP when REACH_OTLP_ENDPOINT is
 * set, and nothing at all when it is not: the OpenTelemetry SDK is imported only when an
 * endpoint is configured, and the no-op tracer hands out one shared span object, so a stage
 * pays a property read when tracing is off.
 *
 * Span contexts travel as W3C traceparent strings (Kafka header, WebSocket frame field, HTTP
 * header), never as OpenTelemetry objects, so callers need no OpenTelemetry types.
 */
export type SpanAttributes = Readonly<Record<string, string | number | boolean | null | undefined>>;

export type SpanKindName = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** A failure as spans record it: status ERROR with the Reach error code. */
export interface SpanError {
  readonly code: number;
  readonly codeName?: string | undefined;
  readonly message: string;
}

export interface SpanStart {
  /** The incoming traceparent: the span becomes its child. Absent or invalid: a root span. */
  readonly parent?: string | undefined;
  /** The trace id of a root span (e.g. the envelope's trace_id); ignored with a valid parent. */
  readonly traceId?: string | undefined;
  readonly kind?: SpanKindName;
  readonly attributes?: SpanAttributes;
  /** Epoch ms; default now. */
  readonly startTime?: number;
}

export interface StageSpan {
  /**
   * The traceparent of this span, for what it causes (outgoing records, frames). Undefined when
   * tracing is off: callers then carry the incoming traceparent on unchanged.
   */
  readonly traceparent: string | undefined;
  setAttributes(attributes: SpanAttributes): void;
  fail(error: SpanError): void;
  /** Ends the span (at `endTime`, epoch ms, when given); later calls do nothing. */
  end(endTime?: number): void;
}

/** A span that already happened, recorded under the traceparent reserve() gave it. */
export interface FinishedSpan extends SpanStart {
  /** The span's own traceparent, from reserve(). */
  readonly traceparent: string;
  readonly startTime: number;
  readonly endTime: number;
  readonly error?: SpanError | undefined;
}

export interface Tracer {
  readonly enabled: boolean;
  startSpan(name: string, start?: SpanStart): StageSpan;
  /**
   * The traceparent of a span that will be recorded later with record(), maybe by another
   * process (the dispatcher's delivery span ends with the agent's ack, wherever that arrives).
   * Undefined when tracing is off.
   */
  reserve(parent: string | undefined, traceId?: string): string | undefined;
  record(name: string, span: FinishedSpan): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

const noop = (): void => undefined;

/** The span of the no-op tracer: shared, so tracing off allocates nothing. */
export const NOOP_SPAN: StageSpan = Object.freeze({ traceparent: undefined, setAttributes: noop, fail: noop, end: noop });

export const NOOP_TRACER: Tracer = Object.freeze({
  enabled: false,
  startSpan: () => NOOP_SPAN,
  reserve: () => undefined,
  record: noop,
  shutdown: () => Promise.resolve(),
});

export interface TracerOptions {
  /** OTLP/HTTP endpoint: a base URL (`/v1/traces` is appended) or the full traces URL; '' = off. */
  endpoint: string;
  /** Reach service name; the resource's service.name is `reach-<service>`. */
  service: string;
  instanceId: string;
  /** Told where spans go (info) and when exports fail (warn, at most once a minute). */
  onLog?: (level: 'info' | 'warn', message: string, err?: unknown) => void;
}

/** The traces URL of an OTLP/HTTP endpoint. */
export function tracesUrl(endpoint: string): string {
  const base = endpoint.replace(/\/+$/, '');
  return base.endsWith('/v1/traces') ? base : `${base}/v1/traces`;
}

/** The no-op tracer without an endpoint; else loads the OpenTelemetry SDK and exports to it. */
export async function createTracer(opts: TracerOptions): Promise<Tracer> {
  if (!opts.endpoint) return NOOP_TRACER;
  const { OtelTracer } = await import('./otel.js');
  return new OtelTracer({ ...opts, url: tracesUrl(opts.endpoint) });
}
