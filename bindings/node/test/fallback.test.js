'use strict';
// Runtimes that forbid external ArrayBuffers (Electron's memory cage): toTypedArray copies and
// says so through `copied`; JS memory needs no external buffer and stays zero-copy.

const test = require('node:test');
const assert = require('node:assert/strict');
const { dlbridge, assertReleases } = require('./helpers');

const { fromTypedArray, arange, addressOf, _testHooks } = dlbridge;

test('without external buffers, Rust memory is copied once and flagged copied', async () => {
  _testHooks.forbidExternalBuffers(true);
  try {
    await assertReleases(() => {
      const tensor = arange(6, 'float32');
      assert.equal(tensor.copied, false);
      const view = tensor.toTypedArray();
      assert.equal(tensor.copied, true, 'copied turns true: the view is not the tensor memory');
      assert.notEqual(addressOf(view), tensor.dataPtr);
      assert.deepEqual([...view], [0, 1, 2, 3, 4, 5]);
      // Later views share the same copy, so they stay coherent with each other.
      const again = tensor.toTypedArray();
      assert.equal(again.buffer, view.buffer);
    });
  } finally {
    _testHooks.forbidExternalBuffers(false);
  }
});

test('without external buffers, JS memory is still viewed in place', () => {
  _testHooks.forbidExternalBuffers(true);
  try {
    const array = new Int16Array([1, 2, 3]);
    const tensor = fromTypedArray(array);
    assert.equal(tensor.toTypedArray().buffer, array.buffer);
    assert.equal(tensor.copied, false);
  } finally {
    _testHooks.forbidExternalBuffers(false);
  }
});

test('a Tensor made while external buffers are allowed is not flagged copied', () => {
  const tensor = arange(3, 'int8');
  assert.equal(addressOf(tensor.toTypedArray()), tensor.dataPtr);
  assert.equal(tensor.copied, false);
});
