'use strict';
// The example addon against typed arrays and the dlbridge package's Tensors (a different
// native addon): values, addresses, errors and releases. Run with node --test --expose-gc.

const assert = require('node:assert/strict');
const test = require('node:test');
const { setImmediate: nextTurn } = require('node:timers/promises');
const dlbridge = require('../../../bindings/node');
const tensorops = require('..');

/** Runs the collector until the counts stop changing (finalizers run on later turns). */
async function collect() {
  let last = '';
  for (let i = 0; i < 20; i++) {
    global.gc();
    await nextTurn();
    const now = JSON.stringify(counts());
    if (now === last && i >= 3) return;
    last = now;
  }
}

/** What both addons hold: dlbridge's live resources and this addon's returned arrays. */
function counts() {
  const { liveTensors, pinnedJsBuffers, externalBuffers, pendingExports } = dlbridge.diagnostics();
  return { liveTensors, pinnedJsBuffers, externalBuffers, pendingExports, addonArrays: tensorops.liveExports() };
}

/** Asserts that `fn` throws `type` with `code` and a message matching `pattern`. */
function assertThrows(fn, type, code, pattern) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof type, `expected ${type.name}, got ${error.constructor.name}: ${error.message}`);
    assert.equal(error.code, code, error.message);
    assert.match(error.message, pattern);
    return true;
  });
}

test('scale_ writes a Float32Array in place, at its own address', () => {
  const buffer = new ArrayBuffer(32);
  const a = new Float32Array(buffer, 8, 4);
  a.set([1, 2, 3, 4]);
  assert.equal(tensorops.dataPtr(a), dlbridge.addressOf(a));
  tensorops.scale_(a, 10);
  assert.deepEqual([...a], [10, 20, 30, 40]);
  assert.deepEqual([...new Float32Array(buffer, 0, 2)], [0, 0]);
});

test('scale_ writes a dlbridge Tensor in place through its strides, negative ones included', () => {
  const data = new Float32Array([0, 1, 2, 3, 4, 5]);
  const reversed = dlbridge.fromTypedArray(data, { shape: [3], strides: [-2], offset: 5 });
  assert.equal(tensorops.dataPtr(reversed), reversed.dataPtr);
  assert.equal(tensorops.dataPtr(reversed), dlbridge.addressOf(data) + 20n);
  tensorops.scale_(reversed, 10);
  assert.deepEqual([...data], [0, 10, 2, 30, 4, 50]);
  const transposed = dlbridge.fromTypedArray(data, { shape: [3, 2], strides: [1, 3] });
  tensorops.scale_(transposed, 0.5);
  assert.deepEqual([...data], [0, 5, 1, 15, 2, 25]);
  assert.equal(tensorops.sum(transposed), 48);
});

test('Tensors in Rust-owned memory are read and written where they live', () => {
  const t = dlbridge.arange(6, 'float32');
  assert.equal(tensorops.dataPtr(t), t.dataPtr);
  tensorops.scale_(t, 2);
  assert.deepEqual([...t.toTypedArray()], [0, 2, 4, 6, 8, 10]);
  assert.equal(tensorops.trace(dlbridge.fromTypedArray(new Float64Array([1, 2, 3, 4]), { shape: [2, 2] })), 5);
});

test('sum reads every typed-array kind as its own dtype', () => {
  const cases = [
    [Int8Array, [-7, 3], -4],
    [Uint8Array, [250, 5], 255],
    [Uint8ClampedArray, [255, 1], 256],
    [Int16Array, [-30000, 1], -29999],
    [Uint16Array, [65000, 1], 65001],
    [Int32Array, [-2e9, 1], -1999999999],
    [Uint32Array, [4e9, 1], 4000000001],
    [Float32Array, [1.5, 2.25], 3.75],
    [Float64Array, [Math.PI, 1], Math.PI + 1],
    [BigInt64Array, [-(2n ** 40n), 1n], -(2 ** 40) + 1],
    [BigUint64Array, [2n ** 40n, 1n], 2 ** 40 + 1],
  ];
  for (const [Ctor, values, total] of cases) {
    const a = Ctor.from(values);
    assert.equal(tensorops.sum(a), total, Ctor.name);
    assert.equal(tensorops.dataPtr(a), dlbridge.addressOf(a), Ctor.name);
  }
});

