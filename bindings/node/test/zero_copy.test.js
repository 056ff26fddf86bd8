'use strict';
// Zero-copy in both directions: same addresses, writes seen on both sides, one ArrayBuffer per
// memory block.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, collect } = require('./helpers');

const { fromTypedArray, empty, arange, importPointer, addressOf, _testHooks } = dlbridge;

test('a tensor is the typed array memory: same address, writes visible both ways', () => {
  const array = new Float32Array([1, 2, 3, 4, 5, 6]);
  const tensor = fromTypedArray(array, { shape: [2, 3] });
  assert.equal(tensor.dataPtr, addressOf(array));
  assert.equal(tensor.copied, false);
  const view = tensor.toTypedArray();
  assert.equal(addressOf(view), addressOf(array));
  array[5] = 60;
  assert.equal(view[5], 60);
  view[0] = 10;
  assert.equal(array[0], 10);
});

test('byteOffset is honoured: subarrays and pooled Buffers keep their address', () => {
  const backing = new Float64Array(16).map((_, i) => i);
  const slice = backing.subarray(5, 9);
  const tensor = fromTypedArray(slice);
  assert.equal(tensor.byteOffset, 5 * 8);
  assert.equal(tensor.dataPtr, addressOf(slice));
  assert.equal(tensor.dataPtr, addressOf(backing) + 40n);
  const view = tensor.toTypedArray();
  assert.equal(view.buffer, backing.buffer);
  assert.equal(view.byteOffset, 40);
  assert.deepEqual([...view], [5, 6, 7, 8]);

  const pooled = Buffer.from('hello dlbridge');
  const bytes = fromTypedArray(pooled);
  assert.equal(bytes.dataPtr, addressOf(pooled));
  assert.equal(bytes.byteOffset, pooled.byteOffset);
  assert.equal(Buffer.from(bytes.toTypedArray()).toString(), 'hello dlbridge');
});

test('the offset option places element 0 inside the array, for reversed views', () => {
  const array = new Int32Array([0, 1, 2, 3, 4, 5]);
  const reversed = fromTypedArray(array, { shape: [6], strides: [-1], offset: 5 });
  assert.equal(reversed.dataPtr, addressOf(array) + 20n);
  assert.equal(reversed.byteOffset, 20);
  assert.deepEqual([...reversed.toTypedArray({ copy: true })], [5, 4, 3, 2, 1, 0]);
  const tail = fromTypedArray(array, { offset: 2 });
  assert.deepEqual(tail.shape, [4]);
  assert.deepEqual([...tail.toTypedArray()], [2, 3, 4, 5]);
});

test('Rust memory is viewed in place, and writes reach Rust', () => {
  const tensor = arange(8, 'float64');
  const view = tensor.toTypedArray();
  assert.equal(addressOf(view), tensor.dataPtr);
  view[3] = 33;
  const again = tensor.toTypedArray({ copy: true });
  assert.equal(again[3], 33);
  assert.notEqual(addressOf(again), tensor.dataPtr);
});

test('every view of one memory block shares one ArrayBuffer', () => {
  const tensor = empty([4, 4], 'int32');
  const a = tensor.toTypedArray();
  const b = tensor.toTypedArray();
  assert.notEqual(a, b);
  assert.equal(a.buffer, b.buffer);
  // Another Tensor object over the same memory (a consumer's import of our export) reuses it.
  const reimported = importPointer(tensor.exportPointer());
  assert.equal(reimported.toTypedArray().buffer, a.buffer);
  // So does a tensor over the view itself: the view's buffer is the block's.
  assert.equal(fromTypedArray(a).toTypedArray().buffer, a.buffer);
});

test('a synchronous loop re-importing one block views it in place, across collections', () => {
  const tensor = empty([256], 'float32');
  for (let i = 0; i < 3000; i++) {
    const again = importPointer(_testHooks.exportAnonymous(tensor));
    const view = again.toTypedArray();
    assert.equal(again.copied, false);
    assert.equal(addressOf(view), tensor.dataPtr);
    if (i % 500 === 0) global.gc(); // collects earlier views; their finalizers wait for a later turn
  }
});

test('JS memory exported and imported again comes back as the same ArrayBuffer', () => {
  const array = new Uint16Array([1, 2, 3]);
  const back = importPointer(fromTypedArray(array).exportPointer());
  assert.equal(back.toTypedArray().buffer, array.buffer);
  assert.equal(back.dataPtr, addressOf(array));
});

test('a tensor made in Rust outlives the JS arrays over it, and they outlive it', async () => {
  const tensor = arange(1024, 'int32');
  (() => {
    const view = tensor.toTypedArray();
    view[0] = 7;
  })();
  await collect();
  const later = tensor.toTypedArray();
  assert.equal(later[0], 7);
  assert.equal(later[1023], 1023);

  let orphan = (() => arange(1000, 'float64').toTypedArray())();
  await collect();
  assert.equal(orphan[999], 999);
  orphan = null;
});

test('empty tensors give empty typed arrays', () => {
  const tensor = empty([0, 3], 'float32');
  assert.equal(tensor.size, 0);
  const view = tensor.toTypedArray();
  assert.ok(view instanceof Float32Array);
  assert.equal(view.length, 0);
  const fromEmpty = fromTypedArray(new Float64Array(0));
  assert.deepEqual(fromEmpty.shape, [0]);
  assert.equal(fromEmpty.toTypedArray().length, 0);
});

test('inspecting a tensor shows its metadata', () => {
  const { inspect } = require('node:util');
  const tensor = fromTypedArray(new Float32Array(6), { shape: [2, 3], readonly: true });
  assert.equal(
    inspect(tensor),
    "Tensor { dtype: 'float32', shape: [2, 3], strides: [3, 1], device: 'cpu:0', readonly }",
  );
});

test('String() and JSON.stringify describe a tensor, not its elements', () => {
  const tensor = fromTypedArray(new Int32Array(6), { shape: [3, 2], strides: [1, 3] });
  const described = "Tensor { dtype: 'int32', shape: [3, 2], strides: [1, 3], device: 'cpu:0' }";
  assert.equal(String(tensor), described);
  assert.equal(`${tensor}`, described);
  assert.deepEqual(JSON.parse(JSON.stringify({ tensor })), {
    tensor: {
      dtype: 'int32',
      shape: [3, 2],
      strides: [1, 3],
      device: { type: 'cpu', id: 0 },
      readonly: false,
      copied: false,
    },
  });
});

test('0-d tensors view one element', () => {
  const array = new Float32Array([2.5, 9]);
  const scalar = fromTypedArray(array, { shape: [] });
  assert.equal(scalar.ndim, 0);
  assert.equal(scalar.size, 1);
  assert.deepEqual(scalar.strides, []);
  const view = scalar.toTypedArray();
  assert.equal(view.length, 1);
  assert.equal(view[0], 2.5);
});
