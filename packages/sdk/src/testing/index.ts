/**
 * Testing kit for agent authors (STYLE practice 8): `createTestEnvironment({ mode })` runs the
 * same test in direct mode (an in-process LocalReach) or queued mode (the local stack);
 * `startTestAgent`/`testClient` work against the stack of `reach up`.
 */
export * from './stack.js';
export {
  createTestEnvironment,
  type TestEnvironment,
  type TestEnvironmentOptions,
  type MessageState,
  type TimelineEvent,
  type SubmitFields,
} from './environment.js';
