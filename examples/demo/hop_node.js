// Node hop of the demo: map the segment, report, add 1 to element `mark` (row-major).
'use strict';
const dlbridge = require('../../bindings/node');

const [handle, mark] = process.argv.slice(2);
const tensor = dlbridge.fromShared(handle, { writable: true });
const values = tensor.toTypedArray(); // a Float32Array over the mapped pages: no copy
let checksum = 0;
values.forEach((v, i) => { checksum += v * (i + 1); });
values[Number(mark)] += 1;
console.log(JSON.stringify({
  runtime: 'node', address: Number(tensor.dataPtr), copied: tensor.copied, checksum,
}));
