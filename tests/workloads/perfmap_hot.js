// node --perf-basic-prof perfmap_hot.js SECONDS: the Node.js workload of the
// perfmap plugin's end-to-end test (tests/e2e/perfmap_test.cpp). Nearly all
// of its time is spent in omniprofPerfmapHotFunction, JIT-compiled by V8
// and named only in /tmp/perf-PID.map.
//
// Each call runs long (a few milliseconds) and comes from the event loop
// (setImmediate), one call per turn. Run it with --no-turbo-inlining: after
// half a minute or so TurboFan optimizes node's processImmediate and inlines
// this function into it, which then has no frame (and no perf map entry) of
// its own.
'use strict';

function omniprofPerfmapHotFunction(iterations) {
  let value = 0;
  for (let i = 0; i < iterations; i++) {
    value = (value * 31 + i) % 1000003;
  }
  return value;
}

const seconds = Number(process.argv[2] || 60);
const end = Date.now() + seconds * 1000;
let sink = 0;

function nextTurn() {
  sink ^= omniprofPerfmapHotFunction(2000000);
  if (Date.now() < end) {
    setImmediate(nextTurn);
  } else {
    process.stdout.write(`${sink}\n`);
  }
}

nextTurn();
