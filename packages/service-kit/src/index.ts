export * from './logger.js';
export * from './metrics.js';
export * from './http.js';
export * from './dead-letter.js';
export * from './service.js';
export * from './status.js';
export * from './receipt.js';
export * from './periodic.js';
