import { describe, expect, it } from 'vitest';
import { registryConnection } from '@reach/envelope';

describe('registryConnection: basic auth from the URL, CA from REACH_CA_FILE', () => {
  it('a plain URL is used as it is', () => {
    expect(registryConnection('http://127.0.0.1:8081')).toEqual({ host: 'http://127.0.0.1:8081' });
  });

  it('userinfo becomes basic auth and leaves the URL the client sees', () => {
    const c = registryConnection('https://sr%40team:p%3Ass@registry.example:8081/');
    expect(c.host).toBe('https://registry.example:8081');
    expect(c.auth).toEqual({ username: 'sr@team', password: 'p:ss' });
    expect(c.authorization).toBe(`Basic ${Buffer.from('sr@team:p:ss').toString('base64')}`);
    expect(c.agent).toBeUndefined();
  });

  it('an https registry with a CA gets an agent trusting it; http ignores the CA', () => {
    expect(registryConnection('https://registry:8081', { ca: 'PEM' }).agent?.options.ca).toBe('PEM');
    expect(registryConnection('http://registry:8081', { ca: 'PEM' }).agent).toBeUndefined();
  });
});
