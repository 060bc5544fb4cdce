import { defineConfig } from 'vitest/config';

// Two projects: fast unit tests of pure logic, and integration/end-to-end tests that run
// against the real local stack (Kafka, schema registry, PostgreSQL, Redis, the services)
// started by `reach up`. `npm test` starts that stack when it is not already running.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          exclude: ['test/integration/zz-degradation/**', 'test/integration/zz-cluster/**'],
          environment: 'node',
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // One broker on two cores: files share it, so run them one after another.
          fileParallelism: false,
        },
      },
      {
        // Fault injection (PostgreSQL/Redis/Kafka outages): run alone, after everything else
        // (scripts/test.sh runs this project in a second pass), so no other test sees an outage.
        test: {
          name: 'degradation',
          include: ['test/integration/zz-degradation/**/*.test.ts'],
          environment: 'node',
          testTimeout: 180_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        // Second stacks beside the default one (`reach up --brokers 3`, `--instances 2`, own
        // REACH_HOME and ports): they load the machine, so they run alone, last (scripts/test.sh).
        test: {
          name: 'cluster',
          include: ['test/integration/zz-cluster/**/*.test.ts'],
          environment: 'node',
          testTimeout: 240_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
