import { describe, expect, it, vi } from 'vitest';
import { benchCommand, HELP, parseRates } from '../../../packages/bench/src/command.js';

describe('pnpm bench options', () => {
  it('--help prints every mode and touches no stack', async () => {
    const write = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      // No REACH_HOME nor admin token: reading the stack's endpoints would throw.
      expect(await benchCommand(['--help'], { REACH_HOME: '/nonexistent' })).toBe(0);
      expect(write).toHaveBeenCalledWith(HELP);
    } finally {
      write.mockRestore();
    }
    for (const mode of ['--idle', '--idle-agents', '--sweep', '--rate', '--tracker', '--mix', '--compare', '--save-baseline', '--no-knee']) {
      expect(HELP).toContain(mode);
    }
  });

  it('parses a sweep list', () => {
    expect(parseRates('50,250,1000')).toEqual([50, 250, 1000]);
    expect(() => parseRates('50,x')).toThrow();
  });
});
