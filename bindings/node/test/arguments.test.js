'use strict';
// Argument checking: TypeErrors that name the function, the argument and what was passed.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertThrowsCode } = require('./helpers');

const { fromTypedArray, empty, arange, addressOf, Tensor } = dlbridge;

test('fromTypedArray wants a typed array', () => {
  for (const [value, described] of [
    [[1, 2], /got an array/],
    [new DataView(new ArrayBuffer(4)), /got a DataView/],
    [new ArrayBuffer(4), /got an ArrayBuffer/],
    [{ length: 2 }, /got an object/],
    ['abc', /got the string "abc"/],
    [undefined, /got undefined/],
  ]) {
    assertThrowsCode(() => fromTypedArray(value), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', described);
  }
});

test('toTypedArray works on dlbridge Tensors only, whatever the receiver', () => {
  const { toTypedArray } = Tensor.prototype;
  const lookalike = Object.create(Tensor.prototype);
  for (const [receiver, described] of [
    [lookalike, /got an object/],
    [{}, /got an object/],
    [new Float32Array(4), /got a typed array/],
    [[1, 2], /got an array/],
    // A primitive receiver becomes its wrapper object, a missing one the global object.
    [5, /got an object/],
    [undefined, /got an object/],
    [null, /got an object/],
  ]) {
    assertThrowsCode(() => toTypedArray.call(receiver), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', described);
  }
  const tensor = fromTypedArray(new Float32Array([1, 2]));
  assert.deepEqual([...toTypedArray.call(tensor)], [1, 2]);
});

test('options are objects, and their values have the documented types', () => {
  const array = new Float32Array(4);
  assertThrowsCode(() => fromTypedArray(array, 5), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /options must be an object/);
  assertThrowsCode(() => fromTypedArray(array, { shape: '4' }), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /shape must be an array of integers, got the string "4"/);
  assertThrowsCode(() => fromTypedArray(array, { shape: [2.5] }), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /shape\[0\] must be an integer, got the number 2.5/);
  assertThrowsCode(() => fromTypedArray(array, { strides: [NaN] }), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /strides\[0\] .*NaN/);
  assertThrowsCode(() => fromTypedArray(array, { readonly: 1 }), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /readonly must be a boolean, got the number 1/);
  assertThrowsCode(() => fromTypedArray(array, { dtype: 16 }), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /dtype must be a dtype name string/);
  assertThrowsCode(() => fromTypedArray(array).toTypedArray({ copy: 'no' }), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /toTypedArray: copy must be a boolean/);
  // Undefined and null mean "not given"; BigInt dimensions are integers too.
  assert.deepEqual(fromTypedArray(array, { shape: undefined, readonly: null }).shape, [4]);
  assert.deepEqual(fromTypedArray(array, { shape: [2n, 2n] }).shape, [2, 2]);
});

test('unknown option keys are a TypeError naming the key and the option meant', () => {
  const array = new Float32Array(4);
  const tensor = fromTypedArray(array);
  for (const [call, pattern] of [
    // The camelCase typo used to give a writable tensor silently.
    [() => fromTypedArray(array, { readOnly: true }), /fromTypedArray: unknown option "readOnly" \(did you mean "readonly"\?\)/],
    [() => fromTypedArray(array, { stride: [1] }), /unknown option "stride" \(did you mean "strides"\?\)/],
    [() => fromTypedArray(array, { shapes: [4] }), /unknown option "shapes" \(did you mean "shape"\?\)/],
    [() => fromTypedArray(array, { dType: 'float32' }), /unknown option "dType" \(did you mean "dtype"\?\)/],
    [() => fromTypedArray(array, { offest: 0 }), /unknown option "offest" \(did you mean "offset"\?\)/],
    [() => fromTypedArray(array, { colour: 'red' }), /unknown option "colour"; its options are shape, strides, offset, readonly, dtype$/],
    [() => tensor.exportPointer({ lgacy: true }), /exportPointer: unknown option "lgacy" \(did you mean "legacy"\?\)/],
    [() => tensor.toTypedArray({ cpy: true }), /toTypedArray: unknown option "cpy" \(did you mean "copy"\?\)/],
    [() => dlbridge.importPointer(0n, { readOnly: true }), /importPointer: unknown option "readOnly" \(did you mean "readonly"\?\)/],
    [() => dlbridge.releasePointer(0n, { legacyy: true }), /releasePointer: unknown option "legacyy" \(did you mean "legacy"\?\)/],
    [() => dlbridge.fromShared('x', { writeable: true }), /fromShared: unknown option "writeable" \(did you mean "writable"\?\)/],
  ]) {
    assertThrowsCode(call, TypeError, 'ERR_DLBRIDGE_UNKNOWN_OPTION', pattern);
  }
  // Only own enumerable string keys count: inherited, non-enumerable and symbol keys are ignored.
  const inherited = Object.create({ readOnly: true });
  assert.equal(fromTypedArray(array, inherited).readonly, false);
  const hidden = Object.defineProperty({}, 'readOnly', { value: true, enumerable: false });
  assert.equal(fromTypedArray(array, hidden).readonly, false);
  assert.equal(fromTypedArray(array, { [Symbol('readOnly')]: true, readonly: true }).readonly, true);
  // A Proxy whose ownKeys trap throws: its error comes through, nothing crashes.
  const trap = new Proxy({}, { ownKeys() { throw new RangeError('trap'); } });
  assert.throws(() => fromTypedArray(array, trap), /trap/);
});

test('empty and arange check their arguments', () => {
  assertThrowsCode(() => empty('3'), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /empty: shape must be an array of integers/);
  assertThrowsCode(() => empty([2], 5), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /empty: dtype/);
  assertThrowsCode(() => arange(1.5), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /arange: n must be an integer, got the number 1.5/);
  assertThrowsCode(() => arange(3, 'complex32x2'), TypeError, 'ERR_DLBRIDGE_UNKNOWN_DTYPE');
  assertThrowsCode(() => addressOf({}), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /addressOf expects a typed array/);
});

test('Tensor cannot be constructed from JavaScript', () => {
  assert.throws(() => new Tensor());
});
