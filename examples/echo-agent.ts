// A whole Agent-Reach agent: it offers the capability `echo_text` and answers with what it got.
//   npx tsc -b examples && node examples/dist/echo-agent.js      (with `reach up` running)
//   reach send --capability echo_text --payload '{"hello":"world"}' --wait
import { AgentNode, connectionFromEnv } from '@reach/sdk';

const capability = process.env.ECHO_CAPABILITY ?? 'echo_text';

const node = new AgentNode({
  ...connectionFromEnv(), // AGENT_REACH_REGISTRY_URL, _DISPATCHER_URL, _TOKEN; local defaults
  descriptor: { agent_type: 'echo', metadata: { max_concurrency: 8 }, ttl_s: 30 },
});

// The return value is the result; a throw rejects the delivery (retryable unless a NonRetryableError).
node.handle(capability, async (msg) => ({ echo: msg.payload, by: node.agentId }));

node.on('disconnected', ({ code }) => process.stderr.write(`disconnected (${code}); reconnecting\n`));

// Registers, heartbeats, connects; on SIGTERM / Ctrl-C it finishes in-flight work and deregisters.
await node.start();
process.stdout.write(`echo agent ${node.agentId} serves ${capability}\n`);
