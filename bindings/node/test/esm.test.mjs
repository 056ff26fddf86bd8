// The ESM entry point exposes the same module as the CommonJS one.

import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import dlbridge, {
  fromTypedArray, empty, arange, importPointer, DLPACK_VERSION, Tensor,
  emptyShared, toShared, fromShared, fromTensorObject, diagnostics,
} from 'dlbridge';

const require = createRequire(import.meta.url);

test('import and require give the same module', () => {
  assert.equal(dlbridge, require('dlbridge'));
  assert.equal(fromTypedArray, require('dlbridge').fromTypedArray);
  assert.deepEqual(DLPACK_VERSION, [1, 3]);
});

test('the named exports work', () => {
  const array = new Float32Array([1, 2]);
  const tensor = fromTypedArray(array);
  assert.ok(tensor instanceof Tensor);
  assert.equal(tensor.toTypedArray().buffer, array.buffer);
  assert.equal(empty([2]).size, 2);
  assert.equal(importPointer(arange(3).exportPointer()).size, 3);
  const shared = emptyShared([2], 'int32');
  shared.tensor.toTypedArray()[1] = 7;
  assert.deepEqual([...fromShared(shared.handle).toTypedArray({ copy: true })], [0, 7]);
  assert.deepEqual([...fromShared(toShared(shared.tensor)).toTypedArray({ copy: true })], [0, 7]);
  assert.equal(emptyShared, require('dlbridge').emptyShared);
  assert.equal(fromTensorObject, require('dlbridge').fromTensorObject);
  assert.equal(diagnostics().liveTensors, require('dlbridge').diagnostics().liveTensors);
});
