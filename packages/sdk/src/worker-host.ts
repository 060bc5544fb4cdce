import { parentPort } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';

/**
 * The worker side of workerHandler() (worker-handler.ts): loads the handler module once and
 * runs its export for each task it is given, answering with the value or the error's shape (a
 * ReachError keeps its code and retryable flag across the thread boundary).
 */
interface Task {
  id: number;
  module: string;
  exportName: string;
  payload: unknown;
  message: unknown;
}

const loaded = new Map<string, Promise<Record<string, unknown>>>();

function load(module: string): Promise<Record<string, unknown>> {
  let m = loaded.get(module);
  if (!m) loaded.set(module, (m = import(module.startsWith('file:') ? module : pathToFileURL(module).href) as Promise<Record<string, unknown>>));
  return m;
}

parentPort?.on('message', (task: Task) => {
  void (async () => {
    try {
      const fn = (await load(task.module))[task.exportName];
      if (typeof fn !== 'function') throw new Error(`${task.module} has no export ${task.exportName}`);
      const value: unknown = await (fn as (payload: unknown, message: unknown) => unknown)(task.payload, task.message);
      parentPort!.postMessage({ id: task.id, ok: true, value });
    } catch (err) {
      const e = err as { name?: unknown; message?: unknown; code?: unknown; retryable?: unknown };
      parentPort!.postMessage({
        id: task.id,
        ok: false,
        error: {
          name: typeof e?.name === 'string' ? e.name : 'Error',
          message: typeof e?.message === 'string' ? e.message : String(err),
          code: typeof e?.code === 'number' ? e.code : undefined,
          retryable: typeof e?.retryable === 'boolean' ? e.retryable : undefined,
        },
      });
    }
  })();
});
