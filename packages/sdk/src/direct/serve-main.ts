import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { LocalReach } from './local-reach.js';
import { serveLocalReach } from './serve.js';

/**
 * `node packages/sdk/dist/direct/serve-main.js [--port N] [--host H] [--time-scale X] [--rules FILE]`
 *
 * Runs a LocalReach on one port (serve.ts) and prints one JSON line, `{"url": "http://…"}`, once
 * it listens. REACH_* variables of the environment configure it like the services. It stops on
 * SIGTERM/SIGINT or when its stdin closes, so a parent that dies takes it along (the Python
 * SDK's direct mode runs it as a child this way).
 */
const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'time-scale': { type: 'string', default: '1' },
    rules: { type: 'string' },
  },
});
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('REACH_')));
// REACH_* variables configure it as they configure the services (an unknown one is refused).
const reach = new LocalReach({
  env,
  timeScale: Number(values['time-scale']),
  ...(values.rules ? { rules: readFileSync(values.rules, 'utf8') } : {}),
});
const served = await serveLocalReach(reach, { host: values.host, port: Number(values.port) });
process.stdout.write(`${JSON.stringify({ url: served.url })}\n`);

let closing = false;
const stop = (): void => {
  if (closing) return;
  closing = true;
  void served.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
