import {
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  diag,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer as OtelApiTracer,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, RandomIdGenerator, type IdGenerator } from '@opentelemetry/sdk-trace-base';
import { formatTraceparent, isTraceId, parseTraceparent, randomSpanId } from './traceparent.js';
import type { FinishedSpan, SpanAttributes, SpanError, SpanKindName, SpanStart, StageSpan, Tracer, TracerOptions } from './tracer.js';

/**
 * The tracer behind REACH_OTLP_ENDPOINT: OpenTelemetry's SDK with a BatchSpanProcessor (spans
 * leave in batches off the hot path; OTEL_BSP_* variables tune it) and the OTLP/HTTP JSON
 * exporter. Loaded only when an endpoint is configured (tracer.ts).
 */

const KINDS: Record<SpanKindName, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

/** The longest a stop waits for the last spans to be exported. */
const SHUTDOWN_FLUSH_MS = 3_000;

/** One export failure message per this window at most (a collector that is down fails every export). */
const WARN_EVERY_MS = 60_000;

/**
 * Random ids, except when the next span must have a chosen identity: a root span of the
 * envelope's trace id, or a span recorded later under the id reserve() gave it. startSpan asks
 * for its ids synchronously, so the choice is set just before the call and cleared after it.
 */
class ChosenIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  traceId: string | undefined;
  spanId: string | undefined;

  generateTraceId = (): string => this.traceId ?? this.random.generateTraceId();
  generateSpanId = (): string => this.spanId ?? this.random.generateSpanId();
}

function attrs(a: SpanAttributes | undefined): Attributes | undefined {
  if (!a) return undefined;
  const out: Attributes = {};
  for (const [k, v] of Object.entries(a)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

function markFailed(span: Span, error: SpanError): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: `${error.code}${error.codeName ? ` ${error.codeName}` : ''}: ${error.message}`.slice(0, 500) });
  span.setAttribute('reach.error.code', error.code);
  if (error.codeName) span.setAttribute('reach.error.name', error.codeName);
}

function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return formatTraceparent({ traceId: c.traceId, spanId: c.spanId, flags: c.traceFlags });
}

class OtelSpan implements StageSpan {
  readonly traceparent: string;
  private ended = false;

  constructor(private readonly span: Span) {
    this.traceparent = traceparentOf(span);
  }

  setAttributes(a: SpanAttributes): void {
    const clean = attrs(a);
    if (clean) this.span.setAttributes(clean);
  }

  fail(error: SpanError): void {
    markFailed(this.span, error);
  }

  end(endTime?: number): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end(endTime === undefined ? undefined : new Date(endTime));
  }
}

export class OtelTracer implements Tracer {
  readonly enabled = true;
  private readonly provider: BasicTracerProvider;
  private readonly tracer: OtelApiTracer;
  private readonly ids = new ChosenIds();

  constructor(opts: TracerOptions & { url: string }) {
    const log = opts.onLog ?? (() => undefined);
    let lastWarn = 0;
    diag.setLogger(
      {
        error: (message, ...args) => {
          const now = Date.now();
          if (now - lastWarn < WARN_EVERY_MS) return;
          lastWarn = now;
          log('warn', `opentelemetry: ${message}`, args[0]);
        },
        warn: () => undefined,
        info: () => undefined,
        debug: () => undefined,
        verbose: () => undefined,
      },
      { logLevel: DiagLogLevel.ERROR, suppressOverrideMessage: true },
    );
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        'service.name': `reach-${opts.service}`,
        'service.namespace': 'agent-reach',
        'service.instance.id': opts.instanceId,
      }),
      idGenerator: this.ids,
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: opts.url }))],
    });
    this.tracer = this.provider.getTracer('@reach/tracing');
    log('info', `tracing on: spans are exported to ${opts.url}`);
  }

  private parentContext(parent: string | undefined): Context {
    const p = parseTraceparent(parent);
    if (!p) return ROOT_CONTEXT;
    return trace.setSpanContext(ROOT_CONTEXT, { traceId: p.traceId, spanId: p.spanId, traceFlags: p.flags, isRemote: true });
  }

  private open(name: string, start: SpanStart, chosen: { traceId?: string | undefined; spanId?: string | undefined }): Span {
    this.ids.traceId = chosen.traceId;
    this.ids.spanId = chosen.spanId;
    try {
      return this.tracer.startSpan(
        name,
        {
          kind: KINDS[start.kind ?? 'internal'],
          ...(start.attributes ? { attributes: attrs(start.attributes)! } : {}),
          ...(start.startTime !== undefined ? { startTime: new Date(start.startTime) } : {}),
        },
        this.parentContext(start.parent),
      );
    } finally {
      this.ids.traceId = undefined;
      this.ids.spanId = undefined;
    }
  }

  startSpan(name: string, start: SpanStart = {}): StageSpan {
    const rootTrace = parseTraceparent(start.parent) ? undefined : start.traceId?.toLowerCase();
    return new OtelSpan(this.open(name, start, { traceId: isTraceId(rootTrace) ? rootTrace : undefined }));
  }

  reserve(parent: string | undefined, traceId?: string): string {
    const p = parseTraceparent(parent);
    if (p) return formatTraceparent({ traceId: p.traceId, spanId: randomSpanId(), flags: p.flags });
    const id = traceId?.toLowerCase();
    return formatTraceparent({ traceId: isTraceId(id) ? id : this.ids.generateTraceId(), spanId: randomSpanId(), flags: 1 });
  }

  record(name: string, s: FinishedSpan): void {
    const own = parseTraceparent(s.traceparent);
    if (!own) return;
    const parent = parseTraceparent(s.parent);
    // A reserved span always belongs to its parent's trace; one without a parent is a root of its own.
    const span = this.open(
      name,
      { ...s, parent: parent && parent.traceId === own.traceId ? s.parent : undefined },
      { traceId: own.traceId, spanId: own.spanId },
    );
    if (s.error) markFailed(span, s.error);
    span.end(new Date(Math.max(s.endTime, s.startTime)));
  }

  /** Exports what is buffered, for at most SHUTDOWN_FLUSH_MS: a collector that does not answer must not hold up a stop. */
  async shutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SHUTDOWN_FLUSH_MS);
      timer.unref();
    });
    await Promise.race([this.provider.shutdown().catch(() => undefined), late]);
    clearTimeout(timer);
  }
}
