import type { AgentInfo } from '@reach/sdk';
import { apiClient, printJson, reportFailure } from '../api.js';
import { table } from '../output.js';

export interface AgentsArgs {
  capability?: string;
  status?: string;
  domain?: string;
  json: boolean;
}

function capabilityNames(a: AgentInfo): string {
  return (a.capabilities ?? []).map((c) => (typeof c === 'string' ? c : c.mode === 'subscribe' ? `${c.name} (sub)` : c.name)).join(', ');
}

/** `reach agents [--capability C] [--status S] [--domain D] [--json]`: the registry's agents. */
export async function agents(args: AgentsArgs): Promise<number> {
  let list: AgentInfo[];
  try {
    list = await apiClient().agents({ capability: args.capability, status: args.status, domain: args.domain });
  } catch (err) {
    return reportFailure(err, args.json);
  }
  if (args.json) {
    printJson(list);
    return 0;
  }
  const rows = list.map((a) => {
    const max = a.metadata?.max_concurrency;
    const load = a.load?.current_load;
    return {
      agent_id: a.agent_id,
      type: a.agent_type ?? '',
      status: a.status ?? '',
      capabilities: capabilityNames(a),
      load: load === undefined ? '' : `${load}/${typeof max === 'number' ? max : '?'}`,
      queue: a.load?.queue_length ?? '',
      health: a.load?.health ?? '',
      qos: typeof a.qos === 'number' ? a.qos.toFixed(2) : '',
      domain: typeof a.metadata?.domain === 'string' ? a.metadata.domain : '',
    };
  });
  process.stdout.write(table(rows, ['agent_id', 'type', 'status', 'capabilities', 'load', 'queue', 'health', 'qos', 'domain']));
  return 0;
}
