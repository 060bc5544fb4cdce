// @reach/bench: `reach bench` / `pnpm bench`, the project's performance instrument (command.ts
// for the modes). The CLI imports the command; the result shapes are for whoever reads --json.
export { benchCommand } from './command.js';
export type * from './results.js';
// The outside-client rig the chaos command shares: agents registered and connected as raw sockets.
export { forEachLimit, heartbeats, openAgentSocket, raiseQuota, register, type Registered, type StackEndpoints } from './stack.js';
export { benchEnvelope } from './envelope-template.js';
export { ConsumerLag } from './consumer-lag.js';
