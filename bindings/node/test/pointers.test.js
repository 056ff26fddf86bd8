'use strict';
// DLPack managed-tensor pointers (BigInt addresses) for other native addons.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertThrowsCode, assertReleases, liveCounts, collect } = require('./helpers');

const { fromTypedArray, arange, importPointer, releasePointer } = dlbridge;

test('versioned and legacy exports round-trip with the same memory and metadata', () => {
  for (const legacy of [false, true]) {
    const tensor = arange(12, 'int16');
    const address = tensor.exportPointer({ legacy });
    assert.equal(typeof address, 'bigint');
    assert.notEqual(address, 0n);
    const back = importPointer(address, { legacy, readonly: false });
    assert.equal(back.dataPtr, tensor.dataPtr);
    assert.deepEqual(back.shape, [12]);
    assert.equal(back.dtype, 'int16');
    assert.deepEqual([...back.toTypedArray()].slice(0, 3), [0, 1, 2]);
  }
});

test('a legacy import is read-only unless the caller says the memory is writable', () => {
  // A legacy DLManagedTensor cannot say "read-only" (numpy imports such tensors read-only too).
  const tensor = arange(4, 'float32');
  const ro = importPointer(tensor.exportPointer({ legacy: true }), { legacy: true });
  assert.equal(ro.readonly, true);
  assert.equal(ro.dataPtr, tensor.dataPtr);
  assertThrowsCode(() => ro.set(0, 1), Error, 'ERR_DLBRIDGE_READ_ONLY');
  assert.deepEqual([...ro.toTypedArray({ copy: true })], [0, 1, 2, 3]);
  const rw = importPointer(tensor.exportPointer({ legacy: true }), { legacy: true, readonly: false });
  assert.equal(rw.readonly, false);
  rw.set(0, 7);
  assert.equal(tensor.get(0), 7);
  assert.equal(importPointer(tensor.exportPointer()).readonly, false); // versioned: its own flag
});

test('strided and negative-stride layouts survive export and import', () => {
  const array = new Float64Array([0, 1, 2, 3, 4, 5]);
  const reversed = fromTypedArray(array, { shape: [3], strides: [-2], offset: 5 });
  const back = importPointer(reversed.exportPointer());
  assert.deepEqual(back.strides, [-2]);
  assert.deepEqual([...back.toTypedArray({ copy: true })], [5, 3, 1]);
});

test('an export keeps its memory alive until the consumer deletes it, exactly once', async () => {
  await assertReleases(async () => {
    const before = liveCounts();
    let address = (() => arange(100, 'float32').exportPointer())();
    await collect();
    assert.equal(liveCounts().liveTensors, before.liveTensors + 1);
    assert.equal(liveCounts().pendingExports, before.pendingExports + 1);
    releasePointer(address);
    assert.equal(liveCounts().liveTensors, before.liveTensors);
    assert.equal(liveCounts().pendingExports, before.pendingExports);
    address = null;
  });
});

test('a JS typed array stays pinned while only an exported pointer holds it', async () => {
  await assertReleases(async () => {
    const before = liveCounts();
    const address = (() => fromTypedArray(new Float32Array([7, 8, 9])).exportPointer())();
    await collect();
    assert.equal(liveCounts().pinnedJsBuffers, before.pinnedJsBuffers + 1);
    const back = importPointer(address);
    assert.deepEqual([...back.toTypedArray()], [7, 8, 9]);
  });
});

test('importing with the wrong pointer kind is refused before anything is read', () => {
  const tensor = arange(3, 'int32');
  const versioned = tensor.exportPointer();
  assertThrowsCode(
    () => importPointer(versioned, { legacy: true }),
    TypeError,
    'ERR_DLBRIDGE_POINTER_KIND',
    /exported as a DLManagedTensorVersioned/,
  );
  releasePointer(versioned);
  const legacy = tensor.exportPointer({ legacy: true });
  assertThrowsCode(() => importPointer(legacy), TypeError, 'ERR_DLBRIDGE_POINTER_KIND', /legacy/);
  releasePointer(legacy, { legacy: true });
});

test('addresses must be non-null BigInts', () => {
  assertThrowsCode(() => importPointer(0n), TypeError, 'ERR_DLBRIDGE_NULL_POINTER', /null/);
  assertThrowsCode(() => importPointer(1234), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /BigInt address, got the number 1234/);
  assertThrowsCode(() => importPointer(-5n), RangeError, 'ERR_DLBRIDGE_INVALID_ADDRESS', /not an address/);
  assertThrowsCode(() => releasePointer(0n), TypeError, 'ERR_DLBRIDGE_NULL_POINTER');
});
