export * from './errors.js';
export * from './config.js';
export * from './ids.js';
export * from './logger.js';
export * from './token.js';
export * from './policies.js';
export * from './random.js';
export * from './redact.js';
