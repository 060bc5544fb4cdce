import type { A2aError, StreamEvent, Task } from '@reach/a2a';
import type { Reply, Request } from '@reach/service-kit';
import type { Principal } from './auth.js';

/** The A2A operations, binding-independent (spec §3.1): the JSON-RPC route above and the HTTP+JSON one (a2a-rest.ts) frame them. */
export interface A2aOps {
  /** Authenticates the request and checks its A2A-Version (throws A2aError). */
  caller(req: Request): { who: Principal; token: string | undefined; lastEventId: string | undefined };
  sendMessage(who: Principal, token: string | undefined, params: unknown, bound: string | undefined): Promise<unknown>;
  sendStreaming(
    who: Principal,
    token: string | undefined,
    params: unknown,
    bound: string | undefined,
    lastEventId: string | undefined,
    frame: (e: StreamEvent) => string,
  ): Promise<Reply>;
  getTask(who: Principal, params: unknown): Promise<Task>;
  listTasks(who: Principal, params: unknown): Promise<unknown>;
  cancelTask(who: Principal, params: unknown): Promise<unknown>;
  subscribe(who: Principal, params: unknown, lastEventId: string | undefined, frame: (e: StreamEvent) => string): Promise<Reply>;
  /** Any failure as the A2A error it is answered with (unexpected ones logged). */
  internalError(err: unknown): A2aError;
}
