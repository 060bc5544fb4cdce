export * from './types.js';
export * from './node-types.js';
export { AgentNode } from './agent-node.js';
export { AgentReplacedError } from './agent-replaced.js';
export * from './reach-client.js';
export * from './registry-client.js';
export * from './session.js';
export * from './env.js';
export { DedupeCache, dedupeKey, type DedupeOptions, type Outcome } from './dedupe.js';
export { reconnectDelayMs, RECONNECT_BACKOFF, type BackoffOptions } from './backoff.js';
export { progressIntervalMs } from './delivery-runner.js';
export { LoadTracker } from './load.js';
export { WorkQueue } from './work-queue.js';
export { EarlyBeat, EARLY_BEAT_GAP_MS, BUSY_SHARE } from './early-beat.js';
export { parseServerFrame, type AgentFrame, type ServerFrame, type DeliverFrame, type WelcomeFrame } from './frames.js';
export { payloadBytes } from './payload.js';
export { errorFromBody } from './http.js';
export { tokenLifetime, refreshDelayMs } from './token-expiry.js';
// Handlers throw these; re-exported so an agent needs only the SDK.
export { ReachError, NonRetryableError, ERROR_CODES, type Logger } from '@reach/core';
export { fetchFor, stackClientTls, tlsFromFiles, wsTlsOptions, type ClientTls, type FetchFn } from './tls.js';
export { modeOf, REACH_MODES, type ReachMode } from './mode.js';
// Direct mode's control plane is `@reach/sdk/direct` (loaded only by whoever uses it); its types are here.
export type { LocalReach, LocalReachOptions, SubmitOptions } from './direct/local-reach.js';
export type { MessageRow, TimelineEntry } from './direct/timeline.js';
export type { AgentTransport, AgentConnection, RegistryApi } from './transport.js';
export { workerHandler, type WorkerHandlerOptions } from './worker-handler.js';
