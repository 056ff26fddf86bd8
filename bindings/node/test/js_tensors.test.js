'use strict';
// Tensors over JS memory (`fromTypedArray(ta)` without options) are plain JavaScript objects:
// nothing native until they cross into native code, where their native twin is made once, and
// released with them. They answer every Tensor property as a native tensor over the same
// memory does.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, collect, liveCounts, assertThrowsCode, ARRAY_CASES } = require('./helpers');

const { Tensor, fromTypedArray, addressOf, diagnostics, releasePointer, importPointer, toShared, fromShared } =
  dlbridge;

/** Every property of `Tensor.prototype`, read (or called without arguments) on `t`. */
function everyProperty(t) {
  const answers = {};
  for (const key of Object.getOwnPropertyNames(Tensor.prototype)) {
    if (['constructor', 'close', 'exportPointer', 'set', 'get'].includes(key)) continue;
    const descriptor = Object.getOwnPropertyDescriptor(Tensor.prototype, key);
    const value = descriptor.get ? t[key] : t[key]();
    answers[key] = ArrayBuffer.isView(value) ? [value.constructor.name, ...value] : value;
  }
  answers.get = t.get(1);
  return answers;
}

test('a tensor over JS memory makes nothing native: no tensor, no pin, no finalizer', async () => {
  await collect();
  const before = diagnostics();
  const array = new Float32Array([1, 2, 3, 4]);
  (() => {
    for (let i = 0; i < 10_000; i++) {
      const t = fromTypedArray(array);
      t.set(0, i);
      assert.equal(t.get(0), i);
      t.toTypedArray()[1] = i;
    }
  })();
  const after = diagnostics();
  assert.deepEqual(after, before);
  assert.deepEqual([...array], [9999, 9999, 3, 4]);
});

test('it answers every Tensor property as a native tensor over the same memory', () => {
  for (const { Ctor, dtype, value } of ARRAY_CASES) {
    const array = new Ctor(new Ctor(4).buffer, Ctor.BYTES_PER_ELEMENT, 3);
    array[1] = value;
    const plain = fromTypedArray(array);
    // Importing its own export gives back the tensor exported: its native twin.
    const native = importPointer(plain.exportPointer());
    assert.ok(plain instanceof Tensor && native instanceof Tensor, dtype);
    assert.notEqual(Object.getPrototypeOf(plain), Object.getPrototypeOf(native));
    assert.equal(plain.constructor, Tensor);
    assert.deepEqual(everyProperty(plain), everyProperty(native), dtype);
    assert.equal(plain.dtype, dtype);
    assert.equal(plain.get(1), value);
  }
});

test('options with a layout inside the array make one too, of any shape and strides', async () => {
  await collect();
  const before = liveCounts();
  const array = Float64Array.from({ length: 12 }, (_, i) => i);
  const matrix = fromTypedArray(array, { shape: [3, 4] });
  const columns = fromTypedArray(array, { shape: [4, 3], strides: [1, 4] });
  const reversed = fromTypedArray(array, { shape: [6], strides: [-2], offset: 11 });
  const frozen = fromTypedArray(array, { shape: [2, 2], offset: 2, readonly: true, dtype: 'float64' });
  const empty = fromTypedArray(array, { shape: [0, 5] });
  assert.deepEqual(liveCounts(), before, 'nothing native');
  assert.deepEqual([matrix.shape, matrix.strides, matrix.size, matrix.ndim], [[3, 4], [4, 1], 12, 2]);
  assert.deepEqual([reversed.get(0), reversed.get(5), reversed.byteOffset], [11, 1, 88]);
  assert.equal(reversed.dataPtr, addressOf(array) + 88n);
  reversed.set(1, -9);
  assert.equal(array[9], -9);
  assert.deepEqual([...matrix.toTypedArray()], [...array]);
  assert.equal(matrix.toTypedArray().buffer, array.buffer);
  assert.deepEqual([...frozen.toTypedArray({ copy: true })], [2, 3, 4, 5]);
  assert.deepEqual([frozen.readonly, frozen.byteOffset, empty.size, empty.nbytes], [true, 16, 0, 0]);
  // What a typed array cannot view, or a read-only tensor refuses, native code says.
  assertThrowsCode(() => columns.toTypedArray(), Error, 'ERR_DLBRIDGE_NOT_CONTIGUOUS', /\[4, 3\]/);
  assertThrowsCode(() => frozen.set([0, 0], 1), Error, 'ERR_DLBRIDGE_READ_ONLY');
  assertThrowsCode(() => frozen.toTypedArray(), Error, 'ERR_DLBRIDGE_READ_ONLY');
  assert.equal(columns.get([3, 2]), 11);
  assert.equal(new Float64Array(empty.toTypedArray()).length, 0);
  // Layouts reaching outside the array are refused as the native constructor refuses them.
  assertThrowsCode(() => fromTypedArray(array, { shape: [4, 4] }), RangeError, 'ERR_DLBRIDGE_OUT_OF_BOUNDS');
  assertThrowsCode(() => fromTypedArray(array, { shape: [2], strides: [-1] }), RangeError, 'ERR_DLBRIDGE_OUT_OF_BOUNDS');
  assertThrowsCode(() => fromTypedArray(array, { offset: 13 }), RangeError, 'ERR_DLBRIDGE_OUT_OF_BOUNDS');
  assertThrowsCode(() => fromTypedArray(array, { shape: [-1] }), RangeError, 'ERR_DLBRIDGE_NEGATIVE_DIM');
  assertThrowsCode(() => fromTypedArray(array, { shape: [2], stride: [1] }), TypeError, 'ERR_DLBRIDGE_UNKNOWN_OPTION', /did you mean "strides"/);
});

