export * from './traceparent.js';
export * from './tracer.js';
