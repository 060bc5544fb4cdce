import { describe, expect, it } from 'vitest';
import { redisConnection } from '@reach/store';

const read = (p: string) => {
  if (p === '/etc/reach/redis-ca.pem') return 'REDIS-CA';
  throw new Error('ENOENT');
};

describe('redisConnection: TLS and passwords through the URL', () => {
  it("passes a URL without ca_file through untouched (password and rediss:// are ioredis's own)", () => {
    expect(redisConnection('redis://:pw@127.0.0.1:6380/2', read)).toEqual({ url: 'redis://:pw@127.0.0.1:6380/2' });
    expect(redisConnection('rediss://cache:6380/0', read)).toEqual({ url: 'rediss://cache:6380/0' });
  });

  it('takes ca_file out of the URL and trusts that CA', () => {
    expect(redisConnection('rediss://default:pw@cache:6380/1?ca_file=/etc/reach/redis-ca.pem', read)).toEqual({
      url: 'rediss://default:pw@cache:6380/1',
      tls: { ca: 'REDIS-CA' },
    });
  });

  it('refuses ca_file on a plaintext URL and an unreadable file, without the password', () => {
    expect(() => redisConnection('redis://:pw@cache/0?ca_file=/etc/reach/redis-ca.pem', read)).toThrow(/needs a rediss:\/\/ \(TLS\) URL/);
    expect(() => redisConnection('rediss://:pw@cache/0?ca_file=/missing.pem', read)).toThrow(/redis:\/\/|rediss:\/\/:\*\*\*@cache/);
    expect(() => redisConnection('rediss://:pw@cache/0?ca_file=/missing.pem', read)).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining(':pw@') }),
    );
  });
});
