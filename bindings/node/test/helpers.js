'use strict';
// Shared helpers of the node:test suite (run with --expose-gc).

const assert = require('node:assert/strict');
const { setImmediate: nextTurn } = require('node:timers/promises');
const dlbridge = require('..');

/** Runs the collector until the native counts stop changing (finalizers run on later turns). */
async function collect(rounds = 20) {
  assert.equal(typeof global.gc, 'function', 'run the suite with node --expose-gc');
  let last = '';
  for (let i = 0; i < rounds; i++) {
    global.gc();
    await nextTurn();
    const now = JSON.stringify(dlbridge.diagnostics());
    if (now === last && i >= 3) return;
    last = now;
  }
}

/** The native counts that describe live resources (not the monotonic `releasedTensors`). */
function liveCounts() {
  const { liveTensors, pinnedJsBuffers, externalBuffers, pendingExports } =
    dlbridge.diagnostics();
  return { liveTensors, pinnedJsBuffers, externalBuffers, pendingExports };
}

/**
 * Runs `body` (sync or async) in a fresh scope, collects, and checks that every native
 * resource it made was released.
 */
async function assertReleases(body) {
  await collect();
  const before = liveCounts();
  await body();
  await collect();
  assert.deepEqual(liveCounts(), before);
}

/**
 * Tracks whether objects were garbage-collected: `watch(obj)` registers one, `collected()`
 * counts those reclaimed so far (FinalizationRegistry callbacks run after collect()).
 */
function gcWatcher() {
  let reclaimed = 0;
  const registry = new FinalizationRegistry(() => {
    reclaimed += 1;
  });
  return {
    watch: (object) => registry.register(object, undefined),
    collected: () => reclaimed,
  };
}

/** Asserts that `fn` throws `type` with `code` and a message matching `pattern`. */
function assertThrowsCode(fn, type, code, pattern) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof type, `expected ${type.name}, got ${error && error.constructor.name}: ${error && error.message}`);
    assert.equal(error.code, code, error.message);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

/** Every typed-array class with a sample value, its dtype and element. */
const ARRAY_CASES = [
  { Ctor: Int8Array, dtype: 'int8', value: -7 },
  { Ctor: Uint8Array, dtype: 'uint8', value: 250 },
  { Ctor: Uint8ClampedArray, dtype: 'uint8', value: 255, viewCtor: Uint8Array },
  { Ctor: Int16Array, dtype: 'int16', value: -30000 },
  { Ctor: Uint16Array, dtype: 'uint16', value: 65000 },
  { Ctor: Int32Array, dtype: 'int32', value: -2e9 },
  { Ctor: Uint32Array, dtype: 'uint32', value: 4e9 },
  { Ctor: Float32Array, dtype: 'float32', value: 1.5 },
  { Ctor: Float64Array, dtype: 'float64', value: Math.PI },
  { Ctor: BigInt64Array, dtype: 'int64', value: -(2n ** 62n) },
  { Ctor: BigUint64Array, dtype: 'uint64', value: 2n ** 63n + 5n },
];

module.exports = {
  dlbridge,
  collect,
  liveCounts,
  assertReleases,
  assertThrowsCode,
  gcWatcher,
  ARRAY_CASES,
};