test('options are read once each, in the native constructor order, before the buffer is checked', () => {
  const array = new Int16Array(8);
  const reads = [];
  const options = {};
  for (const key of ['readonly', 'strides', 'shape', 'offset', 'dtype']) {
    Object.defineProperty(options, key, {
      enumerable: true,
      get() {
        reads.push(key);
        return { shape: [2, 2], strides: undefined, offset: 4, readonly: false, dtype: undefined }[key];
      },
    });
  }
  const t = fromTypedArray(array, options);
  assert.deepEqual(reads, ['dtype', 'offset', 'shape', 'strides', 'readonly']);
  assert.deepEqual([t.shape, t.byteOffset], [[2, 2], 8]);
  reads.length = 0;
  options.constructor; // not an option: no read
  assertThrowsCode(
    () => fromTypedArray(array, Object.defineProperty({ shape: [2] }, 'offset', { enumerable: true, get: () => (reads.push('offset'), 2n ** 70n) })),
    TypeError,
    'ERR_DLBRIDGE_INVALID_ARGUMENT',
    /offset must be an integer/,
  );
  assert.deepEqual(reads, ['offset'], 'read once, then handed to native code as read');
});

test('it is zero-copy both ways: same address, views over the same ArrayBuffer', () => {
  const array = new Float64Array(new ArrayBuffer(64), 16, 4);
  const t = fromTypedArray(array);
  const view = t.toTypedArray();
  assert.equal(view.buffer, array.buffer);
  assert.equal(t.dataPtr, addressOf(array));
  assert.equal(addressOf(view), addressOf(array));
  assert.equal(t.byteOffset, 16);
  view[2] = 7;
  assert.equal(t.get(2), 7);
  t.set(3, 8);
  assert.equal(array[3], 8);
});

test('its native twin is made once, at the first crossing, and released with the tensor', async () => {
  await collect();
  const before = liveCounts();
  const releasedBefore = diagnostics().releasedTensors;
  (() => {
    const array = new Int32Array([5, 6, 7]);
    const t = fromTypedArray(array);
    const addresses = [t.exportPointer(), t.exportPointer({ legacy: true })];
    assert.equal(liveCounts().liveTensors, before.liveTensors + 1, 'one twin for both exports');
    assert.equal(liveCounts().pinnedJsBuffers, before.pinnedJsBuffers + 1);
    const back = importPointer(addresses[0]);
    assert.equal(back.dataPtr, addressOf(array));
    releasePointer(addresses[1], { legacy: true });
    const copy = fromShared(toShared(t));
    assert.deepEqual([...copy.toTypedArray({ copy: true })], [5, 6, 7]);
    copy.close();
    assert.equal(liveCounts().liveTensors, before.liveTensors + 1, 'still the one twin');
  })();
  await collect();
  assert.deepEqual(liveCounts(), before);
  // The twin, and the tensor over the shared-memory copy.
  assert.equal(diagnostics().releasedTensors - releasedBefore, 2, 'each released once');
});

