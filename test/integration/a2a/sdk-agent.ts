import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { AgentCard, TaskState, type Message, type Part, type Task } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

/**
 * An A2A agent written with the official A2A JS SDK the way its README and samples build one
 * (an AgentExecutor, DefaultRequestHandler, the Express JSON-RPC and card handlers): the
 * outbound side's target. What it does with a message is the test's `answer`.
 */
export type Answer =
  | { kind: 'complete'; parts: Part[] }
  | { kind: 'fail'; text: string }
  /** Reports WORKING, then completes once `until` resolves. */
  | { kind: 'slow'; until: Promise<void>; parts: Part[] };

export interface SdkAgent {
  readonly url: string;
  readonly cardUrl: string;
  /** Every message the agent was given, in order. */
  readonly received: Message[];
  /** The JSON-RPC methods it was called with, in order. */
  readonly methods: string[];
  stop(): Promise<void>;
  /** Listens again on the same port (after stop: an agent restarted). */
  restart(): Promise<void>;
}

export const textPart = (text: string): Part => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' });
export const dataPart = (value: unknown): Part => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' });

class TestExecutor implements AgentExecutor {
  constructor(
    private readonly answer: (m: Message) => Answer,
    private readonly received: Message[],
  ) {}

  cancelTask = async (): Promise<void> => undefined;

  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId, userMessage } = ctx;
    this.received.push(userMessage);
    const status = (state: TaskState, message?: Message) => ({ state, timestamp: new Date().toISOString(), message });
    const task: Task = { id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), artifacts: [], history: [userMessage], metadata: undefined };
    bus.publish(AgentEvent.task(task));
    const answer = this.answer(userMessage);
    if (answer.kind === 'fail') {
      const why: Message = {
        messageId: randomUUID(),
        contextId,
        taskId,
        role: 2,
        parts: [textPart(answer.text)],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      };
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_FAILED, why), metadata: undefined }));
      return;
    }
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }));
    if (answer.kind === 'slow') await answer.until;
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: randomUUID(), name: 'answer', description: '', parts: answer.parts, metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }));
  }
}

/** Starts the agent on a free port (or `port`), its card at /.well-known/agent-card.json, JSON-RPC at /a2a/jsonrpc. */
export async function startSdkAgent(skillId: string, answer: (m: Message) => Answer, port = 0): Promise<SdkAgent> {
  const received: Message[] = [];
  const methods: string[] = [];
  let server: Server | undefined;
  let url = '';
  const listen = async (p: number): Promise<number> => {
    const app = express();
    // The card names the URL it is served from, known once the port is.
    const card = (): AgentCard =>
      AgentCard.fromJSON({
        name: `SDK test agent ${skillId}`,
        description: 'An A2A agent built with @a2a-js/sdk, for Agent-Reach tests.',
        supportedInterfaces: [{ url: `${url}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
        version: '1.0.0',
        capabilities: { streaming: true, pushNotifications: false },
        defaultInputModes: ['text/plain', 'application/json'],
        defaultOutputModes: ['text/plain', 'application/json'],
        skills: [{ id: skillId, name: skillId, description: `Answers ${skillId}`, tags: ['sdk test'], examples: ['hello'] }],
      });
    const handler = new DefaultRequestHandler(card(), new InMemoryTaskStore(), new TestExecutor(answer, received));
    // Which JSON-RPC methods the agent was called with, in order.
    app.use('/a2a/jsonrpc', express.json(), (req, _res, next) => {
      const method = (req.body as { method?: unknown } | undefined)?.method;
      if (typeof method === 'string') methods.push(method);
      next();
    });
    app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: () => Promise.resolve(card()) }));
    app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
    const s = app.listen(p, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      s.once('listening', resolve);
      s.once('error', reject);
    });
    server = s;
    return (s.address() as AddressInfo).port;
  };
  const bound = await listen(port);
  url = `http://127.0.0.1:${bound}`;
  const stop = async (): Promise<void> => {
    const s = server;
    server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  return {
    url,
    cardUrl: `${url}/.well-known/agent-card.json`,
    received,
    methods,
    stop,
    restart: async () => {
      await listen(bound);
    },
  };
}
