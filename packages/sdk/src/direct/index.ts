/**
 * `@reach/sdk/direct`: the local control plane of direct mode (docs/direct-mode.md) — apart from
 * the main entry so that agents in queued mode never load it.
 */
export { LocalReach, type LocalReachOptions, type SubmitOptions, type LocalConnection } from './local-reach.js';
export { serveLocalReach, type ServedLocalReach } from './serve.js';
export type { MessageRow, TimelineEntry } from './timeline.js';
