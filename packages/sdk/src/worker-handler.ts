import { Worker } from 'node:worker_threads';
import { ReachError, errorInfo, isKnownCode, type ErrorName } from '@reach/core';
import type { Handler } from './node-types.js';

export interface WorkerHandlerOptions {
  /** Worker threads kept for this handler; more tasks wait for a free one. Default 1. */
  threads?: number;
}

interface WorkerError {
  name: string;
  message: string;
  code?: number;
  retryable?: boolean;
}

/** The script every worker runs: it loads the handler module and runs its export per task. */
const HOST = new URL('./worker-host.js', import.meta.url);

/** One thread, running one task at a time. */
class Slot {
  readonly worker = new Worker(HOST);
  private current: { id: number; resolve: (v: unknown) => void; reject: (e: unknown) => void } | undefined;

  constructor() {
    // An idle thread must not keep alive a process that has nothing else to do.
    this.worker.unref();
    this.worker.on('message', (m: { id: number; ok: boolean; value?: unknown; error?: WorkerError }) => {
      const task = this.current;
      if (!task || task.id !== m.id) return;
      this.current = undefined;
      if (m.ok) task.resolve(m.value);
      else task.reject(toError(m.error!));
    });
    this.worker.on('error', (err) => this.fail(err));
  }

  get busy(): boolean {
    return this.current !== undefined;
  }

  run(id: number, task: Record<string, unknown>): Promise<unknown> {
    this.worker.ref();
    return new Promise<unknown>((resolve, reject) => {
      this.current = { id, resolve, reject };
      this.worker.postMessage({ id, ...task });
    }).finally(() => this.worker.unref());
  }

  fail(err: unknown): void {
    const task = this.current;
    this.current = undefined;
    task?.reject(err);
  }
}

/**
 * A handler that runs CPU-bound work in worker threads (R-G1): JavaScript handlers share the
 * event loop with the node's heartbeats, pings, progress frames and acks, so a busy loop in one
 * would make the agent look dead. `workerHandler(module, name)` calls `name(payload, message)`,
 * exported by `module` (a path or file: URL), in a thread of its own; the node's loop stays free.
 * The return value is the result; a throw rejects the delivery — a ReachError keeps its code and
 * retryable flag. Payload, message and result cross the thread by structured clone. When the
 * node gives up on a running handler (`ctx.signal`), its thread is terminated and replaced.
 *
 *   node.handle('render_pdf', workerHandler(new URL('./render.js', import.meta.url), 'render', { threads: 2 }));
 */
export function workerHandler<R = unknown>(
  module: string | URL,
  exportName: string,
  options: WorkerHandlerOptions = {},
): Handler<unknown, R> & { close(): Promise<void> } {
  const moduleRef = module instanceof URL ? module.href : module;
  const size = Math.max(1, options.threads ?? 1);
  const slots: Slot[] = [];
  const waiting: Array<() => void> = [];
  let next = 0;

  const acquire = async (): Promise<Slot> => {
    for (;;) {
      const free = slots.find((s) => !s.busy);
      if (free) return free;
      if (slots.length < size) {
        const slot = new Slot();
        slots.push(slot);
        return slot;
      }
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
  };

  const handler = (async (msg, ctx) => {
    const slot = await acquire();
    const onAbort = (): void => {
      // The node gave up on this handler: the thread goes with the work, a fresh one replaces it.
      slots.splice(slots.indexOf(slot), 1);
      void slot.worker.terminate();
      slot.fail(new ReachError('AGENT_REJECTED', 'the handler was abandoned (the node is stopping)'));
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return (await slot.run(++next, { module: moduleRef, exportName, payload: msg.payload ?? null, message: msg })) as R;
    } finally {
      ctx.signal.removeEventListener('abort', onAbort);
      waiting.shift()?.();
    }
  }) as Handler<unknown, R> & { close(): Promise<void> };
  handler.close = async () => {
    await Promise.all(slots.splice(0).map((s) => s.worker.terminate()));
  };
  return handler;
}

function toError(e: WorkerError): Error {
  if (e.code !== undefined && isKnownCode(e.code)) {
    return new ReachError(errorInfo(e.code).name as ErrorName, e.message, { retryable: e.retryable ?? errorInfo(e.code).retryable });
  }
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}
