import { describe, expect, it } from 'vitest';
import { AnswerTime, MIN_SEND_BUDGET_MS, sendMarginMs, tooLateToSend } from '../../../services/dispatcher/dist/deadline-holds.js';

const created = 1_800_000_000_000;
const budgetAt = created + 30_000;

describe('the send margin: how much budget a delivery needs left to be sent', () => {
  it('is MIN_SEND_BUDGET_MS for an agent answering fast or not measured yet', () => {
    expect(sendMarginMs(budgetAt, created)).toBe(MIN_SEND_BUDGET_MS);
    expect(sendMarginMs(budgetAt, created, 300)).toBe(MIN_SEND_BUDGET_MS);
  });
  it('is twice the agent’s answer time when that is longer, up to a quarter of the whole budget', () => {
    expect(sendMarginMs(budgetAt, created, 1_500)).toBe(3_000);
    expect(sendMarginMs(budgetAt, created, 60_000)).toBe(7_500);
    // A short budget keeps its quarter, as before.
    expect(sendMarginMs(created + 2_000, created)).toBe(500);
  });
  it('decides tooLateToSend: 2 s left is enough for a fast agent, not for one answering in 1.5 s', () => {
    const now = budgetAt - 2_000;
    expect(tooLateToSend(budgetAt, created, now)).toBe(false);
    expect(tooLateToSend(budgetAt, created, now, 1_500)).toBe(true);
    expect(tooLateToSend(null, created, now, 60_000)).toBe(false);
  });
});

describe('AnswerTime', () => {
  it('rises quickly with slow answers and falls slowly with fast ones', () => {
    const t = new AnswerTime();
    expect(t.ms).toBe(0);
    expect(t.widensMargin).toBe(false);
    t.observe(800);
    expect(t.ms).toBe(400);
    expect(t.widensMargin).toBe(false);
    t.observe(2_000);
    expect(t.ms).toBe(1_200);
    expect(t.widensMargin).toBe(true);
    t.observe(100);
    expect(t.ms).toBeCloseTo(1_090);
    for (let i = 0; i < 40; i++) t.observe(100);
    expect(t.ms).toBeLessThan(150);
    expect(t.widensMargin).toBe(false);
  });
});
