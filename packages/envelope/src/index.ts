export * from './generated/schemas.js';
export * from './schemas.js';
export * from './codec.js';
export * from './validate.js';
export * from './register.js';
export * from './json.js';
export * from './registry-client.js';
