import { describe, expect, it } from 'vitest';
import { localStack } from '@reach/sdk/testing';

describe('localStack: the endpoints of the running local stack', () => {
  it('names the schema registry the stack uses: REACH_SCHEMA_REGISTRY_URL, else the dev registry on its (moved) port', () => {
    expect(localStack({}).schemaRegistryUrl).toBe('http://127.0.0.1:8081');
    // a second stack beside the default one (docs/local-stack.md): tools writing framed records must use its registry
    expect(localStack({ REACH_DEV_SCHEMA_REGISTRY_PORT: '18081' }).schemaRegistryUrl).toBe('http://127.0.0.1:18081');
    expect(localStack({ REACH_SCHEMA_REGISTRY_URL: 'https://sr.example:8443', REACH_DEV_SCHEMA_REGISTRY_PORT: '18081' }).schemaRegistryUrl).toBe(
      'https://sr.example:8443',
    );
  });
});
