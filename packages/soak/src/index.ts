// @reach/soak: `pnpm soak --minutes N --rate R`, steady traffic for a long time against the
// running stack, sampled every minute, and whether it stays bounded (run.ts). A short run with
// retention in seconds is an integration test (test/integration/zz-degradation/soak.test.ts).
export { runSoak, type SoakReport } from './run.js';
export { soakReport } from './report.js';
export { DEFAULTS, type SoakOptions } from './options.js';
export { levelsOff, rssFlat, FLAT_WITHIN, type GrowthCheck, type Verdict } from './verdict.js';
export type { Sample } from './sampler.js';
