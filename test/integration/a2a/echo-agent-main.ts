/**
 * An A2A echo agent as its own process, written with @a2a-js/sdk the way its README builds one
 * (an AgentExecutor, DefaultRequestHandler, the Express handlers), for the test that kills it
 * with SIGKILL and starts it again (outbound.test.ts). Run by Node's type stripping:
 *   PORT=0 node test/integration/a2a/echo-agent-main.ts   → prints `listening <port>`
 * It answers every message with a COMPLETED task whose artifact is {echo: <the first part>}.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { AgentCard, TaskState, type Part } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const skill = process.env.SKILL ?? 'echo';
let url = '';

const card = (): AgentCard =>
  AgentCard.fromJSON({
    name: `Echo agent ${skill}`,
    description: 'Echoes what it is sent (an @a2a-js/sdk agent in its own process).',
    supportedInterfaces: [{ url: `${url}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    version: '1.0.0',
    capabilities: { streaming: false, pushNotifications: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['application/json'],
    skills: [{ id: skill, name: skill, description: 'Echoes', tags: ['echo'] }],
  });

const executor: AgentExecutor = {
  cancelTask: async () => undefined,
  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId, userMessage } = ctx;
    const now = () => new Date().toISOString();
    bus.publish(
      AgentEvent.task({
        id: taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now(), message: undefined },
        artifacts: [],
        history: [userMessage],
        metadata: undefined,
      }),
    );
    const echoed: Part = {
      content: { $case: 'data', value: { echo: userMessage.parts[0]?.content?.value ?? null } },
      metadata: undefined,
      filename: '',
      mediaType: 'application/json',
    };
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: randomUUID(), name: 'echo', description: '', parts: [echoed], metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: now(), message: undefined },
        metadata: undefined,
      }),
    );
  },
};

const app = express();
const handler = new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor);
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: () => Promise.resolve(card()) }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const port = (server.address() as AddressInfo).port;
  url = `http://127.0.0.1:${port}`;
  process.stdout.write(`listening ${port}\n`);
});
