'use strict';
// Every dtype: typed arrays in, typed arrays out, reinterpretations, Rust-made tensors.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertThrowsCode, ARRAY_CASES } = require('./helpers');

const { fromTypedArray, empty, arange, addressOf } = dlbridge;

test('every typed array class becomes a tensor of its dtype and comes back as a view', () => {
  for (const { Ctor, dtype, value, viewCtor = Ctor } of ARRAY_CASES) {
    const array = new Ctor(6);
    array[4] = value;
    const tensor = fromTypedArray(array);
    assert.equal(tensor.dtype, dtype, Ctor.name);
    assert.deepEqual(tensor.shape, [6]);
    assert.equal(tensor.itemsize, Ctor.BYTES_PER_ELEMENT);
    assert.equal(tensor.dataPtr, addressOf(array));
    const view = tensor.toTypedArray();
    assert.ok(view instanceof viewCtor, `${Ctor.name} -> ${view.constructor.name}`);
    assert.equal(view.buffer, array.buffer, Ctor.name);
    assert.equal(view[4], array[4], Ctor.name);
  }
});

test('Uint16Array reads as float16 or bfloat16 (raw bits), Uint8Array as bool', () => {
  const bits = new Uint16Array([0x3c00, 0xc000]); // 1.0, -2.0 in float16
  for (const dtype of ['float16', 'bfloat16']) {
    const tensor = fromTypedArray(bits, { dtype });
    assert.equal(tensor.dtype, dtype);
    const view = tensor.toTypedArray();
    assert.ok(view instanceof Uint16Array);
    assert.equal(view.buffer, bits.buffer);
    assert.deepEqual([...view], [0x3c00, 0xc000]);
  }
  const mask = new Uint8Array([1, 0, 1]);
  const tensor = fromTypedArray(mask, { dtype: 'bool' });
  assert.equal(tensor.dtype, 'bool');
  assert.ok(tensor.toTypedArray() instanceof Uint8Array);
  assert.equal(fromTypedArray(new Uint8ClampedArray(2), { dtype: 'bool' }).dtype, 'bool');
  assert.equal(fromTypedArray(new Uint8Array(2), { dtype: 'float8_e4m3fn' }).dtype, 'float8_e4m3fn');
});

test('complex numbers are interleaved pairs of their float array', () => {
  const pairs = new Float32Array([1, 2, 3, 4, 5, 6]);
  const tensor = fromTypedArray(pairs, { dtype: 'complex64' });
  assert.equal(tensor.dtype, 'complex64');
  assert.deepEqual(tensor.shape, [3]);
  assert.equal(tensor.itemsize, 8);
  const view = tensor.toTypedArray();
  assert.ok(view instanceof Float32Array);
  assert.equal(view.length, 6);
  assertThrowsCode(
    () => fromTypedArray(new Float64Array(3), { dtype: 'complex128' }),
    RangeError,
    'ERR_DLBRIDGE_OUT_OF_BOUNDS',
    /Float64Array of 3 elements holds no whole number of complex128/,
  );
});

test('a dtype the array type cannot view is a TypeError naming both', () => {
  assertThrowsCode(
    () => fromTypedArray(new Float32Array(2), { dtype: 'int32' }),
    TypeError,
    'ERR_DLBRIDGE_DTYPE_MISMATCH',
    /int32 .*Int32Array.*Float32Array/,
  );
  assertThrowsCode(
    () => fromTypedArray(new Uint8Array(2), { dtype: 'float16' }),
    TypeError,
    'ERR_DLBRIDGE_DTYPE_MISMATCH',
    /float16/,
  );
  assertThrowsCode(
    () => fromTypedArray(new Uint8Array(2), { dtype: 'float33' }),
    TypeError,
    'ERR_DLBRIDGE_UNKNOWN_DTYPE',
    /"float33"/,
  );
});

const RUST_DTYPES = [
  ['bool', Uint8Array, [0, 1, 1, 1]],
  ['int8', Int8Array, [0, 1, 2, 3]],
  ['int16', Int16Array, [0, 1, 2, 3]],
  ['int32', Int32Array, [0, 1, 2, 3]],
  ['int64', BigInt64Array, [0n, 1n, 2n, 3n]],
  ['uint8', Uint8Array, [0, 1, 2, 3]],
  ['uint16', Uint16Array, [0, 1, 2, 3]],
  ['uint32', Uint32Array, [0, 1, 2, 3]],
  ['uint64', BigUint64Array, [0n, 1n, 2n, 3n]],
  ['float16', Uint16Array, [0x0000, 0x3c00, 0x4000, 0x4200]],
  ['bfloat16', Uint16Array, [0x0000, 0x3f80, 0x4000, 0x4040]],
  ['float32', Float32Array, [0, 1, 2, 3]],
  ['float64', Float64Array, [0, 1, 2, 3]],
  ['complex64', Float32Array, [0, 0, 1, 0, 2, 0, 3, 0]],
  ['complex128', Float64Array, [0, 0, 1, 0, 2, 0, 3, 0]],
];

test('arange and empty make every dtype in Rust memory, viewed by its typed array', () => {
  for (const [dtype, Ctor, expected] of RUST_DTYPES) {
    const tensor = arange(4, dtype);
    assert.equal(tensor.dtype, dtype);
    const view = tensor.toTypedArray();
    assert.ok(view instanceof Ctor, `${dtype} -> ${view.constructor.name}`);
    assert.deepEqual([...view], expected, dtype);
    assert.equal(addressOf(view), tensor.dataPtr, dtype);
    const zeros = empty([2, 2], dtype).toTypedArray();
    assert.ok(zeros instanceof Ctor);
    assert.ok(zeros.every((x) => x == 0), dtype);
  }
  assert.equal(empty([3]).dtype, 'float32');
  assert.equal(arange(3).dtype, 'float32');
  assert.deepEqual(empty(5).shape, [5]);
  assert.equal(BigInt(arange(3n, 'int64').size), 3n);
});

test('dtypes beyond the typed-array classes keep their names and byte views', () => {
  const fp8 = empty([3], 'float8_e5m2');
  assert.equal(fp8.dtype, 'float8_e5m2');
  assert.ok(fp8.toTypedArray() instanceof Uint8Array);
  const vector = empty([2], 'float32x4');
  assert.equal(vector.dtype, 'float32x4');
  assert.equal(vector.toTypedArray().length, 8);
  const packed = empty([4], 'float4_e2m1fn');
  assertThrowsCode(() => packed.toTypedArray(), TypeError, 'ERR_DLBRIDGE_NO_TYPED_ARRAY', /float4_e2m1fn/);
});
