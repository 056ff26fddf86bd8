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