test('typed arguments reinterpret typed arrays as fromTypedArray({dtype}) does', () => {
  // float16 bits: 1.0, 2.0, -0.5
  const halves = new Uint16Array([0x3c00, 0x4000, 0xb800]);
  assert.equal(tensorops.sumF16(halves), 2.5);
  assert.equal(tensorops.sumF16(dlbridge.fromTypedArray(halves, { dtype: 'float16' })), 2.5);
  // bfloat16 bits: 1.0, 3.0
  assert.equal(tensorops.sum(dlbridge.fromTypedArray(new Uint16Array([0x3f80, 0x4040]), { dtype: 'bfloat16' })), 4);
  assert.equal(tensorops.countTrue(new Uint8Array([1, 0, 1, 1])), 3);
  assert.equal(tensorops.countTrue(new Uint8ClampedArray([0, 1])), 1);
  assert.equal(tensorops.countTrue(dlbridge.fromTypedArray(new Uint8Array([1, 1]), { dtype: 'bool' })), 2);
  assert.deepEqual(tensorops.sumComplex(new Float32Array([1, 2, 3, 4])), [4, 6]);
  assert.deepEqual(
    tensorops.sumComplex(dlbridge.fromTypedArray(new Float32Array([1, -1, 2, -2]), { dtype: 'complex64' })),
    [3, -3],
  );
  assert.equal(tensorops.first(new BigInt64Array([-5n, 7n])), -5);
});

test('bool arguments refuse bytes other than 0 and 1, naming the first', () => {
  assertThrows(() => tensorops.countTrue(new Uint8Array([1, 0, 7])), RangeError, 'ERR_DLBRIDGE_INVALID_BOOL', /index \[2\] holds byte 0x07/);
});

test('wrong dtypes are TypeErrors naming the class, dtype and shape passed', () => {
  assertThrows(
    () => tensorops.scale_(new Float64Array(4), 2),
    TypeError,
    'ERR_DLBRIDGE_DTYPE_MISMATCH',
    /expected a writable float32 CPU tensor \(a Float32Array or a dlbridge Tensor\), got a Float64Array of length 4 \(a float64 tensor of shape \[4\]\)/,
  );
  assertThrows(
    () => tensorops.sumF16(dlbridge.arange(3, 'float32')),
    TypeError,
    'ERR_DLBRIDGE_DTYPE_MISMATCH',
    /got a float32 Tensor of shape \[3\] and strides \[1\] on cpu/,
  );
  // An odd-length Float32Array holds no whole complex64 pairs: it stays float32.
  assertThrows(() => tensorops.sumComplex(new Float32Array(3)), TypeError, 'ERR_DLBRIDGE_DTYPE_MISMATCH', /Float32Array of length 3/);
  assertThrows(() => tensorops.sum(new Float64Array(0).buffer), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an ArrayBuffer/);
  assertThrows(() => tensorops.sum(new DataView(new ArrayBuffer(4))), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got a DataView/);
  assertThrows(() => tensorops.sum([1, 2]), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an array/);
  assertThrows(() => tensorops.sum(3), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got the number 3/);
});

