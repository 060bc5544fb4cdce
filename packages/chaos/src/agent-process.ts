import { startTestAgent, stopTestAgents } from '@reach/sdk/testing';

/**
 * One process of SDK agents for `pnpm chaos` (forked by sdk-agents.ts, so a fault can SIGKILL
 * it mid-handler). Argv: capability, agent count, handler ms. Each handler execution is
 * reported to the parent over IPC when it starts and when it is done (the SDK answers the
 * delivery right after), keyed by the message's idempotency key.
 */
const [capability, countText, handlerMsText] = process.argv.slice(2);
const count = Number(countText);
const handlerMs = Number(handlerMsText);
const send = (m: Record<string, unknown>) => process.send?.(m);

const agents = [];
for (let i = 0; i < count; i++) {
  const agent = await startTestAgent({
    descriptor: { metadata: { max_concurrency: 64 } },
    handlers: {
      [capability!]: async (msg) => {
        const key = msg.idempotency_key ?? msg.message_id;
        send({ t: 'start', key, id: msg.message_id, agent: agent.agentId, at: Date.now() });
        await new Promise((r) => setTimeout(r, handlerMs));
        send({ t: 'done', key, id: msg.message_id, agent: agent.agentId, at: Date.now() });
        return { ok: true };
      },
    },
  });
  agents.push(agent);
}
send({ t: 'ready', agents: agents.map((a) => a.agentId) });

process.on('SIGTERM', () => {
  void stopTestAgents().finally(() => process.exit(0));
});
