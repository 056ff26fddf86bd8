'use strict';
// What plain JavaScript once could crash the process with: views beyond the engine's limits,
// memory of an exited worker, buffers of another realm, getters that detach a buffer mid-call.
// Each case runs in a child process that must end normally, never by a signal, and report a
// typed error (checked by `code`) or the right result.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const PACKAGE = path.join(__dirname, '..');

/**
 * Runs `source` in `node --expose-gc` with `dlbridge` (the package), `report(value)` (prints it
 * as JSON on the last line) and `outcome(fn)` (`{ok: result}` or `{name, code}` of the error)
 * in scope; returns what it reported. Fails on a signal, a timeout or a non-zero exit.
 */
function runChild(source, { timeout = 60_000, shell } = {}) {
  const prelude = `
    const dlbridge = require(${JSON.stringify(PACKAGE)});
    const plain = (k, v) => (typeof v === 'bigint' ? String(v) : v);
    const report = (value) => console.log(JSON.stringify(value, plain));
    const outcome = (fn) => {
      try {
        return { ok: fn() };
      } catch (e) {
        return { name: e.name, code: e.code, message: e.message };
      }
    };
  `;
  const program = prelude + source;
  const options = { encoding: 'utf8', timeout };
  const limited = ['-c', `${shell}; exec "$0" --expose-gc -e "$1"`, process.execPath, program];
  const child = shell
    ? spawnSync('bash', limited, options)
    : spawnSync(process.execPath, ['--expose-gc', '-e', program], options);
  assert.equal(child.signal, null, `the child died of ${child.signal}:\n${child.stderr}`);
  assert.equal(child.status, 0, `the child exited with ${child.status}:\n${child.stderr}`);
  const lines = child.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

const MAX_LENGTH = require('node:buffer').constants.MAX_LENGTH;
// Segments just past the limit are cheap (their pages are never touched) while the limit is
// Node 20's 4 GiB; where it is 2^53 - 1 (Node 22 and later) no segment reaches it.
const BEYOND_REACH = MAX_LENGTH > 2 ** 40 &&
  'no shared-memory segment reaches this runtime\'s buffer.constants.MAX_LENGTH';

test('a view of more elements than a typed array holds is a RangeError, not a crash', {
  skip: BEYOND_REACH,
}, () => {
  const result = runChild(`
    const { tensor } = dlbridge.emptyShared([${MAX_LENGTH} + 1], 'uint8'); // pages never touched
    report(outcome(() => tensor.toTypedArray().length));
  `);
  assert.equal(result.name, 'RangeError', result.message);
  assert.equal(result.code, 'ERR_DLBRIDGE_TOO_LARGE');
  assert.match(result.message, new RegExp(`${MAX_LENGTH + 1} elements`));
});

test('a view of more bytes than an external ArrayBuffer holds is a RangeError, not a crash', {
  skip: BEYOND_REACH,
}, () => {
  // Fewer elements than a typed array's limit, more bytes than Node takes as external memory:
  // Node refuses the buffer and finalizes its hint, which the addon once freed a second time.
  const elements = MAX_LENGTH / 4 + 1;
  const result = runChild(`
    const { tensor } = dlbridge.emptyShared([${elements}], 'float32');
    const first = outcome(() => tensor.toTypedArray().length);
    global.gc();
    setImmediate(() => report({
      first,
      again: outcome(() => tensor.toTypedArray().length),
      counts: dlbridge.diagnostics(),
    }));
  `);
  for (const attempt of [result.first, result.again]) {
    assert.equal(attempt.name, 'RangeError', attempt.message);
    assert.equal(attempt.code, 'ERR_DLBRIDGE_TOO_LARGE');
    assert.match(attempt.message, new RegExp(`${elements * 4} bytes`));
  }
  assert.equal(result.counts.externalBuffers, 0, 'no external buffer was counted');
});

test('a copy of more elements than a typed array holds is a RangeError, not an abort', () => {
  // One byte viewed 2^32 + 1 times (stride 0): the copy would be 4 GiB; nothing is allocated.
  const result = runChild(`
    const shape = [${MAX_LENGTH}n + 1n];
    const t = dlbridge.fromTypedArray(new Uint8Array([7]), { shape, strides: [0] });
    report({
      copy: outcome(() => t.toTypedArray({ copy: true }).length),
      one: t.get([${MAX_LENGTH}n]),
    });
  `);
  assert.equal(result.copy.name, 'RangeError', result.copy.message);
  assert.equal(result.copy.code, 'ERR_DLBRIDGE_TOO_LARGE');
  assert.equal(result.one, 7);
});

test('a copy that cannot be allocated is a RangeError, not an abort', () => {
  // 16 GiB under a 6 GB address-space limit: the allocation fails, which V8 reports by ending
  // the process when native code asks Node-API for the buffer.
  const result = runChild(`
    const t = dlbridge.fromTypedArray(new Float64Array([2]), { shape: [2 ** 31], strides: [0] });
    report({ copy: outcome(() => t.toTypedArray({ copy: true }).length), after: t.get([5]) });
  `, { shell: 'ulimit -v 6000000' });
  assert.equal(result.copy.name, 'RangeError', result.copy.message);
  assert.equal(result.copy.code, 'ERR_DLBRIDGE_ALLOCATION_FAILED');
  assert.match(result.copy.message, /17179869184 bytes/);
  assert.equal(result.after, 2, 'the tensor is still usable');
});

test("a worker's typed array imported elsewhere is a copy that outlives the worker", () => {
  // 64 MiB, so that the worker's exit unmaps it: a view of it would fault.
  const result = runChild(`
    const { Worker } = require('node:worker_threads');
    const worker = new Worker(\`
      const dlbridge = require(${JSON.stringify(PACKAGE)});
      const { parentPort } = require('node:worker_threads');
      const array = new Float64Array(8 * 1024 * 1024).map((_, i) => i);
      const tensor = dlbridge.fromTypedArray(array, { shape: [1024, 8192] });
      parentPort.postMessage(tensor.exportPointer());
      parentPort.once('message', () => process.exit(0)); // once the main thread has its view
    \`, { eval: true });
    let tensor, view;
    worker.on('message', (address) => {
      tensor = dlbridge.importPointer(address);
      view = tensor.toTypedArray();
      worker.postMessage('done');
    });
    worker.on('exit', () => {
      global.gc();
      setTimeout(() => {
        let sum = 0;
        for (let i = 0; i < view.length; i += 4096) sum += view[i];
        report({
          copied: tensor.copied,
          shape: tensor.shape,
          first: view[1],
          last: view[view.length - 1],
          sum,
          copy: tensor.toTypedArray({ copy: true })[12345],
          handle: typeof dlbridge.toShared(tensor),
        });
      }, 50);
    });
  `);
  assert.equal(result.copied, true);
  assert.deepEqual(result.shape, [1024, 8192]);
  assert.equal(result.first, 1);
  assert.equal(result.last, 8 * 1024 * 1024 - 1);
  let sum = 0;
  for (let i = 0; i < 8 * 1024 * 1024; i += 4096) sum += i;
  assert.equal(result.sum, sum);
  assert.equal(result.copy, 12345);
  assert.equal(result.handle, 'string');
});

test('a worker exiting while its typed array is imported elsewhere: a copy or MEMORY_GONE', () => {
  // The worker exits right after posting: each import races its teardown.
  const result = runChild(`
    const { Worker } = require('node:worker_threads');
    const source = \`
      const dlbridge = require(${JSON.stringify(PACKAGE)});
      const { parentPort } = require('node:worker_threads');
      const array = new Float32Array(4 * 1024 * 1024).fill(3);
      parentPort.postMessage(dlbridge.fromTypedArray(array).exportPointer());
      process.exit(0);
    \`;
    const outcomes = [];
    const round = (left) => {
      if (left === 0) return report(outcomes);
      const worker = new Worker(source, { eval: true });
      worker.on('message', (address) => {
        outcomes.push(outcome(() => {
          const t = dlbridge.importPointer(address);
          const copy = t.toTypedArray({ copy: true });
          dlbridge.toShared(t);
          return copy[copy.length - 1];
        }));
      });
      worker.on('exit', () => round(left - 1));
    };
    round(12);
  `);
  assert.equal(result.length, 12);
  for (const r of result) {
    assert.ok(r.ok === 3 || r.code === 'ERR_DLBRIDGE_MEMORY_GONE', JSON.stringify(r));
  }
});

/**
 * In a child: makes `array` over a resizable ArrayBuffer (`setup`), imports it, shrinks the
 * buffer to nothing (`shrink`) and reads an element the shrink took away. The import refuses
 * the resizable buffer instead of reading freed memory.
 */
function assertResizableRefused(setup, shrink) {
  const result = runChild(`
    ${setup}
    report(outcome(() => {
      const t = dlbridge.fromTypedArray(array);
      ${shrink};
      return t.get([1000]);
    }));
  `);
  assert.equal(result.name, 'TypeError', result.message);
  assert.equal(result.code, 'ERR_DLBRIDGE_RESIZABLE');
}

test('a resizable ArrayBuffer of another realm is refused', () => {
  assertResizableRefused(
    `const vm = require('node:vm');
    const array = vm.runInNewContext(
      'new Float32Array(new ArrayBuffer(1 << 20, { maxByteLength: 1 << 21 }))');`,
    'array.buffer.resize(0)',
  );
});

test('an own buffer property does not hide a resizable ArrayBuffer', () => {
  assertResizableRefused(
    `const array = new Uint8Array(new ArrayBuffer(1 << 20, { maxByteLength: 1 << 21 }));
    Object.defineProperty(array, 'buffer', { value: new ArrayBuffer(8) });`,
    "Object.getPrototypeOf(Uint8Array.prototype).__lookupGetter__('buffer').call(array).resize(0)",
  );
});

test("another realm's buffer is pinned untransferable: an argument's getter can't free it", () => {
  // 64 MiB, so that a transferred-then-collected buffer is unmapped.
  const result = runChild(`
    const vm = require('node:vm');
    const array = vm.runInNewContext('new Uint8Array(64 << 20).fill(9)');
    const buffer = array.buffer;
    const t = dlbridge.fromTypedArray(array);
    const attempts = [];
    const index = [];
    Object.defineProperty(index, 0, { enumerable: true, get() {
      try { structuredClone(buffer, { transfer: [buffer] }); attempts.push('returned'); }
      catch (e) { attempts.push(e.name); }
      global.gc();
      return 5;
    } });
    const read = outcome(() => t.get(index));
    const written = outcome(() => t.set(index, 11));
    report({ read, written, attempts, length: buffer.byteLength, now: array[5] });
  `);
  assert.deepEqual(result.read, { ok: 9 });
  assert.equal(result.written.code, undefined, JSON.stringify(result.written));
  assert.equal(result.length, 64 << 20, 'the buffer was not detached');
  assert.equal(result.now, 11);
});

test('get and set check the memory after their arguments ran JavaScript', () => {
  // WebAssembly.Memory#grow detaches the old buffer whatever its marks say.
  const result = runChild(`
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 4 });
    const t = dlbridge.fromTypedArray(new Float64Array(memory.buffer));
    const growing = () => {
      const index = [];
      Object.defineProperty(index, 0, { enumerable: true, get() { memory.grow(1); return 3; } });
      return index;
    };
    const other = new WebAssembly.Memory({ initial: 1 });
    const complex = dlbridge.fromTypedArray(new Float32Array(other.buffer), { dtype: 'complex64' });
    const closingValue = [];
    Object.defineProperty(closingValue, 0, {
      enumerable: true,
      get() { complex.close(); return 1; },
    });
    closingValue[1] = 2;
    report({
      get: outcome(() => t.get(growing())),
      set: outcome(() => t.set(growing(), 1)),
      closedMidSet: outcome(() => complex.set([0], closingValue)),
    });
  `);
  for (const r of [result.get, result.set]) {
    assert.equal(r.name, 'TypeError', JSON.stringify(r));
    assert.equal(r.code, 'ERR_DLBRIDGE_DETACHED');
  }
  assert.equal(result.closedMidSet.code, 'ERR_DLBRIDGE_CLOSED');
});

test('an option getter that detaches the typed array makes fromTypedArray refuse it', () => {
  const result = runChild(`
    const array = new Float32Array(16);
    const options = {
      get shape() {
        structuredClone(array.buffer, { transfer: [array.buffer] });
        return [16];
      },
    };
    report(outcome(() => dlbridge.fromTypedArray(array, options).size));
  `);
  assert.equal(result.name, 'TypeError', result.message);
  assert.equal(result.code, 'ERR_DLBRIDGE_DETACHED');
});

test('2000 emptyShared segments closed one by one fit in 256 file descriptors', () => {
  const loop = (close) => runChild(`
    report(outcome(() => {
      for (let i = 0; i < 2000; i++) {
        const { tensor } = dlbridge.emptyShared([16], 'float32');
        tensor.toTypedArray({ copy: true });
        if (${close}) tensor.close();
      }
      return require('node:fs').readdirSync('/proc/self/fd').length;
    }));
  `, { shell: 'ulimit -n 256' });
  const closed = loop(true);
  assert.ok(closed.ok < 64, JSON.stringify(closed));
  // Without close the same synchronous loop (no finalizer can run) runs out of descriptors.
  assert.equal(loop(false).code, 'ERR_DLBRIDGE_SHM_IO');
});

test('the package loads again in the same environment, as Jest loads it per test file', () => {
  const result = runChild(`
    const vm = require('node:vm');
    const entry = require.resolve(${JSON.stringify(PACKAGE)});
    delete require.cache[entry];
    const again = require(entry);
    const t = again.fromTypedArray(vm.runInNewContext('new Float32Array([1, 2, 3])'));
    report({ text: String(t), json: JSON.parse(JSON.stringify(t)).dtype, sum: t.get(0) + t.get(2),
      sameClass: again.Tensor === dlbridge.Tensor });
  `);
  assert.deepEqual(result, {
    text: "Tensor { dtype: 'float32', shape: [3], strides: [1], device: 'cpu:0' }",
    json: 'float32',
    sum: 4,
    sameClass: true,
  });
});

test('the view buffer is held natively: a Tensor has no property a prototype getter could shadow', () => {
  const result = runChild(`
    const first = dlbridge.arange(4, 'float32');
    first.toTypedArray();
    const keys = Reflect.ownKeys(first).map(String);
    let called = false;
    for (const key of ['viewBuffer', Symbol.for('dlbridge.viewBuffer')]) {
      Object.defineProperty(dlbridge.Tensor.prototype, key, {
        get() { called = true; return new ArrayBuffer(64); },
      });
    }
    const t = dlbridge.arange(4, 'float32');
    const view = t.toTypedArray();
    const again = t.toTypedArray();
    report({ keys, called, values: [...view], same: dlbridge.addressOf(view) === t.dataPtr,
      shared: view.buffer === again.buffer && first.toTypedArray().buffer !== view.buffer });
  `);
  assert.deepEqual(result, { keys: [], called: false, values: [0, 1, 2, 3], same: true, shared: true });
});

test('an ArrayBuffer pinned before is checked again: detached or resizable, it is refused every time', () => {
  const result = runChild(`
    const array = new Float32Array(16);
    dlbridge.fromTypedArray(array);
    const again = dlbridge.fromTypedArray(array);
    let transfer;
    try { structuredClone(array.buffer, { transfer: [array.buffer] }); transfer = 'returned'; }
    catch (e) { transfer = e.name; }
    const kept = array.buffer.byteLength;
    // A buffer that was never pinned, detached after a first tensor over another buffer.
    const other = new Float32Array(16);
    structuredClone(other.buffer, { transfer: [other.buffer] });
    const detached = outcome(() => dlbridge.fromTypedArray(other));
    const resizable = new Float32Array(new ArrayBuffer(64, { maxByteLength: 128 }));
    const refused = [1, 2].map(() => outcome(() => dlbridge.fromTypedArray(resizable)).code);
    report({ size: again.size, transfer, kept, detached: detached.code, refused });
  `);
  assert.equal(result.size, 16);
  assert.equal(result.kept, 64, `the pinned buffer was transferred away (${result.transfer})`);
  assert.equal(result.detached, 'ERR_DLBRIDGE_DETACHED');
  assert.deepEqual(result.refused, ['ERR_DLBRIDGE_RESIZABLE', 'ERR_DLBRIDGE_RESIZABLE']);
});
