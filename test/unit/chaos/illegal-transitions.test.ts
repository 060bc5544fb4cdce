import { describe, expect, it } from 'vitest';
import { illegalIn } from '@reach/chaos';

const ev = (state: string, attempt = 0, agent_id: string | null = 'a') => ({ state, attempt, agent_id });

describe('pnpm chaos: illegal state transitions in a timeline', () => {
  it('accepts a forward path, and a retry that starts again at PENDING with the next attempt', () => {
    expect(
      illegalIn([
        ev('PENDING', 0, null),
        ev('ROUTED'),
        ev('DELIVERING'),
        ev('PENDING', 1, null),
        ev('ROUTED', 1, 'b'),
        ev('DELIVERING', 1, 'b'),
        ev('DELIVERED', 1, 'b'),
      ]),
    ).toBeUndefined();
  });

  it('accepts a stage repeating an event after a crash (same state, same agent): the read model folds it away', () => {
    expect(illegalIn([ev('PENDING', 0, null), ev('ROUTED'), ev('DELIVERING'), ev('ROUTED'), ev('DELIVERING'), ev('DELIVERED')])).toBeUndefined();
  });

  it('flags a state moving back within an attempt, a second final outcome, and a delivery by two agents', () => {
    expect(illegalIn([ev('PENDING', 0, null), ev('DELIVERING'), ev('ROUTED', 0, 'b')])).toBe('attempt 0 went back to ROUTED');
    expect(illegalIn([ev('DELIVERED'), ev('DEAD', 0, null)])).toBe('both DELIVERED and DEAD');
    expect(illegalIn([ev('DELIVERED', 0, 'a'), ev('DELIVERED', 0, 'b')])).toBe('DELIVERED by 2 agents');
  });
});
