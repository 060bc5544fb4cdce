// Summarises a .cpuprofile written by cpu-profile.cjs: busy share of the wall time, GC,
// and the functions (self time) and packages (self time by node_modules package) that cost most.
//   node scripts/profile/top.mjs /tmp/reach-profiles/router-123.cpuprofile [count]
import { readFileSync } from 'node:fs';

const [file, countArg] = process.argv.slice(2);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const count = Number(countArg ?? 25);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
}
const wall = profile.endTime - profile.startTime;
const fn = new Map();
const pkg = new Map();
let idle = 0;
for (const [id, us] of self) {
  const { callFrame: f } = byId.get(id);
  if (f.functionName === '(idle)') {
    idle += us;
    continue;
  }
  const where = f.url.replace(/^file:\/\//, '').replace(/.*\/(node_modules|packages|services)\//, '$1/');
  const key = `${f.functionName || '(anonymous)'} ${where}:${f.lineNumber + 1}`;
  fn.set(key, (fn.get(key) ?? 0) + us);
  const m = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(f.url);
  const group = m
    ? m[1]
    : f.url.includes('/packages/')
      ? 'reach:' + f.url.split('/packages/')[1].split('/')[0]
      : f.url.includes('/services/')
        ? 'service'
        : f.url
          ? 'node'
          : f.functionName;
  pkg.set(group, (pkg.get(group) ?? 0) + us);
}
const pct = (us) => ((100 * us) / wall).toFixed(1).padStart(5) + ' %';
console.log(`wall ${(wall / 1e6).toFixed(1)} s, busy ${pct(wall - idle)}`);
console.log('\nby package (self time, % of wall):');
for (const [k, v] of [...pkg].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${pct(v)}  ${k}`);
console.log('\nby function (self time, % of wall):');
for (const [k, v] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, count)) console.log(`${pct(v)}  ${k}`);
