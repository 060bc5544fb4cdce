/**
 * Envelope header (the envelope's own `headers` map) of a dead-letter replay: when ingress
 * accepted it (epoch ms, decimal). A replay is a new delivery attempt chain whose time budget
 * counts from then; created_at stays the message's (docs/pipeline.md, "Replays"). Ingress
 * sets it on replays and drops it from everything else, so no producer can stretch its budget.
 */
export const BUDGET_FROM_HEADER = 'reach-budget-from';

/** The replay time a BUDGET_FROM_HEADER value holds, if it is a plausible epoch ms. */
export function budgetFromHeader(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,15}$/.test(raw)) return undefined;
  const n = Number(raw);
  return n > 0 ? n : undefined;
}
