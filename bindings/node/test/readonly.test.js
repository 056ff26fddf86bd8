'use strict';
// Read-only tensors: never handed out writable unless the caller says so in plain words.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertThrowsCode } = require('./helpers');

const { fromTypedArray, importPointer } = dlbridge;

test('a read-only tensor refuses zero-copy views, explaining both ways out', () => {
  const array = new Float32Array([1, 2, 3]);
  const tensor = fromTypedArray(array, { readonly: true });
  assert.equal(tensor.readonly, true);
  assertThrowsCode(
    () => tensor.toTypedArray(),
    Error,
    'ERR_DLBRIDGE_READ_ONLY',
    /read-only.*copy: true.*unsafeIgnoreReadOnly: true/,
  );
});

test('copy: true gives a private, writable copy', () => {
  const array = new Float32Array([1, 2, 3]);
  const copy = fromTypedArray(array, { readonly: true }).toTypedArray({ copy: true });
  assert.deepEqual([...copy], [1, 2, 3]);
  assert.notEqual(copy.buffer, array.buffer);
  copy[0] = 100;
  assert.equal(array[0], 1);
});

test('unsafeIgnoreReadOnly: true gives the writable view, by explicit request only', () => {
  const array = new Float32Array([1, 2, 3]);
  const view = fromTypedArray(array, { readonly: true }).toTypedArray({ unsafeIgnoreReadOnly: true });
  assert.equal(view.buffer, array.buffer);
  assertThrowsCode(
    () => fromTypedArray(array, { readonly: true }).toTypedArray({ unsafeIgnoreReadOnly: 'yes' }),
    TypeError,
    'ERR_DLBRIDGE_INVALID_ARGUMENT',
    /unsafeIgnoreReadOnly must be a boolean, got the string "yes"/,
  );
});

test('the READ_ONLY flag travels through versioned pointers', () => {
  const tensor = fromTypedArray(new Int32Array(4), { readonly: true });
  const imported = importPointer(tensor.exportPointer());
  assert.equal(imported.readonly, true);
  assertThrowsCode(() => imported.toTypedArray(), Error, 'ERR_DLBRIDGE_READ_ONLY');
});

test('legacy pointers cannot say read-only: exporting one needs the explicit opt-in', () => {
  const tensor = fromTypedArray(new Int32Array(4), { readonly: true });
  assertThrowsCode(
    () => tensor.exportPointer({ legacy: true }),
    Error,
    'ERR_DLBRIDGE_READ_ONLY',
    /legacy DLManagedTensor cannot say so.*unsafeIgnoreReadOnly/,
  );
  const address = tensor.exportPointer({ legacy: true, unsafeIgnoreReadOnly: true });
  assert.equal(importPointer(address, { legacy: true }).readonly, true);
});

test('importPointer({readonly: true}) marks a writable tensor read-only', () => {
  const array = new Int32Array([1, 2]);
  const writable = fromTypedArray(array);
  const address = writable.exportPointer({ legacy: true });
  const imported = importPointer(address, { legacy: true, readonly: true });
  assert.equal(imported.readonly, true);
  assert.equal(writable.readonly, false);
  assert.equal(imported.dataPtr, writable.dataPtr);
  assertThrowsCode(() => imported.toTypedArray(), Error, 'ERR_DLBRIDGE_READ_ONLY');
});
