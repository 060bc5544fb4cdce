import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A tiny OTLP/HTTP trace receiver for tests: accepts `POST /v1/traces` with the JSON encoding
 * (what @opentelemetry/exporter-trace-otlp-http sends) and keeps every span, flattened with its
 * resource's service name. Ids are normalised to lower-case hex (OTLP/JSON uses hex; base64 is
 * accepted too).
 */
export interface ReceivedSpan {
  service: string;
  instance: string | undefined;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
}

export interface OtlpReceiver {
  /** Base URL, e.g. http://127.0.0.1:43123 (spans go to <url>/v1/traces). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Requests that were not valid OTLP JSON. */
  readonly rejected: string[];
  close(): Promise<void>;
}

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

function value(v: AnyValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return undefined;
}

function attributes(list: Array<{ key: string; value?: AnyValue }> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list ?? []) out[a.key] = value(a.value);
  return out;
}

function hexId(id: string | undefined, bytes: number): string | undefined {
  if (!id) return undefined;
  if (new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`).test(id)) return id.toLowerCase();
  const b = Buffer.from(id, 'base64');
  return b.length === bytes ? b.toString('hex') : id;
}

function nanosToMs(n: string | number | undefined): number {
  return n === undefined ? 0 : Number(BigInt(String(n)) / 1_000_000n);
}

interface OtlpBody {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value?: AnyValue }> };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        startTimeUnixNano?: string | number;
        endTimeUnixNano?: string | number;
        attributes?: Array<{ key: string; value?: AnyValue }>;
        status?: { code?: number; message?: string };
      }>;
    }>;
  }>;
}

export function spansOf(body: OtlpBody): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const res = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          service: String(res['service.name'] ?? ''),
          instance: res['service.instance.id'] === undefined ? undefined : String(res['service.instance.id']),
          traceId: hexId(s.traceId, 16)!,
          spanId: hexId(s.spanId, 8)!,
          parentSpanId: hexId(s.parentSpanId, 8),
          name: s.name,
          kind: s.kind ?? 0,
          startMs: nanosToMs(s.startTimeUnixNano),
          endMs: nanosToMs(s.endTimeUnixNano),
          attributes: attributes(s.attributes),
          status: { code: s.status?.code ?? 0, ...(s.status?.message ? { message: s.status.message } : {}) },
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const rejected: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type'] ?? '').includes('json')) {
        rejected.push(`${req.method} ${req.url} ${String(req.headers['content-type'])}`);
        res.writeHead(415).end();
        return;
      }
      try {
        spans.push(...spansOf(JSON.parse(text) as OtlpBody));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch (err) {
        rejected.push(String(err));
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    rejected,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
