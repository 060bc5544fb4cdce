// @reach/bench: `reach bench` / `pnpm bench`, the project's performance instrument (command.ts
// for the modes). The CLI imports the command; the result shapes are for whoever reads --json.
export { benchCommand } from './command.js';
export type * from './results.js';
