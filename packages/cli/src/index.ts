// The local-stack building blocks behind `reach up`, for tests and tools that embed them.
export { Supervisor, type ProcessSpec } from './local/supervisor.js';
export { ensurePostgres, ensureRedis } from './local/deps.js';
export { portOpen, waitFor, httpOk } from './local/net.js';
