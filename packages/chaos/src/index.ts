// @reach/chaos: `pnpm chaos`, kill -9 faults under steady load and the count of what was lost,
// duplicated and stranded (run.ts). The short preset runs in npm test.
export { runChaos, type ChaosReport, type FaultResult } from './run.js';
export { chaosReport } from './report.js';
export { CI_FAULTS, FAULTS, LONG, SHORT, type ChaosOptions, type FaultName } from './options.js';
export { illegalIn, type Verdict } from './verify.js';
// `pnpm fuzz`: generated inputs on every public way in, and what must hold after (fuzz/run.ts).
export { runFuzz, type FuzzOptions, type FuzzReport } from './fuzz/run.js';
export { fuzzReport } from './fuzz/report.js';
