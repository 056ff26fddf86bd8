'use strict';
// Tensor.get / Tensor.set: one element read or written in place through the strides, for every
// layout and dtype, bounds-checked, read-only enforced, with typed errors.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertThrowsCode } = require('./helpers');

const { fromTypedArray, importPointer, empty, arange } = dlbridge;

test('bool bytes other than 0 and 1 are refused by get, naming the index and the byte', () => {
  // dlbridge's one bool rule, the same in every frontend: [0, 1, 2, 255] are not all booleans.
  const bytes = new Uint8Array([0, 1, 2, 255]);
  const t = fromTypedArray(bytes, { dtype: 'bool' });
  assert.equal(t.get(0), false);
  assert.equal(t.get(1), true);
  assertThrowsCode(() => t.get(2), RangeError, 'ERR_DLBRIDGE_INVALID_BOOL', /index \[2\] holds byte 0x02/);
  assertThrowsCode(() => t.get(3), RangeError, 'ERR_DLBRIDGE_INVALID_BOOL', /index \[3\] holds byte 0xff/);
  assert.deepEqual([...t.toTypedArray()], [0, 1, 2, 255]); // the raw bytes stay visible
  t.set(2, true);
  assert.equal(t.get(2), true);
});

test('get reads through column-major, strided and negative strides; set writes the producer memory', () => {
  const array = new Float64Array(48).map((_, i) => i);
  const layouts = [
    { options: { shape: [3, 4], strides: [1, 3] }, at: (r, c) => r + 3 * c },
    { options: { shape: [3, 4], strides: [16, 2] }, at: (r, c) => 16 * r + 2 * c },
    { options: { shape: [3, 4], strides: [4, -1], offset: 3 }, at: (r, c) => 4 * r + 3 - c },
  ];
  for (const { options, at } of layouts) {
    const tensor = fromTypedArray(array, options);
    for (let r = 0; r < 3; r++) {
      for (let c = 0; c < 4; c++) assert.equal(tensor.get([r, c]), array[at(r, c)]);
    }
    tensor.set([2, 1], -7.5);
    assert.equal(array[at(2, 1)], -7.5, `strides ${options.strides}`);
    array[at(2, 1)] = at(2, 1);
  }
});

test('a write through an imported pointer is seen by the producer (same memory)', () => {
  const array = new Int32Array([1, 2, 3, 4, 5, 6]);
  const producer = fromTypedArray(array, { shape: [2, 3], strides: [1, 2] });
  const imported = importPointer(producer.exportPointer());
  assert.equal(imported.dataPtr, producer.dataPtr);
  imported.set([1, 2], 42);
  assert.equal(array[5], 42);
  assert.equal(producer.get([1, 2]), 42);
});

test('every dtype reads and writes its own JS value type', () => {
  const cases = [
    ['bool', new Uint8Array([0, 1]), true, false],
    ['int8', new Int8Array([0, -5]), -5, -128],
    ['int16', new Int16Array([0, -300]), -300, 32767],
    ['int32', new Int32Array([0, -70000]), -70000, -(2 ** 31)],
    ['int64', new BigInt64Array([0n, -(2n ** 40n)]), -(2n ** 40n), -(2n ** 63n)],
    ['uint8', new Uint8Array([0, 200]), 200, 255],
    ['uint16', new Uint16Array([0, 60000]), 60000, 65535],
    ['uint32', new Uint32Array([0, 4e9]), 4e9, 2 ** 32 - 1],
    ['uint64', new BigUint64Array([0n, 2n ** 63n]), 2n ** 63n, 2n ** 64n - 1n],
    ['float16', new Uint16Array([0, 0x3e00]), 1.5, -0.25],
    ['bfloat16', new Uint16Array([0, 0x3fc0]), 1.5, -0.25],
    ['float32', new Float32Array([0, 0.5]), 0.5, -3.25],
    ['float64', new Float64Array([0, Math.PI]), Math.PI, -1e300],
    ['complex64', new Float32Array([0, 0, 1.5, -2]), [1.5, -2], [42, 0]],
    ['complex128', new Float64Array([0, 0, 0.1, 0.2]), [0.1, 0.2], [-1, 1e-300]],
  ];
  for (const [dtype, array, second, written] of cases) {
    const options = ['bool', 'float16', 'bfloat16', 'complex64', 'complex128'].includes(dtype) ? { dtype } : {};
    const tensor = fromTypedArray(array, options);
    assert.equal(tensor.dtype, dtype);
    assert.deepEqual(tensor.get([1]), second, dtype);
    tensor.set(0, written);
    assert.deepEqual(tensor.get(0), written, dtype);
  }
});

