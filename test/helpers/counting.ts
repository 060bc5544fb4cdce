/**
 * A proxy of `target` that counts the calls of the named methods (a Redis client's `multi` or
 * `evalsha`, say): for tests that check how many round trips a batched write takes.
 */
export function countingCalls<T extends object>(target: T, methods: readonly string[]): { proxy: T; calls: () => number } {
  let calls = 0;
  const proxy = new Proxy(target, {
    get(t, prop) {
      const v = Reflect.get(t, prop) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (methods.includes(String(prop))) calls++;
        return (v as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
  return { proxy, calls: () => calls };
}
