export * from './capability-name.js';
export * from './descriptor.js';
export * from './qos.js';
export * from './agent-record.js';
export * from './capability-stats.js';