test('float16 and bfloat16 writes store the nearest value, and the bits are the format\'s', () => {
  const bits = new Uint16Array(2);
  const half = fromTypedArray(bits, { dtype: 'float16' });
  half.set(0, 1 + 2 ** -11); // a tie between 1 and the next float16: rounds to even
  assert.equal(bits[0], 0x3c00);
  half.set(1, 65504);
  assert.equal(bits[1], 0x7bff);
  const brain = fromTypedArray(bits, { dtype: 'bfloat16' });
  brain.set(0, -2);
  assert.equal(bits[0], 0xc000);
});

test('integer dtypes take numbers and BigInts in range, and name the value they refuse', () => {
  const tensor = fromTypedArray(new Int8Array(1));
  tensor.set(0, 127n);
  assert.equal(tensor.get(0), 127);
  assertThrowsCode(() => tensor.set(0, 128), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE', /the number 128 .*int8/);
  assertThrowsCode(() => tensor.set(0, 2.5), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE', /the number 2.5/);
  assertThrowsCode(() => tensor.set(0, NaN), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE', /NaN/);
  const wide = fromTypedArray(new BigUint64Array(1));
  assertThrowsCode(() => wide.set(0, -1n), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE', /-1n .*uint64/);
  assertThrowsCode(() => wide.set(0, 2n ** 64n), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE', /uint64/);
  assertThrowsCode(() => tensor.set(0, '1'), TypeError, 'ERR_DLBRIDGE_INVALID_VALUE', /set: an int8 element takes an integer.*the string "1"/);
  assert.equal(tensor.get(0), 127);
});

test('values of the wrong JS type are TypeErrors naming the dtype', () => {
  assertThrowsCode(() => empty([1], 'bool').set(0, 1), TypeError, 'ERR_DLBRIDGE_INVALID_VALUE', /bool element takes a boolean, got the number 1/);
  assertThrowsCode(() => empty([1], 'float32').set(0, 1n), TypeError, 'ERR_DLBRIDGE_INVALID_VALUE', /float32 element takes a number/);
  for (const bad of [[1], [1, 2, 3], ['a', 1], 5]) {
    assertThrowsCode(() => empty([1], 'complex64').set(0, bad), TypeError, 'ERR_DLBRIDGE_INVALID_VALUE', /\[re, im\]/);
  }
});

test('indices are bounds-checked: count, range, sign and integer-ness', () => {
  const tensor = arange(6, 'float32');
  const matrix = fromTypedArray(new Float32Array(6), { shape: [2, 3] });
  for (const [t, index] of [
    [tensor, 6],
    [tensor, -1],
    [tensor, [0, 0]],
    [matrix, [2, 0]],
    [matrix, [0, 3]],
    [matrix, [1]],
    [matrix, []],
  ]) {
    assertThrowsCode(() => t.get(index), RangeError, 'ERR_DLBRIDGE_INDEX_OUT_OF_RANGE', /out of bounds for shape/);
    assertThrowsCode(() => t.set(index, 1), RangeError, 'ERR_DLBRIDGE_INDEX_OUT_OF_RANGE', /out of bounds for shape/);
  }
  assertThrowsCode(() => tensor.get(1.5), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /get: index must be an integer, got the number 1.5/);
  assertThrowsCode(() => matrix.get(['0', 1]), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /index\[0\]/);
  assertThrowsCode(() => empty([0, 3]).get([0, 0]), RangeError, 'ERR_DLBRIDGE_INDEX_OUT_OF_RANGE', /\[0, 3\]/);
});

test('0-d tensors take the empty index', () => {
  const tensor = fromTypedArray(new Uint16Array([7]), { shape: [] });
  assert.equal(tensor.get([]), 7);
  tensor.set([], 9);
  assert.equal(tensor.get([]), 9);
});

test('read-only tensors can be read but never written', () => {
  const array = new Float32Array([1, 2, 3, 4]);
  const tensor = fromTypedArray(array, { shape: [2, 2], strides: [1, 2], readonly: true });
  assert.equal(tensor.get([1, 0]), 2);
  assertThrowsCode(() => tensor.set([1, 0], 5), Error, 'ERR_DLBRIDGE_READ_ONLY', /read-only/);
  const imported = importPointer(tensor.exportPointer());
  assertThrowsCode(() => imported.set([0, 0], 5), Error, 'ERR_DLBRIDGE_READ_ONLY', /read-only/);
  assert.deepEqual([...array], [1, 2, 3, 4]);
});