test('null and undefined arguments are coded TypeErrors like any other wrong argument', () => {
  // Node's own "Cannot convert undefined or null to object" must not leak out without a code.
  for (const [value, name] of [[null, /got null/], [undefined, /got undefined/]]) {
    assertThrows(() => tensorops.sum(value), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', name);
    assertThrows(() => tensorops.scale_(value, 2), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', name);
    assertThrows(() => tensorops.add_(new Float32Array(2), value), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', name);
    assertThrows(() => tensorops.trace(value), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', name);
    assertThrows(() => tensorops.first(value), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', name);
  }
  assertThrows(() => tensorops.sum(Symbol('s')), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got a symbol/);
  assertThrows(() => tensorops.sum(() => 1), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got a function/);
  // The next call runs normally: no exception was left pending.
  assert.equal(tensorops.sum(new Float32Array([1, 2])), 3);
});

test('wrong ndim and layouts are RangeErrors naming the shape and strides', () => {
  assertThrows(
    () => tensorops.trace(new Float64Array(4)),
    RangeError,
    'ERR_DLBRIDGE_NDIM_MISMATCH',
    /expected a 2-d float64 CPU tensor .*, got a Float64Array of length 4 \(a float64 tensor of shape \[4\]\)/,
  );
  // trace is #[napi(strict)]: napi-rs's own validation leaves the checks to the argument type.
  assertThrows(() => tensorops.trace(3), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got the number 3/);
  const strided = dlbridge.fromTypedArray(new BigInt64Array(6), { shape: [3], strides: [2] });
  assertThrows(
    () => tensorops.first(strided),
    RangeError,
    'ERR_DLBRIDGE_NOT_CONTIGUOUS',
    /expected a C-contiguous int64 CPU tensor .*, got an int64 Tensor of shape \[3\] and strides \[2\]/,
  );
});

test('fixed-dimension views compute through any strides, in place at the same address', () => {
  const a = dlbridge.fromTypedArray(Float64Array.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), { shape: [3, 4] });
  const v = Float64Array.from([1, 0, 2, -1]);
  assert.deepEqual(Array.from(tensorops.matvec(a, v)), [1, 9, 17]);
  const reversed = dlbridge.fromTypedArray(Float64Array.from([-1, 9, 2, 9, 0, 9, 1]), { shape: [4], strides: [-2], offset: 6 });
  assert.deepEqual(Array.from(tensorops.matvec(a, reversed)), [1, 9, 17]);
  assertThrows(() => tensorops.matvec(a, new Float64Array(3)), RangeError, 'ERR_SHAPE_MISMATCH', /a has 4 columns, v has 3 elements/);
  assertThrows(() => tensorops.matvec(a, a), RangeError, 'ERR_DLBRIDGE_NDIM_MISMATCH',
    /expected a 1-d float64 CPU tensor .*, got a float64 Tensor of shape \[3, 4\]/);

  const memory = new Float32Array(48);
  const m = dlbridge.fromTypedArray(memory, { shape: [3, 4], strides: [16, -2], offset: 6 });
  tensorops.fillDiagonal_(m, 7);
  assert.equal(tensorops.dataPtr(m), tensorops.dataPtr(memory) + 24n);
  assert.deepEqual(Array.from(memory.keys()).filter((i) => memory[i] !== 0), [6, 20, 34]);
  assert.deepEqual(Array.from(m.toTypedArray({ copy: true })), [7, 0, 0, 0, 0, 7, 0, 0, 0, 0, 7, 0]);
  assertThrows(() => tensorops.fillDiagonal_(new Float32Array(4), 1), RangeError, 'ERR_DLBRIDGE_NDIM_MISMATCH',
    /expected a writable 2-d float32 CPU tensor \(a Float32Array or a dlbridge Tensor\), got a Float32Array of length 4/);
});

test('arguments report shape, strides, dtype, device and nbytes', () => {
  assert.deepEqual(tensorops.info(new Float32Array(5)), { shape: [5], strides: [1], dtype: 'float32', device: 'cpu', nbytes: 20 });
  const t = dlbridge.fromTypedArray(new Float32Array(24), { shape: [2, 3], strides: [-12, 2], offset: 12 });
  assert.deepEqual(tensorops.info(t), { shape: [2, 3], strides: [-12, 2], dtype: 'float32', device: 'cpu', nbytes: 24 });
  assert.deepEqual(tensorops.info(dlbridge.empty([0, 3], 'float32')), { shape: [0, 3], strides: [3, 1], dtype: 'float32', device: 'cpu', nbytes: 0 });
});

test('arguments converted with new() name the parameter in every error class', () => {
  const x = Float64Array.from([1, 2, 3]);
  assert.equal(tensorops.dot(x, Float64Array.from([1, 1, 2])), 9);
  const ro = dlbridge.fromTypedArray(Float64Array.from([1, 2, 3]), { readonly: true });
  assert.equal(tensorops.dot(ro, x), 14);
  assertThrows(() => tensorops.dot(x, new Int32Array(3)), TypeError, 'ERR_DLBRIDGE_DTYPE_MISMATCH',
    /^argument 'y': expected a 1-d float64 CPU tensor \(a Float64Array or a dlbridge Tensor\), got an Int32Array of length 3 \(an int32 tensor of shape \[3\]\)$/);
  assertThrows(() => tensorops.dot([1, 2], x), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT',
    /^argument 'x': expected a typed array or a dlbridge Tensor, got an array/);
  assertThrows(() => tensorops.dot(x, dlbridge.empty([3, 1], 'float64')), RangeError, 'ERR_DLBRIDGE_NDIM_MISMATCH',
    /^argument 'y': expected a 1-d float64 CPU tensor .*, got a float64 Tensor of shape \[3, 1\]/);
  assertThrows(() => tensorops.dot(x, new Float64Array(2)), RangeError, 'ERR_SHAPE_MISMATCH', /^dot: x has 3 elements, y has 2$/);
  // Arguments napi-rs converts by itself name the value they got, not the parameter.
  assertThrows(() => tensorops.length(new Int32Array(3)), TypeError, 'ERR_DLBRIDGE_DTYPE_MISMATCH',
    /^expected a float32 CPU tensor \(a Float32Array or a dlbridge Tensor\), got an Int32Array of length 3/);
});

test('read-only Tensors are read but never lent mutably', () => {
  const data = new Float32Array([1, 2, 3]);
  const readonly = dlbridge.fromTypedArray(data, { readonly: true });
  assert.equal(tensorops.sum(readonly), 6);
  assertThrows(
    () => tensorops.scale_(readonly, 2),
    TypeError,
    'ERR_DLBRIDGE_READ_ONLY',
    /expected a writable float32 CPU tensor .*, got a read-only float32 Tensor of shape \[3\]/,
  );
  assert.deepEqual([...data], [1, 2, 3]);
});

test('one memory passed as two arguments never becomes a &mut and another borrow', () => {
  const a = new Float32Array([1, 2]);
  const b = new Float32Array([10, 20]);
  tensorops.add_(a, b);
  assert.deepEqual([...a], [11, 22]);
  assertThrows(() => tensorops.add_(a, a), RangeError, 'ERR_DLBRIDGE_ALIASED', /overlaps memory that another argument borrows mutably/);
  assertThrows(() => tensorops.add_(a, dlbridge.fromTypedArray(a)), RangeError, 'ERR_DLBRIDGE_ALIASED', /float32 Tensor of shape \[2\]/);
  tensorops.add_(a, b);
  assert.deepEqual([...a], [21, 42]);
});

test('0-d and empty tensors', () => {
  const scalar = new Float32Array([4]);
  tensorops.scale_(dlbridge.fromTypedArray(scalar, { shape: [] }), 0.5);
  assert.deepEqual([...scalar], [2]);
  assert.equal(tensorops.sum(dlbridge.fromTypedArray(scalar, { shape: [] })), 2);
  assert.equal(tensorops.sum(new Float32Array(0)), 0);
  tensorops.scale_(new Float32Array(0), 3);
  assert.equal(tensorops.sum(dlbridge.empty([0, 3], 'float32')), 0);
  assert.equal(tensorops.first(new BigInt64Array(0)), null);
  assert.deepEqual([...tensorops.ramp(0)], []);
});

test('objects that only look like Tensors are refused: the type tag cannot be forged', () => {
  const real = dlbridge.arange(3, 'float32');
  const pretender = Object.create(dlbridge.Tensor.prototype);
  assertThrows(() => tensorops.sum(pretender), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  assertThrows(() => tensorops.sum(new Proxy(real, {})), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  const lookalike = { dtype: 'float32', shape: [3], dataPtr: real.dataPtr, exportPointer: () => real.exportPointer() };
  assertThrows(() => tensorops.sum(lookalike), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  assert.equal(tensorops.sum(real), 3);
});

test('a Tensor over JS memory crosses as its native twin, made once and released with it', async () => {
  await collect();
  const before = counts();
  (() => {
    const array = new Float32Array([1, 2, 3]);
    const t = dlbridge.fromTypedArray(array);
    assert.equal(dlbridge.diagnostics().liveTensors, before.liveTensors, 'nothing native yet');
    for (let i = 0; i < 100; i++) assert.equal(tensorops.sum(t), 6);
    tensorops.scale_(t, 2);
    assert.deepEqual([...array], [2, 4, 6]);
    assert.equal(dlbridge.diagnostics().liveTensors, before.liveTensors + 1, 'one twin for every call');
    assert.equal(dlbridge.diagnostics().pendingExports, before.pendingExports, 'each call deleted its export');
    assertThrows(() => tensorops.add_(t, array), RangeError, 'ERR_DLBRIDGE_ALIASED', /overlaps/);
    t.close();
    assertThrows(() => tensorops.sum(t), Error, 'ERR_DLBRIDGE_MEMORY_GONE', /memory is gone/);
    const unused = dlbridge.fromTypedArray(new Float32Array(2));
    unused.close();
    assertThrows(() => tensorops.sum(unused), Error, 'ERR_DLBRIDGE_MEMORY_GONE', /memory is gone/);
  })();
  await collect();
  assert.deepEqual(counts(), before);
});

test('a Tensor argument is lent for the call, and exported only to be kept beyond it', async () => {
  await collect();
  const before = counts();
  const exportsBefore = dlbridge._testHooks.addonExports();
  (() => {
    const array = new Float32Array([1, 2, 3]);
    const overJs = dlbridge.fromTypedArray(array);
    const native = dlbridge.arange(3, 'float32');
    const object = tensorops.grid(2, 3);
    for (let i = 0; i < 100; i++) {
      assert.equal(tensorops.sum(overJs), 6);
      assert.equal(tensorops.sum(native), 3);
      assert.equal(tensorops.sum(object), 36);
    }
    tensorops.scale_(overJs, 2);
    assert.deepEqual([...array], [2, 4, 6]);
    assert.equal(tensorops.dataPtr(overJs), dlbridge.addressOf(array));
    assert.equal(tensorops.dataPtr(native), native.dataPtr);
    assert.equal(dlbridge._testHooks.addonExports(), exportsBefore, 'no export for a call');
    assert.equal(dlbridge.diagnostics().liveTensors, before.liveTensors + 2, 'the twin and arange');

    const kept = dlbridge.fromTensorObject(overJs);
    assert.equal(dlbridge._testHooks.addonExports(), exportsBefore + 1);
    assert.equal(dlbridge.diagnostics().pendingExports, before.pendingExports + 1);
    assert.equal(kept.dataPtr, dlbridge.addressOf(array));
    overJs.close();
    assert.deepEqual([...kept.toTypedArray({ copy: true })], [2, 4, 6], 'the export holds the memory');
    kept.close();
    assert.equal(dlbridge.diagnostics().pendingExports, before.pendingExports);
  })();
  await collect();
  assert.deepEqual(counts(), before);
});

test('a lent Tensor whose buffer was detached since its first crossing is refused', () => {
  // WebAssembly.Memory#grow detaches the old buffer whatever its marks say.
  const memory = new WebAssembly.Memory({ initial: 1 });
  const overJs = dlbridge.fromTypedArray(new Float32Array(memory.buffer, 0, 4));
  const native = dlbridge.importPointer(overJs.exportPointer());
  overJs.set(0, 5);
  assert.equal(tensorops.sum(overJs), 5);
  assert.equal(tensorops.sum(native), 5);
  memory.grow(1);
  for (const t of [overJs, native]) {
    assertThrows(() => tensorops.sum(t), Error, 'ERR_DLBRIDGE_MEMORY_GONE', /detached buffer/);
    assertThrows(() => tensorops.scale_(t, 2), Error, 'ERR_DLBRIDGE_MEMORY_GONE', /memory is gone/);
    t.close();
  }
});

test('lookalikes of a Tensor over JS memory are refused without running their code', () => {
  const real = dlbridge.fromTypedArray(new Float32Array([1, 2]));
  const prototype = Object.getPrototypeOf(real);
  assertThrows(() => tensorops.sum(Object.create(prototype)), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  let trapped = false;
  const proxy = new Proxy(real, {
    getPrototypeOf() {
      trapped = true;
      return prototype;
    },
  });
  assertThrows(() => tensorops.sum(proxy), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /got an object/);
  assert.equal(trapped, false, 'no trap ran');
  assert.equal(tensorops.sum(real), 3);
});

test('a detached typed array is an empty tensor, never its old memory', () => {
  const a = new Float32Array([1, 2, 3]);
  structuredClone(a.buffer, { transfer: [a.buffer] });
  assert.equal(a.length, 0);
  assert.equal(tensorops.sum(a), 0);
  tensorops.scale_(a, 2);
});

test('ramp and scaled return typed arrays over memory Rust allocated', async () => {
  await collect();
  const before = tensorops.liveExports();
  (() => {
    assert.deepEqual([...tensorops.ramp(4)], [0, 1, 2, 3]);
    const columns = dlbridge.fromTypedArray(new Float64Array([1, 2, 3, 4]), { shape: [2, 2], strides: [1, 2] });
    const result = tensorops.scaled(columns, 10);
    assert.ok(result instanceof Float64Array);
    assert.deepEqual([...result], [10, 30, 20, 40]);
    assert.equal(tensorops.liveExports(), before + 2);
  })();
  await collect();
  assert.equal(tensorops.liveExports(), before);
});

test('grid returns a column-major tensor object that dlbridge and the addon take as it is', async () => {
  await collect();
  const before = counts();
  (() => {
    const object = tensorops.grid(2, 3);
    assert.equal(tensorops.sum(object), 36);
    const t = dlbridge.fromTensorObject(object);
    assert.deepEqual([t.dtype, t.shape, t.strides, t.readonly], ['float64', [2, 3], [1, 2], false]);
    assert.equal(t.get([1, 2]), 12);
    assert.equal(tensorops.dataPtr(object), t.dataPtr);
    assert.equal(tensorops.dataPtr(t), t.dataPtr);
    t.set([0, 1], 100);
    assert.equal(tensorops.sum(object), 135);
    assertThrows(() => dlbridge.fromTensorObject(new Float64Array(2)), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT', /expected a tensor object to keep beyond the call, got a Float64Array of length 2/);
  })();
  await collect();
  assert.deepEqual(counts(), before);
});

test('a worker thread takes typed arrays and Tensors through its own environment', async () => {
  const { Worker } = require('node:worker_threads');
  const source = `
    const { parentPort } = require('node:worker_threads');
    const dlbridge = require(${JSON.stringify(require.resolve('../../../bindings/node'))});
    const tensorops = require(${JSON.stringify(require.resolve('..'))});
    const data = new Float32Array([1, 2, 3, 4]);
    const reversed = dlbridge.fromTypedArray(data, { shape: [4], strides: [-1], offset: 3 });
    tensorops.scale_(reversed, 2);
    let refused = '';
    try { tensorops.add_(data, reversed); } catch (error) { refused = error.code; }
    parentPort.postMessage({ data: [...data], sum: tensorops.sum(reversed), refused,
      same: tensorops.dataPtr(reversed) === reversed.dataPtr });
  `;
  // Its exit is awaited too: the worker's tensors are released as its environment goes, which
  // the next test's counts must not see half done.
  const reply = await new Promise((resolve, reject) => {
    const worker = new Worker(source, { eval: true });
    let message;
    worker.once('message', (m) => { message = m; });
    worker.once('error', reject);
    worker.once('exit', () => resolve(message));
  });
  assert.deepEqual(reply, { data: [2, 4, 6, 8], sum: 20, refused: 'ERR_DLBRIDGE_ALIASED', same: true });
});

test('many calls leave nothing behind in either addon', async () => {
  await collect();
  const before = counts();
  (() => {
    const data = new Float32Array(64);
    const tensor = dlbridge.fromTypedArray(data, { shape: [8, 8], strides: [1, 8] });
    const owned = dlbridge.arange(64, 'float32');
    for (let i = 0; i < 2000; i++) {
      tensorops.scale_(tensor, 1);
      tensorops.sum(owned);
      tensorops.scale_(data, 1);
      tensorops.ramp(16);
      tensorops.sum(dlbridge.fromTensorObject(tensorops.grid(2, 2)));
      assert.throws(() => tensorops.trace(owned), TypeError);
    }
    assert.equal(dlbridge.diagnostics().pendingExports, 0);
  })();
  await collect();
  assert.deepEqual(counts(), before);
});
