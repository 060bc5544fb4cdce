// A CPU-profile preload for any stack process (Node refuses --cpu-prof in NODE_OPTIONS):
//   NODE_OPTIONS="--require $PWD/scripts/profile/cpu-profile.cjs" reach up --detach
// The first SIGUSR2 starts the profiler, the next writes
// $REACH_PROFILE_DIR/<script>-<pid>.cpuprofile (default /tmp/reach-profiles) and stops it.
// `node scripts/profile/top.mjs <file>` prints where the time went.
'use strict';
const inspector = require('node:inspector');
const fs = require('node:fs');
const path = require('node:path');

const dir = process.env.REACH_PROFILE_DIR || '/tmp/reach-profiles';
const name = path.basename(process.argv[1] || 'node').replace(/\.[cm]?js$/, '');
const service = process.argv[1] && process.argv[1].includes('/services/') ? process.argv[1].split('/services/')[1].split('/')[0] : name;
let session = null;

process.on('SIGUSR2', () => {
  if (session === null) {
    session = new inspector.Session();
    session.connect();
    session.post('Profiler.enable', () => session.post('Profiler.setSamplingInterval', { interval: 500 }, () => session.post('Profiler.start')));
    return;
  }
  const s = session;
  session = null;
  s.post('Profiler.stop', (err, res) => {
    if (!err) {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${service}-${process.pid}.cpuprofile`), JSON.stringify(res.profile));
    }
    s.disconnect();
  });
});
