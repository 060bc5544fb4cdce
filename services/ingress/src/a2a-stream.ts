import type { ServerResponse } from 'node:http';
import { settledLength, timelineEvents, type ResumePoint, type StreamEvent, type StreamResponse } from '@reach/a2a';
import type { Logger } from '@reach/core';
import type { A2aReadModel } from './a2a-read.js';

/**
 * A task's stream over Server-Sent Events (docs/a2a.md). Nothing about the task is held here
 * between polls but this connection's cursor: every event comes from the read model (the
 * message's timeline), so any instance serves any stream, and a client that reconnects with
 * `Last-Event-ID` (or calls SubscribeToTask again) gets whatever it missed, from the timeline.
 */
export interface StreamOptions {
  readonly read: A2aReadModel;
  readonly taskId: string;
  /** One event as SSE text, in the binding's framing (jsonRpcFrame, restFrame). */
  readonly frame: (e: StreamEvent) => string;
  /** The first event (the Task as it stands), sent before the timeline. */
  readonly first: StreamEvent;
  /** Timeline position to continue after. */
  readonly from: ResumePoint;
  /** The stream ends (without a final event) after this long; the client resumes. */
  readonly maxMs: number;
  readonly log: Logger;
  /** Resolves when the service shuts down: open streams end so the client resumes elsewhere. */
  readonly closing: Promise<void>;
}

/** Poll delays: short while events come, doubling to a cap while nothing happens. */
const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 1_000;
/** A comment line this often keeps idle proxies from closing the stream. */
const KEEPALIVE_MS = 15_000;

export const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' };

/** JSON-RPC binding (spec §9.4.2): each event is a JSON-RPC response to the request's id. */
export function jsonRpcFrame(rpcId: string | number | null): (e: StreamEvent) => string {
  return (e) => `id: ${e.id}\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: rpcId, result: e.event })}\n\n`;
}

/** HTTP+JSON binding (spec §11.7): each event is the StreamResponse itself. */
export function restFrame(e: StreamEvent): string {
  return `id: ${e.id}\ndata: ${JSON.stringify(e.event satisfies StreamResponse)}\n\n`;
}

function sleep(ms: number, cut: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([new Promise<void>((r) => (timer = setTimeout(r, ms))), cut]).finally(() => clearTimeout(timer));
}

export async function streamTask(res: ServerResponse, o: StreamOptions): Promise<void> {
  let gone = false;
  const closed = new Promise<void>((resolve) =>
    res.once('close', () => {
      gone = true;
      resolve();
    }),
  );
  const cut = Promise.race([closed, o.closing]);
  let shuttingDown = false;
  void o.closing.then(() => (shuttingDown = true));
  const write = (e: StreamEvent): void => {
    res.write(o.frame(e));
  };

  write(o.first);
  if (o.first.final) return;
  let from = o.from;
  let delay = FIRST_POLL_MS;
  let lastWrite = Date.now();
  const deadline = Date.now() + o.maxMs;
  while (!gone && !shuttingDown && Date.now() < deadline) {
    let events: StreamEvent[] = [];
    let timelineLength = from.position;
    try {
      const [row, timeline] = await Promise.all([o.read.task(o.taskId), o.read.timeline(o.taskId)]);
      if (row) {
        const settled = timeline.slice(0, settledLength(timeline, Date.now()));
        events = timelineEvents(row, settled, from);
        timelineLength = settled.length;
      }
    } catch (err) {
      o.log.warn({ err, message_id: o.taskId }, 'a2a stream: read model query failed; trying again');
    }
    if (gone) return;
    for (const e of events) {
      write(e);
      if (e.final) return;
    }
    if (events.length > 0) {
      lastWrite = Date.now();
      from = { position: timelineLength, sawArtifactOfNext: false };
      delay = FIRST_POLL_MS;
    } else {
      delay = Math.min(delay * 2, MAX_POLL_MS);
      if (Date.now() - lastWrite >= KEEPALIVE_MS) {
        res.write(': keep-alive\n\n');
        lastWrite = Date.now();
      }
    }
    await sleep(delay, cut);
  }
}
