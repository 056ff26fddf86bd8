'use strict';
// worker_threads: the addon loads per thread, tensors cross threads as pointers, and the last
// holder may release a JS buffer from another thread.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { dlbridge, collect, assertReleases, assertThrowsCode, gcWatcher } = require('./helpers');

const { fromTypedArray, importPointer } = dlbridge;

/** Runs `source` in a worker (with `dlbridge` in scope) and resolves with its first message. */
function runWorker(source, workerData) {
  const prelude = `const dlbridge = require(${JSON.stringify(path.join(__dirname, '..'))});\n` +
    `const { parentPort, workerData } = require('node:worker_threads');\n`;
  const worker = new Worker(prelude + source, { eval: true, workerData });
  return new Promise((resolve, reject) => {
    let message;
    worker.on('message', (m) => { message = m; });
    worker.on('error', reject);
    worker.on('exit', (code) => (code === 0 ? resolve(message) : reject(new Error(`worker exited with ${code}`))));
  });
}

test('workers load the addon and exchange tensors on their own', async () => {
  const result = await runWorker(`
    const a = dlbridge.fromTypedArray(new Float32Array([1, 2, 3]));
    const b = dlbridge.arange(4, 'int32').toTypedArray();
    const c = dlbridge.importPointer(a.exportPointer()).toTypedArray();
    parentPort.postMessage({ sum: c.reduce((x, y) => x + y) + b.reduce((x, y) => x + y) });
  `);
  assert.equal(result.sum, 12);
});

test('JS memory exported by the main thread is written and released by a worker', async () => {
  await assertReleases(async () => {
    const array = new Float64Array([1, 2, 3, 4]);
    const address = fromTypedArray(array).exportPointer();
    const result = await runWorker(`
      const view = dlbridge.importPointer(workerData.address).toTypedArray();
      view[0] = 42;
      parentPort.postMessage({ sum: view.reduce((x, y) => x + y) });
    `, { address });
    assert.equal(result.sum, 51);
    assert.equal(array[0], 42, "the worker wrote the main thread's memory");
  });
});

test('a worker releasing the last hold on main-thread memory unpins it on the main thread', async () => {
  const watcher = gcWatcher();
  let address = (() => {
    const array = new Int32Array([5, 6, 7]);
    watcher.watch(array.buffer);
    return fromTypedArray(array).exportPointer();
  })();
  await collect();
  await runWorker(`
    dlbridge.releasePointer(workerData.address);
    parentPort.postMessage('released');
  `, { address });
  address = null;
  await collect();
  assert.equal(watcher.collected(), 1, 'the reference was deleted on the main thread');
});

test("a worker's typed array imported elsewhere is a copy, refused once it exited", async () => {
  await assertReleases(async () => {
    const worker = new Worker(`
      const dlbridge = require(${JSON.stringify(path.join(__dirname, '..'))});
      const { parentPort } = require('node:worker_threads');
      const array = new Float32Array([1, 2, 3, 4, 5, 6]);
      const options = { shape: [2, 3], strides: [1, 2], readonly: true };
      const tensor = dlbridge.fromTypedArray(array, options);
      parentPort.postMessage({ live: tensor.exportPointer(), orphan: tensor.exportPointer() });
      parentPort.once('message', () => process.exit(0));
    `, { eval: true });
    const { live, orphan } = await new Promise((resolve) => worker.once('message', resolve));
    const copy = importPointer(live);
    assert.equal(copy.copied, true);
    assert.equal(copy.readonly, true, 'the copy keeps the read-only flag');
    assert.deepEqual([copy.shape, copy.strides], [[2, 3], [3, 1]], 'a row-major copy');
    worker.postMessage('exit');
    await new Promise((resolve) => worker.once('exit', resolve));
    await collect();
    assert.deepEqual([...copy.toTypedArray({ copy: true })], [1, 3, 5, 2, 4, 6]);
    assert.equal(copy.get([1, 2]), 6);
    assertThrowsCode(() => importPointer(orphan), Error, 'ERR_DLBRIDGE_MEMORY_GONE', /worker that has exited/);
  });
});

test('Rust memory made in a worker outlives the worker', async () => {
  await assertReleases(async () => {
    const { address } = await runWorker(`
      const tensor = dlbridge.arange(1000, 'float64');
      tensor.toTypedArray()[0] = -1;
      parentPort.postMessage({ address: tensor.exportPointer() });
    `);
    await collect();
    const view = importPointer(address).toTypedArray();
    assert.equal(view[0], -1);
    assert.equal(view[999], 999);
  });
});

test('many workers at once do not crash and release everything', async () => {
  await assertReleases(async () => {
    const array = new Int32Array(1024).fill(1);
    const addresses = Array.from({ length: 4 }, () => fromTypedArray(array).exportPointer());
    const sums = await Promise.all(addresses.map((address) => runWorker(`
      let total = 0;
      for (let i = 0; i < 200; i++) {
        const t = dlbridge.empty([256], 'float32');
        total += t.toTypedArray().length;
        dlbridge.importPointer(dlbridge.fromTypedArray(new Uint8Array(64)).exportPointer());
      }
      const shared = dlbridge.importPointer(workerData.address).toTypedArray();
      parentPort.postMessage(total + shared.reduce((x, y) => x + y));
    `, { address })));
    assert.deepEqual(sums, [52224, 52224, 52224, 52224]);
  });
});
