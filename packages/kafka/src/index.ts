export * from './client.js';
export * from './topics.js';
export * from './records.js';
export * from './consume.js';
export * from './table.js';
export * from './batch-stage.js';
export * from './delay.js';
export * from './group-consumer.js';
