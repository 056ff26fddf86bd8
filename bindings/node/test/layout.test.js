'use strict';
// Shapes and strides: defaults, bounds (RangeErrors naming the values), non-row-major layouts.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertThrowsCode } = require('./helpers');

const { fromTypedArray, empty, arange } = dlbridge;

test('shape defaults to [length] and strides to row-major', () => {
  const tensor = fromTypedArray(new Float32Array(24), { shape: [2, 3, 4] });
  assert.deepEqual(tensor.shape, [2, 3, 4]);
  assert.deepEqual(tensor.strides, [12, 4, 1]);
  assert.equal(tensor.ndim, 3);
  assert.equal(tensor.size, 24);
  assert.equal(tensor.nbytes, 96);
  assert.deepEqual(tensor.device, { type: 'cpu', id: 0 });
  assert.deepEqual(fromTypedArray(new Int8Array(5)).strides, [1]);
});

test('a shape smaller than the array views its beginning', () => {
  const array = new Int16Array([1, 2, 3, 4, 5, 6, 7]);
  const tensor = fromTypedArray(array, { shape: [2, 2] });
  assert.deepEqual([...tensor.toTypedArray()], [1, 2, 3, 4]);
});

test('shapes and strides reaching outside the typed array are RangeErrors naming them', () => {
  const array = new Float32Array(6);
  assertThrowsCode(
    () => fromTypedArray(array, { shape: [3, 3] }),
    RangeError,
    'ERR_DLBRIDGE_OUT_OF_BOUNDS',
    /24 bytes .*shape \[3, 3\] with strides \[3, 1\] needs bytes 0\.\.36/,
  );
  assertThrowsCode(
    () => fromTypedArray(array, { shape: [4], strides: [2] }),
    RangeError,
    'ERR_DLBRIDGE_OUT_OF_BOUNDS',
    /shape \[4\] with strides \[2\]/,
  );
  assertThrowsCode(
    () => fromTypedArray(array, { shape: [2], strides: [-1] }),
    RangeError,
    'ERR_DLBRIDGE_OUT_OF_BOUNDS',
    /strides \[-1\] needs bytes -4\.\.4/,
  );
  // The typed array's own window counts, not the whole ArrayBuffer behind it.
  const window = new Float32Array(new ArrayBuffer(64), 16, 2);
  assertThrowsCode(() => fromTypedArray(window, { shape: [3] }), RangeError, 'ERR_DLBRIDGE_OUT_OF_BOUNDS', /8 bytes/);
  assertThrowsCode(() => fromTypedArray(array, { offset: 7 }), RangeError, 'ERR_DLBRIDGE_OUT_OF_BOUNDS', /offset 7/);
  assertThrowsCode(() => fromTypedArray(array, { offset: -1 }), RangeError, 'ERR_DLBRIDGE_OUT_OF_BOUNDS', /offset -1/);
});

test('negative or overflowing dimensions and mismatched strides are RangeErrors', () => {
  const array = new Float32Array(6);
  assertThrowsCode(() => fromTypedArray(array, { shape: [2, -3] }), RangeError, 'ERR_DLBRIDGE_NEGATIVE_DIM', /dimension 1 has negative size -3/);
  assertThrowsCode(
    () => fromTypedArray(array, { shape: [2, 3], strides: [1] }),
    RangeError,
    'ERR_DLBRIDGE_STRIDES_MISMATCH',
    /strides \[1\] do not match shape \[2, 3\]/,
  );
  assertThrowsCode(
    () => fromTypedArray(array, { shape: [2], strides: [2 ** 52] }),
    RangeError,
    'ERR_DLBRIDGE_OUT_OF_BOUNDS',
  );
  assertThrowsCode(() => empty([-1]), RangeError, 'ERR_DLBRIDGE_NEGATIVE_DIM', /-1/);
  assertThrowsCode(() => empty([2 ** 40, 2 ** 40]), RangeError, 'ERR_DLBRIDGE_SHAPE_OVERFLOW', /1099511627776/);
  assertThrowsCode(() => arange(-3), RangeError, 'ERR_DLBRIDGE_NEGATIVE_DIM', /-3/);
});

test('zero strides and size-1 dims with any stride are accepted', () => {
  const array = new Float64Array([4, 5]);
  const broadcast = fromTypedArray(array, { shape: [3, 2], strides: [0, 1] });
  assert.deepEqual([...broadcast.toTypedArray({ copy: true })], [4, 5, 4, 5, 4, 5]);
  const odd = fromTypedArray(array, { shape: [1, 2], strides: [99, 1] });
  assert.equal(odd.toTypedArray().buffer, array.buffer);
});

test('non-row-major tensors need copy: true, which gives row-major order', () => {
  const array = new Int32Array([0, 1, 2, 3, 4, 5]);
  const transposed = fromTypedArray(array, { shape: [3, 2], strides: [1, 3] });
  assertThrowsCode(
    () => transposed.toTypedArray(),
    Error,
    'ERR_DLBRIDGE_NOT_CONTIGUOUS',
    /shape \[3, 2\] with strides \[1, 3\] .*copy: true/,
  );
  const copy = transposed.toTypedArray({ copy: true });
  assert.deepEqual([...copy], [0, 3, 1, 4, 2, 5]);
  assert.notEqual(copy.buffer, array.buffer);
  copy[0] = 99;
  assert.equal(array[0], 0);
  const everyOther = fromTypedArray(array, { shape: [3], strides: [2] });
  assertThrowsCode(() => everyOther.toTypedArray({ copy: false }), Error, 'ERR_DLBRIDGE_NOT_CONTIGUOUS');
  assert.deepEqual([...everyOther.toTypedArray({ copy: true })], [0, 2, 4]);
});
