export * from './policy.js';
export * from './breakers.js';
export * from './cache.js';
export * from './config.js';
export * from './endpoint-breakers.js';
