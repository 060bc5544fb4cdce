import { AgentNode } from '@reach/sdk';
import { localStack } from '@reach/sdk/testing';

/**
 * One process of SDK agents for `pnpm soak` (forked by agents.ts), written as the SDK README
 * shows: an AgentNode per agent with one capability whose handler throws a plain Error — a
 * transient failure, retried by the pipeline — for `failRate` of its messages. Argv:
 * capability, agent count, failure rate. Reports its agent ids, then counts, over IPC.
 */
const [capability, countText, failRateText] = process.argv.slice(2);
const count = Number(countText);
const failRate = Number(failRateText);
const stack = localStack();
let handled = 0;
let failed = 0;

const nodes: AgentNode[] = [];
for (let i = 0; i < count; i++) {
  const node = new AgentNode({
    registryUrl: stack.registryUrl,
    dispatcherUrl: stack.dispatcherUrl,
    ingressUrl: stack.ingressUrl,
    token: stack.adminToken,
    ...(stack.tls ? { tls: stack.tls } : {}),
    descriptor: { agent_type: 'soak', metadata: { max_concurrency: 32 }, ttl_s: 30 },
    handleSignals: false,
  });
  node.handle(capability!, async () => {
    handled++;
    if (Math.random() < failRate) {
      failed++;
      throw new Error('transient model failure (soak)');
    }
    return { ok: true };
  });
  await node.start();
  nodes.push(node);
}
process.send?.({ t: 'ready', agents: nodes.map((n) => n.agentId!) });
const report = setInterval(() => process.send?.({ t: 'counts', handled, failed }), 5_000);

process.on('SIGTERM', () => {
  clearInterval(report);
  process.send?.({ t: 'counts', handled, failed });
  void Promise.allSettled(nodes.map((n) => n.stop())).finally(() => process.exit(0));
});
