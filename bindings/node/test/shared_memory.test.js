'use strict';
// Shared memory across processes: emptyShared / toShared / fromShared over sealed memory files.
// Every handle a test makes is remembered, and the last test checks no process holds any of them.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { dlbridge, assertReleases, assertThrowsCode, collect, ARRAY_CASES } = require('./helpers');

const { emptyShared, toShared, fromShared, fromTypedArray, arange, empty } = dlbridge;

const PACKAGE = path.join(__dirname, '..');
const handles = new Set();

/** Remembers a handle for the final check. */
function track(handle) {
  assert.equal(typeof handle, 'string');
  assert.match(handle, /^dlbridge-/);
  handles.add(handle);
  return handle;
}

/** The file through which a handle ("dlbridge-PID-FD-TOKEN") reaches its segment. */
const descriptorPath = (handle) => {
  const [, pid, fd] = handle.split('-');
  return `/proc/${pid}/fd/${fd}`;
};

/** Whether a live process still holds the segment's descriptor, so that the handle opens. */
function held(handle) {
  const token = handle.split('-')[3];
  try {
    return fs.readlinkSync(descriptorPath(handle)).startsWith(`/memfd:dlbridge-${token}`);
  } catch {
    return false;
  }
}

/** Runs `source` in a fresh Node process with `args` (the package path comes first). */
function child(source, ...args) {
  const result = spawnSync(process.execPath, ['-e', source, PACKAGE, ...args], {
    encoding: 'utf8',
  });
  return result;
}

/** Asserts that a child process exited normally, showing its output otherwise. */
function assertChildOk(result) {
  assert.equal(result.status, 0, `child failed (${result.signal}):\n${result.stdout}${result.stderr}`);
}

test('toShared / fromShared round-trip every typed-array dtype, copied once', () => {
  for (const { Ctor, dtype, value, viewCtor = Ctor } of ARRAY_CASES) {
    const array = new Ctor(6);
    array[0] = value;
    array[5] = value;
    const handle = track(toShared(fromTypedArray(array, { shape: [2, 3] })));
    assert.ok(held(handle), 'handed over: the segment waits for its opener');
    const opened = fromShared(handle);
    assert.equal(opened.dtype, dtype);
    assert.deepEqual(opened.shape, [2, 3]);
    assert.deepEqual(opened.strides, [3, 1]);
    assert.equal(opened.copied, true, 'toShared copies once and says so');
    assert.equal(opened.readonly, true);
    const values = opened.toTypedArray({ copy: true });
    assert.ok(values instanceof viewCtor);
    assert.deepEqual([...values], [...new viewCtor(array.buffer)]);
  }
});

test('dtypes without their own typed array travel as their raw elements', () => {
  const cases = [
    { array: new Uint16Array([0x3c00, 0xc000]), dtype: 'float16' },
    { array: new Uint16Array([0x3f80, 0x4000]), dtype: 'bfloat16' },
    { array: new Uint8Array([1, 0, 1]), dtype: 'bool' },
    { array: new Float32Array([1, 2, 3, 4]), dtype: 'complex64' },
    { array: new Uint8Array([0x38, 0x40]), dtype: 'float8_e4m3fn' },
  ];
  for (const { array, dtype } of cases) {
    const opened = fromShared(track(toShared(fromTypedArray(array, { dtype }))));
    assert.equal(opened.dtype, dtype);
    assert.deepEqual([...opened.toTypedArray({ copy: true })], [...array]);
  }
  const scalar = fromShared(track(toShared(fromTypedArray(new Float64Array([2.5]), { shape: [] }))));
  assert.deepEqual(scalar.shape, []);
  assert.deepEqual([...scalar.toTypedArray({ copy: true })], [2.5]);
  const none = emptyShared([0, 7], 'complex128');
  track(none.handle);
  assert.equal(fromShared(none.handle).size, 0);
  assert.equal(none.tensor.toTypedArray().length, 0);
});