test('close lets go of the twin at once', () => {
  const before = liveCounts();
  const t = fromTypedArray(new Uint8Array(8));
  const view = t.toTypedArray();
  releasePointer(t.exportPointer());
  assert.equal(liveCounts().liveTensors, before.liveTensors + 1);
  t.close();
  t.close();
  assert.equal(liveCounts().liveTensors, before.liveTensors);
  assert.equal(t.closed, true);
  for (const access of [(x) => x.shape, (x) => x.get(0), (x) => x.toTypedArray(), (x) => x.exportPointer()]) {
    assertThrowsCode(() => access(t), Error, 'ERR_DLBRIDGE_CLOSED', /closed/);
  }
  assert.equal(view.length, 8, 'views taken before close keep their memory');
});

test('its state is private: assignments, forged objects and lookalikes reach no memory', () => {
  const t = fromTypedArray(new Float32Array([1, 2, 3]));
  assert.throws(() => {
    t.shape = [1e9];
  }, TypeError);
  Object.defineProperty(t, 'size', { value: 1e9 });
  assert.deepEqual(t.shape, [3]);
  assertThrowsCode(() => t.get(1e6), RangeError, 'ERR_DLBRIDGE_INDEX_OUT_OF_RANGE', /\[1000000\]/);
  assert.deepEqual(Reflect.ownKeys(fromTypedArray(new Float32Array(1))), []);
  const forged = Object.create(Object.getPrototypeOf(t));
  assert.throws(() => forged.shape, TypeError);
  assert.throws(() => forged.get(0), TypeError);
  assertThrowsCode(() => toShared(forged), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  assertThrowsCode(() => toShared(new Proxy(t, {})), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
});

test('what the JavaScript side does not do itself, native code does, with its errors', () => {
  const t = fromTypedArray(new Int8Array(4));
  assertThrowsCode(() => t.set(0, 300), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE');
  assertThrowsCode(() => t.set(0, 1.5), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE');
  assertThrowsCode(() => t.get(-1), RangeError, 'ERR_DLBRIDGE_INDEX_OUT_OF_RANGE');
  assertThrowsCode(() => t.get(0.5), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT');
  t.set([2], 5n);
  assert.equal(t.get([2]), 5);
  assert.deepEqual([...t.toTypedArray({ copy: true })], [0, 0, 5, 0]);
  const floats = fromTypedArray(new Float32Array(2));
  floats.set(0, 0.1);
  assert.equal(floats.get(0), Math.fround(0.1));
  const big = fromTypedArray(new BigInt64Array(1));
  assertThrowsCode(() => big.set(0, 2n ** 63n), RangeError, 'ERR_DLBRIDGE_VALUE_OUT_OF_RANGE');
  big.set(0, 3);
  assert.equal(big.get(0), 3n);
});

test('memory detached under it is refused, never read', () => {
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 2 });
  const t = fromTypedArray(new Float64Array(memory.buffer));
  t.set(0, 4);
  memory.grow(1);
  assertThrowsCode(() => t.get(0), TypeError, 'ERR_DLBRIDGE_DETACHED');
  assertThrowsCode(() => t.set(0, 1), TypeError, 'ERR_DLBRIDGE_DETACHED');
  assertThrowsCode(() => t.toTypedArray(), TypeError, 'ERR_DLBRIDGE_DETACHED');
});

test('its buffer is checked and marked untransferable when the tensor is made', () => {
  const array = new Float32Array(4);
  fromTypedArray(array);
  structuredClone(array.buffer, { transfer: [array.buffer] });
  assert.equal(array.length, 4, 'the buffer was copied, not moved');
  const resizable = new Float32Array(new ArrayBuffer(16, { maxByteLength: 32 }));
  assertThrowsCode(() => fromTypedArray(resizable), TypeError, 'ERR_DLBRIDGE_RESIZABLE');
  const growable = new Float32Array(new SharedArrayBuffer(16, { maxByteLength: 32 }));
  assert.deepEqual(fromTypedArray(growable).shape, [4]);
});
