// A whole Agent-Reach agent: it offers the capability `echo_text` and answers with what it got.
//   npx tsc -b examples && node examples/dist/echo-agent.js   (with `reach up`; AGENT_REACH_MODE=direct: none)
//   reach send --capability echo_text --payload '{"hello":"world"}' --wait
import { pathToFileURL } from 'node:url';
import { AgentNode, connectionFromEnv, type AgentNodeOptions } from '@reach/sdk';

export const capability = process.env.ECHO_CAPABILITY ?? 'echo_text';

/** The agent, built but not started: its unit test runs it in direct mode (test/unit/examples). */
export function echoAgent(connection: Partial<AgentNodeOptions> = connectionFromEnv()): AgentNode {
  const node = new AgentNode({ ...connection, descriptor: { agent_type: 'echo', metadata: { max_concurrency: 8 }, ttl_s: 30 } });
  // The return value is the result; a throw rejects the delivery (retryable unless a NonRetryableError).
  node.handle(capability, async (msg) => ({ echo: msg.payload, by: node.agentId }));
  node.on('disconnected', ({ code }) => process.stderr.write(`disconnected (${code}); reconnecting\n`));
  return node;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // Registers, heartbeats, connects; on SIGTERM / Ctrl-C it finishes in-flight work and deregisters.
  const node = echoAgent();
  await node.start();
  process.stdout.write(`echo agent ${node.agentId} serves ${capability}\n`);
}
