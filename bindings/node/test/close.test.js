'use strict';
// Tensor#close: an explicit release that does not wait for the collector.

const test = require('node:test');
const assert = require('node:assert/strict');
const util = require('node:util');
const { dlbridge, assertReleases, assertThrowsCode, collect, liveCounts } = require('./helpers');

const { arange, empty, emptyShared, fromTypedArray, toShared, diagnostics } = dlbridge;

/** Every access a closed tensor refuses. */
const ACCESSES = {
  shape: (t) => t.shape,
  strides: (t) => t.strides,
  dtype: (t) => t.dtype,
  device: (t) => t.device,
  ndim: (t) => t.ndim,
  size: (t) => t.size,
  itemsize: (t) => t.itemsize,
  nbytes: (t) => t.nbytes,
  byteOffset: (t) => t.byteOffset,
  readonly: (t) => t.readonly,
  copied: (t) => t.copied,
  dataPtr: (t) => t.dataPtr,
  toTypedArray: (t) => t.toTypedArray(),
  'toTypedArray copy': (t) => t.toTypedArray({ copy: true }),
  exportPointer: (t) => t.exportPointer(),
  get: (t) => t.get([0]),
  set: (t) => t.set([0], 1),
  toShared: (t) => toShared(t),
  toJSON: (t) => JSON.stringify(t),
};

test('a closed tensor refuses every access with ERR_DLBRIDGE_CLOSED', () => {
  const t = arange(4, 'float32');
  assert.equal(t.closed, false);
  t.close();
  assert.equal(t.closed, true);
  for (const [name, access] of Object.entries(ACCESSES)) {
    const refused = (e) => e.code === 'ERR_DLBRIDGE_CLOSED' && /closed/.test(e.message);
    assert.throws(() => access(t), refused, name);
  }
  assert.equal(util.inspect(t), 'Tensor { closed }');
  assert.equal(String(t), 'Tensor { closed }');
});

test('close releases the memory at once and is idempotent', async () => {
  await collect();
  const before = diagnostics();
  const t = arange(1000, 'float64');
  const over = fromTypedArray(new Float32Array(16));
  // A tensor over JS memory holds nothing native until it crosses into native code: its twin.
  assert.equal(diagnostics().liveTensors - before.liveTensors, 1);
  dlbridge.releasePointer(over.exportPointer());
  assert.equal(diagnostics().liveTensors - before.liveTensors, 2);
  t.close();
  over.close();
  over.close();
  const after = diagnostics();
  assert.equal(after.liveTensors, before.liveTensors, 'released without the collector');
  assert.equal(after.pinnedJsBuffers, before.pinnedJsBuffers, 'the typed array is unpinned');
  assert.equal(after.releasedTensors - before.releasedTensors, 2, 'each deleter ran once');
});

test('views and exports taken before close keep the memory until they are gone', async () => {
  await assertReleases(async () => {
    const t = arange(8, 'int32');
    const view = t.toTypedArray();
    const address = t.exportPointer();
    const live = diagnostics().liveTensors;
    t.close();
    assert.equal(diagnostics().liveTensors, live, 'the view and the export still hold it');
    assert.deepEqual([...view], [0, 1, 2, 3, 4, 5, 6, 7]);
    const again = dlbridge.importPointer(address);
    assert.equal(again.get([7]), 7);
    again.close();
  });
});

const NO_DISPOSE = typeof Symbol.dispose !== 'symbol' && 'this runtime has no Symbol.dispose';

test('Symbol.dispose closes the tensor', { skip: NO_DISPOSE }, () => {
  const t = empty([3], 'uint8');
  t[Symbol.dispose]();
  assert.equal(t.closed, true);
  assertThrowsCode(() => t.size, Error, 'ERR_DLBRIDGE_CLOSED');
});

test('a shared-memory tensor closed in a loop frees its segment each time', () => {
  const before = liveCounts().liveTensors;
  for (let i = 0; i < 300; i++) {
    const { tensor } = emptyShared([64], 'float32');
    tensor.close();
  }
  assert.equal(liveCounts().liveTensors, before);
});

test('a tensor closed by a getter of its own call is refused before its memory is touched', () => {
  const closingOption = (t, name) => ({
    get [name]() {
      t.close();
      return false;
    },
  });
  const calls = {
    toTypedArray: (t) => t.toTypedArray(closingOption(t, 'copy')),
    exportPointer: (t) => t.exportPointer(closingOption(t, 'legacy')),
    get: (t) => {
      const index = [];
      Object.defineProperty(index, 0, { enumerable: true, get: () => (t.close(), 1) });
      return t.get(index);
    },
  };
  for (const [name, call] of Object.entries(calls)) {
    const t = arange(4, 'float32');
    assertThrowsCode(() => call(t), Error, 'ERR_DLBRIDGE_CLOSED', /closed/);
    assert.equal(t.closed, true, name);
  }
});
