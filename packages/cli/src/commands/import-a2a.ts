import { A2A_VERSION_HEADER } from '@reach/core';
import { descriptorFromCard } from '@reach/a2a';
import { adminCall, adminFailure } from '../admin-api.js';
import { printJson } from '../api.js';
import { done } from '../output.js';

export interface ImportA2aArgs {
  cardUrl: string | undefined;
  agentId?: string | undefined;
  domain?: string | undefined;
  maxConcurrency?: string | undefined;
  ttl?: string | undefined;
  json: boolean;
}

/**
 * `reach agents import-a2a <card-url>`: registers an A2A agent from its Agent Card (docs/a2a.md):
 * its skills become capabilities, the dispatcher delivers to it with SendMessage, and the
 * registry probes it instead of waiting for heartbeats. Domain and limits are the importer's.
 */
export async function importA2a(args: ImportA2aArgs): Promise<number> {
  if (!args.cardUrl) {
    process.stderr.write('usage: reach agents import-a2a <agent-card-url> [--agent-id ID] [--domain D] [--max-concurrency N] [--ttl S]\n');
    return 2;
  }
  const res = await fetch(args.cardUrl, { headers: { [A2A_VERSION_HEADER]: '1.0' } });
  if (!res.ok) {
    process.stderr.write(`✘ ${args.cardUrl}: HTTP ${res.status}\n`);
    return 1;
  }
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  let descriptor: Record<string, unknown>;
  try {
    descriptor = descriptorFromCard(await res.json(), args.cardUrl, {
      agentId: args.agentId,
      domain: args.domain,
      maxConcurrency: num(args.maxConcurrency),
      ttlS: num(args.ttl),
    });
  } catch (err) {
    process.stderr.write(`✘ ${(err as Error).message}\n`);
    return 1;
  }
  let answer: Record<string, unknown>;
  try {
    answer = await adminCall<Record<string, unknown>>('registry', 'POST', '/v1/agents', descriptor);
  } catch (err) {
    return adminFailure(err, args.json);
  }
  if (args.json) printJson({ ...answer, descriptor });
  else {
    const caps = (descriptor.capabilities as Array<{ name: string }>).map((c) => c.name).join(', ');
    done(`imported ${String(descriptor.agent_id)} (${caps}) from ${args.cardUrl}`);
  }
  return 0;
}
