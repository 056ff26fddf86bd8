'use strict';
// Lifetimes: JS buffers pinned while any holder lives, producer deleters run exactly once when
// the last JS view is collected, detached and resizable buffers refused.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, collect, liveCounts, assertReleases, assertThrowsCode, gcWatcher } = require('./helpers');

const { fromTypedArray, empty, importPointer, addressOf, diagnostics, _testHooks } = dlbridge;

test('10k tensors of every origin are all released after gc()', async () => {
  await collect();
  const before = liveCounts();
  const releasedBefore = diagnostics().releasedTensors;
  const N = 10_000;
  (() => {
    for (let i = 0; i < N; i++) {
      switch (i % 4) {
        case 0: // JS memory, viewed back: a plain JS object, nothing native
          fromTypedArray(new Float32Array(16)).toTypedArray()[0] = i;
          break;
        case 1: // Rust memory behind an external ArrayBuffer
          empty([16], 'int32').toTypedArray()[0] = i;
          break;
        case 2: // our own export, imported again
          importPointer(empty([4], 'uint8').exportPointer()).toTypedArray();
          break;
        default: // an anonymous (foreign-style) export of a JS-memory tensor's native twin:
          // validated, wrapped, deleter on drop
          importPointer(_testHooks.exportAnonymous(fromTypedArray(new Int16Array(8)))).toTypedArray();
      }
    }
  })();
  const during = liveCounts();
  assert.ok(during.liveTensors > before.liveTensors, 'tensors are alive before collection');
  await collect(60);
  assert.deepEqual(liveCounts(), before);
  // One release per native tensor (none for the plain JS ones, a quarter; one for each twin, a
  // quarter), plus one per foreign wrapper (a quarter).
  assert.equal(diagnostics().releasedTensors - releasedBefore, N);
});

test('a foreign producer\'s deleter runs exactly once, when the last view is collected', async () => {
  await assertReleases(async () => {
    const base = liveCounts();
    let view = (() => {
      const address = _testHooks.exportAnonymous(empty([8], 'float64'));
      assert.equal(liveCounts().pendingExports, base.pendingExports + 1);
      return importPointer(address).toTypedArray();
    })();
    await collect();
    // The Tensor object is gone, the view still holds the producer's memory.
    assert.equal(liveCounts().pendingExports, base.pendingExports + 1);
    view[7] = 1;
    view = null;
    await collect();
    assert.equal(liveCounts().pendingExports, base.pendingExports);
  });
});

test('the typed array behind a tensor stays alive without any JS reference to it', async () => {
  let tensor = (() => {
    const array = new Float64Array(1 << 16).fill(3);
    return fromTypedArray(array);
  })();
  await collect();
  const view = tensor.toTypedArray();
  assert.equal(view[65535], 3);
  tensor = null;
  await collect();
  assert.equal(view[0], 3);
});

test('a pinned typed array becomes collectable once every holder let go', async () => {
  const watcher = gcWatcher();
  let address = (() => {
    const array = new Float32Array(1 << 10);
    watcher.watch(array.buffer);
    const tensor = fromTypedArray(array);
    tensor.toTypedArray();
    return tensor.exportPointer();
  })();
  await collect();
  assert.equal(watcher.collected(), 0, 'pinned by the exported pointer');
  dlbridge.releasePointer(address);
  address = null;
  await collect();
  assert.equal(watcher.collected(), 1, 'the strong reference was deleted');
});

test('detached ArrayBuffers are refused with a TypeError', () => {
  const array = new Float32Array(4);
  structuredClone(array.buffer, { transfer: [array.buffer] });
  assert.equal(array.buffer.byteLength, 0);
  assertThrowsCode(() => fromTypedArray(array), TypeError, 'ERR_DLBRIDGE_DETACHED', /detached/);
  assertThrowsCode(() => addressOf(array), TypeError, 'ERR_DLBRIDGE_DETACHED');
});

test('a buffer shared with native code cannot be transferred away (it is copied instead)', () => {
  const array = new Int32Array([1, 2, 3]);
  const tensor = fromTypedArray(array);
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(array.buffer, [array.buffer]);
  port1.close();
  port2.close();
  assert.equal(array.buffer.byteLength, 12, 'still attached');
  const copy = structuredClone(array.buffer, { transfer: [array.buffer] });
  assert.equal(array.buffer.byteLength, 12, 'still attached');
  assert.equal(copy.byteLength, 12);
  assert.deepEqual([...tensor.toTypedArray()], [1, 2, 3]);
});

test('resizable ArrayBuffers are refused; SharedArrayBuffers are shared', () => {
  const resizable = new ArrayBuffer(16, { maxByteLength: 64 });
  assertThrowsCode(() => fromTypedArray(new Float32Array(resizable)), TypeError, 'ERR_DLBRIDGE_RESIZABLE', /resizable/);
  const shared = new Int32Array(new SharedArrayBuffer(16));
  const tensor = fromTypedArray(shared);
  assert.equal(tensor.dataPtr, addressOf(shared));
  assert.equal(tensor.toTypedArray().buffer, shared.buffer);
});
