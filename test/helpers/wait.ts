/**
 * Polls `probe` until it returns something truthy (or `timeoutMs` passes): how integration
 * tests wait for an asynchronous pipeline without fixed sleeps. A probe that throws counts as
 * "not yet" (the read model may answer 404 until the tracker has caught up).
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
  intervalMs = 100,
  lastSeen?: () => unknown,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await Promise.resolve()
      .then(probe)
      .catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) {
      // What the probe last saw turns a bare timeout into a diagnosis (a CI log is all we keep).
      const seen = lastSeen ? `; last seen: ${JSON.stringify(lastSeen())}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${seen}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
