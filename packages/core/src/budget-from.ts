/** The replay time a BUDGET_FROM_HEADER value holds, if it is a plausible epoch ms. */
export function budgetFromHeader(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,15}$/.test(raw)) return undefined;
  const n = Number(raw);
  return n > 0 ? n : undefined;
}
