import { randomBytes } from 'node:crypto';
import { signToken } from '../../../packages/core/dist/index.js';
import { adminToken, tokenSecret, uniq, urls } from '../../helpers/env.js';

/** A producing agent as the tests use it: its id and token, and where the token came from. */
export interface ProducerAgent {
  readonly agentId: string;
  readonly token: string;
  readonly source: 'registry' | 'minted';
}

/** A token signed with the stack's secret, as the registry would issue it (for the cases the registry cannot produce). */
export function mintToken(agentId: string, ttlS = 600, nowS = Math.floor(Date.now() / 1000)): string {
  return signToken({ sub: agentId, jti: `tok_${randomBytes(8).toString('hex')}`, iat: nowS, exp: nowS + ttlS, dom: 'default' }, tokenSecret());
}

/**
 * Registers a pure producer (no capabilities; in `domain` when given) with the registry, `POST /v1/agents` with the
 * admin token, and returns the token it issues. While the registry does not serve that route
 * yet (it is built in parallel), the token is minted with the stack's secret instead, exactly
 * as the registry signs it.
 */
export async function registerProducer(prefix = 'producer', domain?: string): Promise<ProducerAgent> {
  const wanted = uniq(`it.${prefix}`);
  const res = await fetch(`${urls.registry}/v1/agents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: wanted, agent_type: 'test-producer', capabilities: [], ...(domain ? { metadata: { domain } } : {}) }),
  });
  const text = await res.text();
  if (res.status === 201) {
    const body = JSON.parse(text) as { agent_id: string; token: string };
    return { agentId: body.agent_id, token: body.token, source: 'registry' };
  }
  if (res.status === 404 && /no route/.test(text)) return { agentId: wanted, token: mintToken(wanted), source: 'minted' };
  throw new Error(`registering ${wanted} failed: ${res.status} ${text}`);
}
