'use strict';
// diagnostics(): the native side's counts, as a leak-hunting user reads them.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, collect } = require('./helpers');

const { fromTypedArray, arange, diagnostics } = dlbridge;

/** Makes, in a scope of its own, a tensor over JS memory, one over Rust memory with a view, and
 * an export; returns what diagnostics() said while they lived and the export's address. */
function holdSome() {
  const overJs = fromTypedArray(new Float32Array(4));
  const overRust = arange(4, 'float64');
  const view = overRust.toTypedArray();
  const address = overJs.exportPointer();
  const during = diagnostics();
  assert.equal(view.length, 4);
  return { during, address };
}

test('diagnostics() counts what native code holds, and sees it released', async () => {
  await collect();
  const before = diagnostics();
  assert.deepEqual(Object.keys(before).sort(), [
    'externalBuffers', 'liveTensors', 'pendingExports', 'pinnedJsBuffers', 'releasedTensors',
  ]);
  const { during, address } = holdSome();
  assert.equal(during.liveTensors - before.liveTensors, 2);
  assert.equal(during.pinnedJsBuffers - before.pinnedJsBuffers, 1);
  assert.equal(during.externalBuffers - before.externalBuffers, 1);
  assert.equal(during.pendingExports - before.pendingExports, 1);
  await collect();
  const exportHeld = diagnostics();
  assert.equal(exportHeld.liveTensors - before.liveTensors, 1, 'the export keeps its tensor');
  dlbridge.releasePointer(address);
  await collect();
  const after = diagnostics();
  assert.deepEqual(
    [after.liveTensors, after.pinnedJsBuffers, after.externalBuffers, after.pendingExports],
    [before.liveTensors, before.pinnedJsBuffers, before.externalBuffers, before.pendingExports],
  );
  assert.equal(after.releasedTensors - before.releasedTensors, 2);
});
