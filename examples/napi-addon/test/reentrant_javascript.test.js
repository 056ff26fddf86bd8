'use strict';
// JavaScript that runs while this addon converts its arguments: a getter of a later argument
// (an options object), or one that user code put on Object.prototype while a dlbridge Tensor
// over JS memory crosses for the first time. Such code may close or detach an argument taken
// before: a tensor lent to the call stays alive until the call returns, a first crossing runs
// none of the caller's code, and no inherited property changes a tensor's native twin. Each
// case runs in a child process, which a use after free would kill. Run with node --test
// --expose-gc.

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const test = require('node:test');

const PRELUDE = `
const dl = require(${JSON.stringify(path.resolve(__dirname, '../../../bindings/node'))});
const ops = require(${JSON.stringify(path.resolve(__dirname, '..'))});
const N = 1 << 20;
let ran = false;
`;

/** Runs `body` after the prelude in a child Node; returns its exit status and output. */
function child(body) {
  const result = spawnSync(process.execPath, ['--expose-gc', '-e', PRELUDE + body], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, signal: result.signal, out: result.stdout + result.stderr };
}

/** A getter on Object.prototype's `dtype` that runs `action` once and records that it ran. */
const pollute = (action) => `
Object.defineProperty(Object.prototype, 'dtype', {
  configurable: true,
  get() { ran = true; ${action}; return undefined; },
});
`;

test('a getter on Object.prototype does not run when a tensor is lent beside a first crossing', () => {
  const { status, signal, out } = child(`
const y = dl.empty([N]);
y.toTypedArray().fill(2);
const x = dl.fromTypedArray(new Float32Array(N).fill(1), { shape: [N] });
${pollute('y.close(); global.gc()')}
ops.add_(y, x);
console.log(JSON.stringify({ ran, closed: y.closed, first: y.get(0), last: y.get(N - 1) }));
`);
  assert.equal(signal, null, out);
  assert.equal(status, 0, out);
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), { ran: false, closed: false, first: 3, last: 3 });
});

test('a typed-array argument cannot be detached by a getter during a first crossing', () => {
  const { status, signal, out } = child(`
const ta = new Float32Array(N).fill(2);
const x = dl.fromTypedArray(new Float32Array(N).fill(1), { shape: [N] });
${pollute('structuredClone(ta.buffer, { transfer: [ta.buffer] }); global.gc()')}
ops.add_(ta, x);
console.log(JSON.stringify({ ran, length: ta.length, first: ta[0], last: ta[N - 1] }));
`);
  assert.equal(signal, null, out);
  assert.equal(status, 0, out);
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), { ran: false, length: 1 << 20, first: 3, last: 3 });
});

test('an inherited dtype does not reinterpret a tensor over JS memory', () => {
  const { status, signal, out } = child(`
const t = dl.fromTypedArray(new Uint16Array([0x3c00, 0x4000, 0x4200, 7]), { shape: [3] });
Object.prototype.dtype = 'float16';
let refused = null;
try { ops.sumF16(t); } catch (error) { refused = error.code; }
const exported = dl.importPointer(t.exportPointer());
delete Object.prototype.dtype;
console.log(JSON.stringify({ own: t.dtype, refused, exported: exported.dtype, values: Array.from(exported.toTypedArray()) }));
`);
  assert.equal(signal, null, out);
  assert.equal(status, 0, out);
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), {
    own: 'uint16',
    refused: 'ERR_DLBRIDGE_DTYPE_MISMATCH',
    exported: 'uint16',
    values: [0x3c00, 0x4000, 0x4200],
  });
});

test('a closed tensor over JS memory is refused at its crossing, and its error runs no setter', () => {
  const { status, signal, out } = child(`
const t = dl.fromTypedArray(new Float32Array(4), { shape: [4] });
t.close();
let crossing = null;
try { ops.length(t); } catch (e) { crossing = e.code; }
Object.defineProperty(Object.prototype, 'code', { configurable: true, set() { ran = true; } });
let own = null;
try { t.get(0); } catch (e) { own = e.code; }
delete Object.prototype.code;
console.log(JSON.stringify({ ran, crossing, own }));
`);
  assert.equal(signal, null, out);
  assert.equal(status, 0, out);
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), {
    ran: false,
    crossing: 'ERR_DLBRIDGE_MEMORY_GONE',
    own: 'ERR_DLBRIDGE_CLOSED',
  });
});

test('a lent tensor closed by a getter of a later argument stays alive until the call returns', () => {
  const { status, signal, out } = child(`
const x = dl.empty([N]);
const before = dl.diagnostics().liveTensors;
ops.scaleBy(x, { get factor() { ran = true; x.close(); global.gc(); global.gc(); return 3; } });
const during = dl.diagnostics().liveTensors;
setTimeout(() => {
  const after = dl.diagnostics().liveTensors;
  console.log(JSON.stringify({ ran, closed: x.closed, kept: during === before, released: after === before - 1 }));
}, 50);
`);
  assert.equal(signal, null, out);
  assert.equal(status, 0, out);
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), { ran: true, closed: true, kept: true, released: true });
});

test('a tensor over JS memory closed by a getter of a later argument stays alive until the call returns', () => {
  const { status, signal, out } = child(`
let x = dl.fromTypedArray(new Float32Array(N).fill(2), { shape: [N] });
ops.scaleBy(x, { get factor() { ran = true; x.close(); x = null; global.gc(); global.gc(); return 3; } });
console.log(JSON.stringify({ ran }));
`);
  assert.equal(signal, null, out);
  assert.equal(status, 0, out);
  assert.deepEqual(JSON.parse(out.trim().split('\n').pop()), { ran: true });
});
