export * from './types.js';
export * from './node-types.js';
export { AgentNode } from './agent-node.js';
export * from './reach-client.js';
export * from './registry-client.js';
export * from './session.js';
export * from './env.js';
export { DedupeCache, dedupeKey, type DedupeOptions, type Outcome } from './dedupe.js';
export { reconnectDelayMs, RECONNECT_BACKOFF, type BackoffOptions } from './backoff.js';
export { progressIntervalMs } from './delivery-runner.js';
export { LoadTracker } from './load.js';
export { WorkQueue } from './work-queue.js';
export { parseServerFrame, type AgentFrame, type ServerFrame, type DeliverFrame, type WelcomeFrame } from './frames.js';
export { payloadBytes } from './payload.js';
export { errorFromBody } from './http.js';
export { tokenLifetime, refreshDelayMs } from './token-expiry.js';
// Handlers throw these; re-exported so an agent needs only the SDK.
export { ReachError, NonRetryableError, ERROR_CODES, type Logger } from '@reach/core';
export { fetchFor, stackClientTls, tlsFromFiles, wsTlsOptions, type ClientTls, type FetchFn } from './tls.js';
