import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AgentStatusValues, schemas } from '@reach/envelope';

const root = fileURLToPath(new URL('../../../', import.meta.url));

describe('generated schema types', () => {
  it('packages/envelope/src/generated/schemas.ts is current with schemas/*.avsc (gen-schema-types --check exits 0)', () => {
    const run = spawnSync(process.execPath, ['scripts/gen-schema-types.mjs', '--check'], { cwd: root, encoding: 'utf8', timeout: 30_000 });
    expect(run.error).toBeUndefined();
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('the enum value lists match the schemas', () => {
    const agent = schemas().get('reach.v1.AgentRecord')!.schema as { fields: Array<{ name: string; type: { symbols?: string[] } }> };
    expect([...AgentStatusValues]).toEqual(agent.fields.find((f) => f.name === 'status')!.type.symbols);
  });
});
