import { expect, expectTypeOf, it } from 'vitest';
import type { TokenKeys } from '@reach/core';
import type { ServiceContext, ServiceDefinition } from '@reach/service-kit';

// Issue #30: what a service requires is checked at start (exit 78) and narrowed in its context,
// so its code never tests or asserts (`!`) it. Type checks: `pnpm lint` compiles the tests.
it('narrows required options and token keys in the context, and makes `required` mandatory for them', () => {
  type Ctx = ServiceContext<'enrollmentToken', 'enrollmentToken' | 'tokenKeys'>;
  expectTypeOf<Ctx['config']['enrollmentToken']>().toEqualTypeOf<string>();
  expectTypeOf<Ctx['tokenKeys']>().toEqualTypeOf<TokenKeys>();
  // not required: still optional
  expectTypeOf<ServiceContext<'enrollmentToken'>['config']['enrollmentToken']>().toEqualTypeOf<string | undefined>();
  expectTypeOf<ServiceContext<'enrollmentToken'>['tokenKeys']>().toEqualTypeOf<TokenKeys | undefined>();

  const start = async (ctx: Ctx): Promise<void> => {
    const token: string = ctx.config.enrollmentToken;
    void token;
  };
  const declared: ServiceDefinition<'enrollmentToken', 'enrollmentToken' | 'tokenKeys'> = {
    name: 'registry',
    port: 'registryPort',
    options: ['enrollmentToken'],
    required: ['enrollmentToken', 'tokenKeys'],
    start,
  };
  // @ts-expect-error a context that relies on token keys needs `required: ['tokenKeys']`
  const undeclared: ServiceDefinition<'enrollmentToken', 'tokenKeys'> = { name: 'registry', port: 'registryPort', options: ['enrollmentToken'], start };
  expect(declared.required).toEqual(['enrollmentToken', 'tokenKeys']);
  expect(undeclared.required).toBeUndefined();
});
