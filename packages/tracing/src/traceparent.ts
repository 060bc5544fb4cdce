import { randomBytes } from 'node:crypto';

/**
 * W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/#traceparent-header):
 * `<version>-<trace-id 32 hex>-<parent-id 16 hex>-<flags 2 hex>`. Pure helpers: Agent-Reach
 * carries this header on every Kafka hop, in WebSocket frames and on HTTP pushes (R-F1).
 */
export interface TraceContext {
  readonly traceId: string;
  readonly spanId: string;
  /** Bit 0 = sampled. */
  readonly flags: number;
}

const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/;
const TRACE_ID = /^[\da-f]{32}$/;
const ALL_ZERO = /^0+$/;

/**
 * The context of a well-formed traceparent, else undefined: version ff and all-zero ids are
 * invalid, and so is upper-case hex; a version-00 header must have exactly four fields, while
 * a later version may add more (a reader of version 00 then takes the first four, as the spec
 * asks).
 */
export function parseTraceparent(value: string | undefined | null): TraceContext | undefined {
  if (!value) return undefined;
  const m = TRACEPARENT.exec(value.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(spanId)) return undefined;
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

export function isValidTraceparent(value: string | undefined | null): value is string {
  return parseTraceparent(value) !== undefined;
}

export function formatTraceparent(ctx: TraceContext): string {
  return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A W3C trace id: 32 lowercase hex, not all zero. */
export function isTraceId(value: string | undefined | null): value is string {
  return typeof value === 'string' && TRACE_ID.test(value) && !ALL_ZERO.test(value);
}

export function randomSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (!ALL_ZERO.test(id)) return id;
  }
}

/**
 * A child of `parent`: same trace and flags, a new span id. Without a valid parent, a sampled
 * root of `traceId` when that is a W3C trace id; else undefined.
 */
export function childTraceparent(parent: string | undefined, traceId?: string, spanId: string = randomSpanId()): string | undefined {
  const p = parseTraceparent(parent);
  if (p) return formatTraceparent({ traceId: p.traceId, spanId, flags: p.flags });
  const id = traceId?.toLowerCase();
  return isTraceId(id) ? formatTraceparent({ traceId: id, spanId, flags: 1 }) : undefined;
}

/**
 * Records re-pointed from one trace context to another: every record whose `traceparent`
 * header is `from` gets `to` instead (a stage's outputs become children of its span). The same
 * array when nothing changes, so the tracing-off path allocates nothing.
 */
export function withTraceparent<R extends { readonly headers?: Readonly<Record<string, string>> | undefined }>(
  records: readonly R[],
  from: string | undefined,
  to: string | undefined,
): readonly R[] {
  if (from === undefined || to === undefined || from === to) return records;
  let out: R[] | undefined;
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    if (r.headers?.traceparent !== from) continue;
    out ??= records.slice();
    out[i] = { ...r, headers: { ...r.headers, traceparent: to } };
  }
  return out ?? records;
}
