#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError } from '@reach/core';
import { upCommand, UP_USAGE } from './commands/up.js';
import { down } from './commands/down.js';
import { ps } from './commands/ps.js';
import { setup } from './commands/setup.js';
import { restart } from './commands/restart.js';
import { agents } from './commands/agents.js';
import { importA2a } from './commands/import-a2a.js';
import { send } from './commands/send.js';
import { status } from './commands/status.js';
import { trace } from './commands/trace.js';
import { auditCommand, AUDIT_USAGE } from './commands/audit.js';
import { dlqCommand, DLQ_USAGE } from './commands/dlq.js';
import { rulesCommand, RULES_USAGE } from './commands/rules.js';
import { quotaCommand, QUOTA_USAGE } from './commands/quota.js';
import { storage } from './commands/storage.js';

const USAGE = `reach — the Agent-Reach command line

${UP_USAGE}
  reach down              stop the stack of REACH_HOME (started with --detach or in another terminal)
  reach ps [--json]       processes of the stack of REACH_HOME and their readiness (exit 0 when all ready)
  reach setup             the deploy step alone: migrations, topics, schema registration
  reach restart <name>    restart one component of the running stack from the current build
  reach bench [--rate R --duration S --agents N --producers M --payload B --json]
                          the pipeline under load next to a raw kafkajs loop (docs/benchmarks.md)
  reach agents [--capability C] [--status S] [--domain D]
                          the registry's agents, their capabilities, load and QoS
  reach agents import-a2a <agent-card-url> [--agent-id ID] [--domain D] [--max-concurrency N] [--ttl S]
                          register an A2A agent from its Agent Card: its skills become capabilities (docs/a2a.md)
  reach send (--capability C | --topic T | --agent ID) [--payload JSON] [--wait] [--wait-ms N]
             [--type T] [--idempotency-key K] [--session S] [--priority HIGH|NORMAL|LOW]
                          submit a message (admin token); --wait waits for the handler's result
  reach status <message_id>             a message's state and timeline
  reach storage [--keys] [--json]       PostgreSQL table sizes and oldest data kept, Redis memory and keys
                                        (--keys: by key family, with keys lacking a TTL), Kafka records and log size
  reach trace <trace_id|message_id>     every message and event of a trace
${DLQ_USAGE}
${RULES_USAGE}
${QUOTA_USAGE}
${AUDIT_USAGE}

Options: --json for machine-readable output. Configuration: REACH_* environment variables (docs/configuration.md).`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // the benchmark has options of its own
  // Loaded on demand: the benchmark pulls in code no other command needs.
  if (command === 'bench') return (await import('@reach/bench')).benchCommand(rest);
  if (command === 'up') return upCommand(rest);
  if (command === 'dlq') return dlqCommand(rest);
  if (command === 'rules') return rulesCommand(rest);
  if (command === 'quota') return quotaCommand(rest);
  if (command === 'audit') return auditCommand(rest);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
      // agents / send
      capability: { type: 'string' },
      status: { type: 'string' },
      domain: { type: 'string' },
      topic: { type: 'string' },
      agent: { type: 'string' },
      payload: { type: 'string' },
      type: { type: 'string' },
      wait: { type: 'boolean', default: false },
      'wait-ms': { type: 'string' },
      'idempotency-key': { type: 'string' },
      session: { type: 'string' },
      priority: { type: 'string' },
      // storage
      keys: { type: 'boolean', default: false },
      // agents import-a2a
      'agent-id': { type: 'string' },
      'max-concurrency': { type: 'string' },
      ttl: { type: 'string' },
    },
  });
  switch (command) {
    case 'down':
      return down();
    case 'ps':
      return ps({ json: values.json });
    case 'storage':
      return storage({ json: values.json, keys: values.keys });
    case 'setup':
      return setup();
    case 'restart':
      return restart(positionals[0]);

    case 'agents':
      if (positionals[0] === 'import-a2a')
        return importA2a({
          cardUrl: positionals[1],
          agentId: values['agent-id'],
          domain: values.domain,
          maxConcurrency: values['max-concurrency'],
          ttl: values.ttl,
          json: values.json,
        });
      return agents({ capability: values.capability, status: values.status, domain: values.domain, json: values.json });
    case 'send':
      return send({
        capability: values.capability,
        topic: values.topic,
        agent: values.agent,
        payload: values.payload,
        type: values.type,
        wait: values.wait,
        waitMs: values['wait-ms'],
        idempotencyKey: values['idempotency-key'],
        session: values.session,
        priority: values.priority,
        json: values.json,
      });
    case 'status':
      return status(positionals[0], { json: values.json });
    case 'trace':
      return trace(positionals[0], { json: values.json });
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE + '\n');
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`unknown command ${command}\n\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`✘ ${err instanceof ConfigError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
