import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { uniq, urls } from '../../helpers/env.js';

/** A capability name no other test uses (the tag grammar has no '-'). */
export const a2aCapability = (what: string): string => uniq(`a2a_${what}`).replace(/-/g, '_');

/**
 * An A2A client as the SDK's README builds one (JSON-RPC binding), with `token` as the bearer
 * credential on every request; `path` picks a card under ingress (a capability's own).
 */
export async function a2aClient(token: string, path = ''): Promise<Client> {
  const authFetch: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })] }),
  );
  return factory.createFromUrl(`${urls.ingress}${path}`);
}
