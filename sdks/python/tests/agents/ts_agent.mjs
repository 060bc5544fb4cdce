/* global process */
// A TypeScript agent (@reach/sdk) for the Python SDK's interop test. It serves TS_CAPABILITY;
// when the payload names a capability in `ask`, its handler asks that capability itself (served
// by a Python agent), passing the session context on, and returns both answers.
import { AgentNode, connectionFromEnv } from '@reach/sdk';

const node = new AgentNode({ ...connectionFromEnv(), descriptor: { agent_type: 'ts-interop', ttl_s: 30 } });

node.handle(process.env.TS_CAPABILITY, async (msg, ctx) => {
  ctx.session.setJson('seen_by_typescript', { user: ctx.session.getJson('user')?.name ?? null });
  const python = msg.payload.ask ? await ctx.node.request(msg.payload.ask, { from: 'typescript' }, { timeoutMs: 20_000, context: ctx.session.all() }) : null;
  return { by: 'typescript', echo: msg.payload, python };
});

await node.start();
process.stdout.write(`serving ${node.agentId}\n`);