test('emptyShared: zero-filled, row-major, and writes are seen through another mapping', () => {
  const { handle, tensor } = emptyShared([3, 4], 'float32');
  track(handle);
  assert.deepEqual(tensor.shape, [3, 4]);
  assert.deepEqual(tensor.strides, [4, 1]);
  assert.equal(tensor.copied, false, 'allocated in shared memory: no copy');
  assert.equal(tensor.readonly, false);
  assert.equal(tensor.dataPtr % 64n, 0n, 'page-aligned data');
  const mine = tensor.toTypedArray();
  assert.ok(mine.every((v) => v === 0));
  mine.set(Array.from({ length: 12 }, (_, i) => i));

  const other = fromShared(handle, { writable: true });
  assert.notEqual(other.dataPtr, tensor.dataPtr, 'a second mapping of the same pages');
  assert.equal(other.copied, false);
  assert.equal(other.readonly, false);
  const theirs = other.toTypedArray();
  assert.deepEqual([...theirs], [...mine]);
  theirs[5] = -1;
  assert.equal(mine[5], -1, 'a write through one mapping is seen through the other');
  mine[0] = 42;
  assert.equal(theirs[0], 42);
  assert.equal(emptyShared(5, 'int64').tensor.dtype, 'int64');
  assert.equal(emptyShared([2]).tensor.dtype, 'float32', 'float32 by default');
});

test('a second process opens the handle, checks the values, writes, and the parent sees it', () => {
  const { handle, tensor } = emptyShared([2, 3], 'float64');
  track(handle);
  const mine = tensor.toTypedArray();
  mine.set([0, 1, 2, 3, 4, 5]);
  const result = child(
    `const [pkg, handle] = process.argv.slice(1);
     const { fromShared } = require(pkg);
     const t = fromShared(handle, { writable: true });
     const v = t.toTypedArray();
     if (t.dtype !== 'float64' || t.shape.join() !== '2,3') throw new Error('metadata ' + t);
     if (v.join() !== '0,1,2,3,4,5') throw new Error('values ' + v.join());
     v[5] = v.reduce((a, b) => a + b);`,
    handle,
  );
  assertChildOk(result);
  assert.deepEqual([...mine], [0, 1, 2, 3, 4, 15]);
  assert.ok(held(handle), 'the child released its reference; ours remains');
});

test('toShared hands the segment to the next opener, even in another process', () => {
  const handle = track(toShared(arange(5, 'uint32')));
  const result = child(
    `const [pkg, handle] = process.argv.slice(1);
     const t = require(pkg).fromShared(handle);
     const v = t.toTypedArray({ copy: true });
     if (v.join() !== '0,1,2,3,4' || !t.copied || !t.readonly) throw new Error(String(t));`,
    handle,
  );
  assertChildOk(result);
  assert.ok(!held(handle), 'the consumer held the last reference and removed the segment');
  assertThrowsCode(
    () => fromShared(handle),
    Error,
    'ERR_DLBRIDGE_SHM_NOT_FOUND',
    new RegExp(`segment "${handle}" does not exist`),
  );
});

test('toShared copies strided and negative-stride tensors into row-major order', () => {
  const array = new Int16Array(Array.from({ length: 12 }, (_, i) => i));
  // [[8, 9, 10, 11], [4, 5, 6, 7], [0, 1, 2, 3]] read every other column: rows reversed.
  const reversed = fromTypedArray(array, { shape: [3, 2], strides: [-4, 2], offset: 8 });
  const opened = fromShared(track(toShared(reversed)));
  assert.deepEqual(opened.strides, [2, 1]);
  assert.equal(opened.copied, true);
  assert.deepEqual([...opened.toTypedArray({ copy: true })], [8, 10, 4, 6, 0, 2]);

  const transposed = fromTypedArray(new Float32Array([1, 2, 3, 4, 5, 6]), {
    shape: [3, 2],
    strides: [1, 3],
  });
  const t = fromShared(track(toShared(transposed)));
  assert.deepEqual([...t.toTypedArray({ copy: true })], [1, 4, 2, 5, 3, 6]);
  assert.ok(t.toTypedArray({ unsafeIgnoreReadOnly: true }) instanceof Float32Array, 'row-major');
});

