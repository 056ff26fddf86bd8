'use strict';
// fromTensorObject: a Tensor over the memory of a tensor object (here the package's own Tensors,
// which are tensor objects; examples/napi-addon tests those a Rust addon returns).

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertReleases, assertThrowsCode } = require('./helpers');

const { fromTypedArray, fromTensorObject, arange } = dlbridge;

test('fromTensorObject of a Tensor is a new Tensor over the same memory, flags kept', () => {
  const data = new Float64Array([0, 1, 2, 3, 4, 5]);
  const t = fromTypedArray(data, { shape: [2, 3], strides: [1, 2], readonly: true });
  const u = fromTensorObject(t);
  assert.notEqual(u, t);
  assert.deepEqual([u.dtype, u.shape, u.strides, u.readonly], ['float64', [2, 3], [1, 2], true]);
  assert.equal(u.dataPtr, t.dataPtr);
  assert.equal(u.get([1, 2]), 5);
});

test('fromTensorObject refuses what is not a tensor object, naming it', () => {
  assertThrowsCode(() => fromTensorObject(new Float32Array(2)), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT',
    /expected a tensor object to keep beyond the call, got a Float32Array of length 2/);
  assertThrowsCode(() => fromTensorObject(Object.create(dlbridge.Tensor.prototype)), TypeError,
    'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  assertThrowsCode(() => fromTensorObject('x'), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got the string "x"/);
  // null and undefined get the same coded error, not Node's bare "Cannot convert undefined or
  // null to object" (which the type-tag check used to leave pending).
  assertThrowsCode(() => fromTensorObject(null), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got null/);
  assertThrowsCode(() => fromTensorObject(undefined), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got undefined/);
  assertThrowsCode(() => fromTensorObject(), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got undefined/);
  assert.equal(fromTensorObject(arange(2, 'float32')).size, 2);
});

test('a Tensor made by fromTensorObject holds the memory, and releases it once', async () => {
  await assertReleases(() => {
    const views = [];
    for (let i = 0; i < 50; i++) {
      views.push(fromTensorObject(fromTypedArray(new Int32Array(8))).toTypedArray());
      views.push(fromTensorObject(arange(4, 'float32')).toTypedArray());
    }
    assert.equal(views.length, 100);
  });
});
