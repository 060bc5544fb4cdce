export * from './wire.js';
export * from './errors.js';
export * from './state.js';
export * from './task.js';
export * from './card.js';
export * from './inbound.js';
export * from './outbound.js';