test('toShared copies: later writes to the source do not reach the segment', () => {
  const array = new Float32Array([1, 2, 3]);
  const handle = track(toShared(fromTypedArray(array)));
  array[0] = 100;
  assert.deepEqual([...fromShared(handle).toTypedArray({ copy: true })], [1, 2, 3]);
  const shared = emptyShared([2], 'int32');
  track(shared.handle);
  shared.tensor.toTypedArray().set([7, 8]);
  const again = fromShared(track(toShared(shared.tensor)));
  assert.deepEqual([...again.toTypedArray({ copy: true })], [7, 8]);
  assert.equal(again.copied, true);
});

test('read-only mappings follow the read-only rules of toTypedArray', () => {
  const { handle, tensor } = emptyShared([4], 'int32');
  track(handle);
  tensor.toTypedArray().set([1, 2, 3, 4]);
  const readonly = fromShared(handle);
  assert.equal(readonly.readonly, true);
  assert.equal(fromShared(handle, {}).readonly, true, 'read-only by default');
  assert.equal(fromShared(handle, { writable: false }).readonly, true);
  assertThrowsCode(
    () => readonly.toTypedArray(),
    Error,
    'ERR_DLBRIDGE_READ_ONLY',
    /copy: true.*unsafeIgnoreReadOnly: true/,
  );
  const copy = readonly.toTypedArray({ copy: true });
  copy[0] = 100;
  assert.deepEqual([...tensor.toTypedArray()], [1, 2, 3, 4], 'the copy is private');
  const view = readonly.toTypedArray({ unsafeIgnoreReadOnly: true });
  assert.deepEqual([...view], [1, 2, 3, 4]);
  tensor.toTypedArray()[3] = 40;
  assert.equal(view[3], 40, 'a live view of the shared pages, not a copy');
  assert.equal(fromShared(handle, { writable: true }).readonly, false);
  assertThrowsCode(
    () => fromShared(handle, { writable: 'yes' }),
    TypeError,
    'ERR_DLBRIDGE_INVALID_ARGUMENT',
    /fromShared: writable must be a boolean, got the string "yes"/,
  );
  assertThrowsCode(
    () => fromShared(handle, 'rw'),
    TypeError,
    'ERR_DLBRIDGE_INVALID_ARGUMENT',
    /fromShared: options must be an object/,
  );
});

test('a write through the unsafe view of a read-only mapping stays in that process', () => {
  const { handle, tensor } = emptyShared([4], 'uint8');
  track(handle);
  // In a child: before read-only mappings were copy-on-write, this write killed it (SIGSEGV).
  const result = child(
    `const [pkg, handle] = process.argv.slice(1);
     const v = require(pkg).fromShared(handle).toTypedArray({ unsafeIgnoreReadOnly: true });
     console.log('read', v[0]);
     v[0] = 1;
     console.log('wrote', v[0]);`,
    handle,
  );
  assertChildOk(result);
  assert.match(result.stdout, /read 0\nwrote 1/);
  assert.equal(tensor.toTypedArray()[0], 0, 'the segment is unchanged');
});

test('a size the system cannot back throws the allocation error empty throws', () => {
  const huge = [2 ** 40];
  assertThrowsCode(() => empty(huge, 'uint8'), RangeError, 'ERR_DLBRIDGE_ALLOCATION_FAILED');
  assertThrowsCode(() => emptyShared(huge, 'uint8'), RangeError, 'ERR_DLBRIDGE_ALLOCATION_FAILED');
});

test('a toShared handle opens once', () => {
  const handle = track(toShared(arange(3, 'int32')));
  assert.deepEqual([...fromShared(handle).toTypedArray({ copy: true })], [0, 1, 2]);
  assert.ok(!held(handle), 'the keeper let go before fromShared returned');
  assertThrowsCode(() => fromShared(handle), Error, 'ERR_DLBRIDGE_SHM_NOT_FOUND');
});

test('native counts return to baseline after gc(), and released segments are removed', async () => {
  const made = [];
  await assertReleases(() => {
    const { handle, tensor } = emptyShared([16], 'float64');
    made.push(track(handle));
    const view = tensor.toTypedArray();
    view[1] = 1;
    const other = fromShared(handle, { writable: true });
    other.toTypedArray()[2] = 2;
    fromShared(handle).toTypedArray({ copy: true });
    const exported = track(toShared(tensor));
    made.push(exported);
    fromShared(exported).toTypedArray({ unsafeIgnoreReadOnly: true });
    made.push(track(toShared(empty([3, 3]))));
    fromShared(made[2], { writable: true });
  });
  for (const handle of made) assert.ok(!held(handle), `${handle} still held`);
});

test('errors: missing, invalid and malformed handles; wrong arguments', () => {
  const gone = `dlbridge-${process.pid}-999999-00000000000000aa`;
  assertThrowsCode(
    () => fromShared(gone),
    Error,
    'ERR_DLBRIDGE_SHM_NOT_FOUND',
    new RegExp(`"${gone}" does not exist`),
  );
  for (const bad of ['', '.', '..', '.hidden', '../etc/passwd', 'a/b', 'x'.repeat(300), 'space here',
    'dlbridge-never-made', 'dlbridge-1-2-3']) {
    assertThrowsCode(() => fromShared(bad), TypeError, 'ERR_DLBRIDGE_INVALID_SHM_HANDLE');
  }
  for (const [bad, shown] of [[42, 'the number 42'], [undefined, 'undefined'], [{}, 'an object']]) {
    assertThrowsCode(
      () => fromShared(bad),
      TypeError,
      'ERR_DLBRIDGE_INVALID_ARGUMENT',
      new RegExp(`fromShared: handle must be a shared-memory handle string, got ${shown}`),
    );
  }
  for (const bad of [{}, new Float32Array(2), 'dlbridge-x', null]) {
    assertThrowsCode(
      () => toShared(bad),
      TypeError,
      'ERR_DLBRIDGE_INVALID_ARGUMENT',
      /toShared: tensor must be a Tensor/,
    );
  }
  assertThrowsCode(() => toShared(Object.create(dlbridge.Tensor.prototype)), TypeError,
    'ERR_DLBRIDGE_INVALID_ARGUMENT');
  assertThrowsCode(() => emptyShared([2, -1]), RangeError, 'ERR_DLBRIDGE_NEGATIVE_DIM');
  assertThrowsCode(() => emptyShared([2], 'float33'), TypeError, 'ERR_DLBRIDGE_UNKNOWN_DTYPE');
  assertThrowsCode(() => emptyShared('2'), TypeError, 'ERR_DLBRIDGE_INVALID_ARGUMENT');
});

test('errors: corrupt headers written by a peer; a peer cannot truncate a segment', () => {
  const { handle, tensor } = emptyShared([2, 2], 'int32');
  track(handle);
  // What a hostile process of the same user can do: open the segment's file and write it.
  const fd = fs.openSync(descriptorPath(handle), 'r+');
  try {
    const good = Buffer.alloc(4096);
    fs.readSync(fd, good, 0, 4096, 0);
    const corrupt = (at, bytes) => {
      fs.writeSync(fd, good, 0, 4096, 0);
      fs.writeSync(fd, bytes, 0, bytes.length, at);
    };
    const u32 = (n) => Buffer.from(new Uint32Array([n]).buffer);
    // magic at byte 0, ndim at 12, dtype code at 32 (see crates/dlbridge/src/shm.rs): corrupt
    // headers are invalid segments, not argument errors.
    corrupt(0, Buffer.alloc(8));
    assertThrowsCode(() => fromShared(handle), Error, 'ERR_DLBRIDGE_SHM_INVALID',
      new RegExp(`"${handle}" is invalid: not a dlbridge segment`));
    corrupt(12, u32(5000));
    assertThrowsCode(() => fromShared(handle), Error, 'ERR_DLBRIDGE_SHM_INVALID', /ndim 5000/);
    corrupt(32, Buffer.from([99]));
    assertThrowsCode(() => fromShared(handle), Error, 'ERR_DLBRIDGE_SHM_INVALID', /type code 99/);
    fs.writeSync(fd, good, 0, 4096, 0);
    for (const size of [0, 100, 1 << 20]) {
      assert.throws(() => fs.ftruncateSync(fd, size), { code: 'EPERM' }, `resize to ${size}`);
    }
    const again = fromShared(handle, { writable: true });
    again.toTypedArray()[3] = 7;
    assert.equal(tensor.toTypedArray()[3], 7, 'both mappings work after the attempts');
  } finally {
    fs.closeSync(fd);
  }
});

test('no process holds this suite\'s segments any more', async () => {
  await collect();
  assert.deepEqual([...handles].filter(held), []);
});
