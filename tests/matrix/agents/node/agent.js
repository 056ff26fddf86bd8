'use strict';
// The Node agent of the cross-language matrix (tests/matrix/PROTOCOL.md): one request line in on
// stdin, one response line out on stdout. Launch from the repository root with
//
//   node --expose-gc tests/matrix/agents/node/agent.js
//
// (--expose-gc: the release checks collect garbage and compare dlbridge's native counts).
// Everything that is not a response goes to stderr.
//
// `host GUEST out|in DTYPE LAYOUT` (in-process pairs, PROTOCOL.md) loads the guest library
// named by DLBRIDGE_MATRIX_GUEST_<GUEST> (tests/matrix/agents/c/guest.h) with koffi (installed
// from this folder's package.json by scripts/test/matrix.sh): `out` hands `exportPointer()` to
// the guest, `in` imports the guest's export with `importPointer`. Pointers cross koffi as
// `uintptr_t` (the same C ABI as a pointer), so they stay BigInts on this side. With
// DLBRIDGE_MATRIX_GUEST_RUST_NAPI set, `host rust` loads the Rust guest's napi-rs addon instead
// (`napiGuest`), and tensors cross as its arguments and results.
//
// Lifetimes: V8 keeps an async function's locals (block-scoped ones too) alive across `await`,
// so every tensor and typed array is made and checked in synchronous helpers, and the ones that
// must live across a collection are held in plain state objects whose fields are cleared before
// collecting. Only primitives (handles, counts) stay in the async request handlers.

const readline = require('node:readline');
const { setImmediate: nextTurn } = require('node:timers/promises');
const dlbridge = require('../../../../bindings/node');

const { fromTypedArray, fromTensorObject, importPointer, toShared, fromShared, addressOf, diagnostics } = dlbridge;

// ---------------------------------------------------------------------------------------------
// dtypes: the typed array of the producer's memory, its `dtype` option, elements per tensor
// element, and how the formula's values become that array's elements (and back).

/** float16 bits of a number exactly representable as a normal float16 (or zero). */
function float16Bits(x) {
  if (x === 0) return Object.is(x, -0) ? 0x8000 : 0;
  const sign = x < 0 ? 0x8000 : 0;
  const a = Math.abs(x);
  const exponent = Math.floor(Math.log2(a));
  const mantissa = (a / 2 ** exponent - 1) * 1024;
  if (exponent < -14 || exponent > 15 || !Number.isInteger(mantissa)) {
    throw new Error(`${x} is not exactly representable as a normal float16`);
  }
  return sign | ((exponent + 15) << 10) | mantissa;
}

/** The number a float16 bit pattern stands for. */
function float16Value(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);

/** bfloat16 bits of a number exactly representable as a bfloat16. */
function bfloat16Bits(x) {
  f32[0] = x;
  if (f32[0] !== x || (f32Bits[0] & 0xffff) !== 0) {
    throw new Error(`${x} is not exactly representable as a bfloat16`);
  }
  return f32Bits[0] >>> 16;
}

/** The number a bfloat16 bit pattern stands for. */
function bfloat16Value(bits) {
  f32Bits[0] = (bits & 0xffff) << 16;
  return f32[0];
}

const integer = (v) => v - 30;
const half = (v) => (v - 30) * 0.5;
const identity = (x) => x;

/**
 * Per dtype: `Array` (the typed array), `dtype` (the option, when it is not the array's own),
 * `per` (array elements per tensor element), `encode(v)` → array elements for formula value v,
 * `decode(elements)` → the value to compare (a string for display and comparison),
 * `sentinel(element0)` → array elements of the sentinel, `sentinelValue(element0)` → the sentinel
 * as `Tensor.set` takes it, `show(x)` → a `Tensor.get` result as `expected` spells it.
 */
function scalar(Array, expected, toArray, fromArray, sentinel) {
  return {
    Array,
    per: 1,
    encode: (v) => [toArray(expected(v))],
    expected: (v) => String(expected(v)),
    decode: (elements) => String(fromArray(elements[0])),
    sentinel: (element0) => [toArray(sentinel(element0))],
    sentinelValue: sentinel,
    show: String,
  };
}

const DTYPES = {
  bool: {
    ...scalar(Uint8Array, (v) => v % 2 === 1, (b) => (b ? 1 : 0), (byte) => (byte === 0 ? 'false' : byte === 1 ? 'true' : `byte ${byte}`), (e0) => !e0),
    dtype: 'bool',
  },
  int8: scalar(Int8Array, integer, identity, identity, () => 42),
  int16: scalar(Int16Array, integer, identity, identity, () => 42),
  int32: scalar(Int32Array, integer, identity, identity, () => 42),
  int64: scalar(BigInt64Array, (v) => BigInt(v - 30), identity, identity, () => 42n),
  uint8: scalar(Uint8Array, identity, identity, identity, () => 42),
  uint16: scalar(Uint16Array, identity, identity, identity, () => 42),
  uint32: scalar(Uint32Array, identity, identity, identity, () => 42),
  uint64: scalar(BigUint64Array, (v) => BigInt(v), identity, identity, () => 42n),
  float16: { ...scalar(Uint16Array, half, float16Bits, float16Value, () => 42), dtype: 'float16' },
  bfloat16: { ...scalar(Uint16Array, half, bfloat16Bits, bfloat16Value, () => 42), dtype: 'bfloat16' },
  float32: scalar(Float32Array, half, identity, identity, () => 42),
  float64: scalar(Float64Array, half, identity, identity, () => 42),
};
for (const [name, Array] of [
  ['complex64', Float32Array],
  ['complex128', Float64Array],
]) {
  DTYPES[name] = {
    Array,
    dtype: name,
    per: 2,
    encode: (v) => [(v - 30) * 0.5, (30 - v) * 0.25],
    expected: (v) => `${(v - 30) * 0.5}${(30 - v) * 0.25 < 0 ? '' : '+'}${(30 - v) * 0.25}i`,
    decode: ([re, im]) => `${re}${im < 0 || Object.is(im, -0) ? '' : '+'}${im}i`,
    sentinel: () => [42, 0],
    sentinelValue: () => [42, 0],
    show: (parts) => `${parts[0]}${parts[1] < 0 || Object.is(parts[1], -0) ? '' : '+'}${parts[1]}i`,
  };
}

/** Logical element 0's value (v = 3) as the formula gives it; the bool sentinel is its negation. */
const element0 = (spec) => spec.expected(3) === 'true';

// ---------------------------------------------------------------------------------------------
// Layouts: the case's shape, and how the producer lays it out in its memory (in elements).

const LAYOUTS = {
  c: { shape: [3, 4], strides: [4, 1], offset: 0, length: 12 },
  f: { shape: [3, 4], strides: [1, 3], offset: 0, length: 12 },
  strided: { shape: [3, 4], strides: [16, 2], offset: 0, length: 48 },
  negative: { shape: [3, 4], strides: [4, -1], offset: 3, length: 12 },
  zero_d: { shape: [], strides: [], offset: 0, length: 1 },
  empty: { shape: [0, 3], strides: [3, 1], offset: 0, length: 0 },
  readonly: { shape: [3, 4], strides: [4, 1], offset: 0, length: 12, readonly: true },
};
const ROW_MAJOR = new Set(['c', 'zero_d', 'empty', 'readonly']);

const product = (shape) => shape.reduce((a, b) => a * b, 1);
const formula = (i) => (7 * i + 3) % 61;

/** Row-major logical index → element offset from element 0, for `strides`. */
function elementOffset(i, shape, strides) {
  let offset = 0;
  for (let axis = shape.length - 1; axis >= 0; axis--) {
    offset += (i % shape[axis]) * strides[axis];
    i = Math.floor(i / shape[axis]);
  }
  return offset;
}

/** Row-major strides of `shape` (in elements). */
function rowMajor(shape) {
  const strides = new Array(shape.length);
  let stride = 1;
  for (let axis = shape.length - 1; axis >= 0; axis--) {
    strides[axis] = stride;
    stride *= shape[axis];
  }
  return strides;
}

class CheckFailed extends Error {}
const check = (condition, message) => {
  if (!condition) throw new CheckFailed(message);
};
const fmt = (x) => (Array.isArray(x) ? `[${x.join(', ')}]` : String(x));

/** The producer's memory for a case: a typed array with the formula's values laid out. */
function makeProducerArray(spec, layout) {
  const array = new spec.Array(layout.length * spec.per);
  const n = product(layout.shape);
  for (let i = 0; i < n; i++) {
    const at = (layout.offset + elementOffset(i, layout.shape, layout.strides)) * spec.per;
    spec.encode(formula(i)).forEach((element, k) => {
      array[at + k] = element;
    });
  }
  return array;
}

/** The producer's tensor over that array. */
function makeProducerTensor(spec, layout, array) {
  const options = { shape: layout.shape, strides: layout.strides, offset: layout.offset };
  if (spec.dtype) options.dtype = spec.dtype;
  if (layout.readonly) options.readonly = true;
  return fromTypedArray(array, options);
}

/** Checks every element of a row-major typed array (of `n` tensor elements); returns n. */
function checkElements(spec, elements, n, what) {
  check(elements.length === n * spec.per, `${what} has ${elements.length} typed-array elements, expected ${n * spec.per}`);
  for (let i = 0; i < n; i++) {
    const got = spec.decode(Array.from(elements.subarray(i * spec.per, (i + 1) * spec.per)));
    const want = spec.expected(formula(i));
    check(got === want, `${what} element ${i} is ${got}, expected ${want}`);
  }
  return n;
}

/** Checks every element of `tensor` in place, read with `get` at its row-major logical index. */
function checkElementsByIndex(spec, tensor, shape, what) {
  const n = product(shape);
  for (let i = 0; i < n; i++) {
    const index = new Array(shape.length);
    for (let axis = shape.length - 1, rest = i; axis >= 0; axis--) {
      index[axis] = rest % shape[axis];
      rest = Math.floor(rest / shape[axis]);
    }
    const got = spec.show(tensor.get(index));
    const want = spec.expected(formula(i));
    check(got === want, `${what} element ${i} (index ${fmt(index)}, read with get) is ${got}, expected ${want}`);
  }
  return n;
}

/** Checks that writing the sentinel at `index` through the read-only `tensor` is refused. */
function checkWriteRefused(spec, tensor, index) {
  let refused = false;
  try {
    tensor.set(index, spec.sentinelValue(element0(spec)));
  } catch (error) {
    refused = error.code === 'ERR_DLBRIDGE_READ_ONLY';
  }
  check(refused, 'a write through the read-only import was not refused with ERR_DLBRIDGE_READ_ONLY');
}

// ---------------------------------------------------------------------------------------------
// Release checks: dlbridge's native counts, after collecting until they stop changing
// (finalizers run on later turns of the event loop).

async function collect(rounds = 30) {
  let last = '';
  for (let i = 0; i < rounds; i++) {
    global.gc();
    await nextTurn();
    const now = JSON.stringify(diagnostics());
    if (now === last && i >= 3) return;
    last = now;
  }
}

// Whether the last request ended with its final release check passed: collected until the counts
// stopped changing, with nothing of its own left alive. The next request's baseline then needs no
// collection of its own (one would find nothing to free); after any other end it collects first.
let settled = false;
let settledAtStart = false;

/** The counts a request starts from, with the leftovers of an earlier request collected. */
async function baseline() {
  if (!settledAtStart) await collect();
  return diagnostics();
}

/** A request's last check: collected, exactly `released` releases and nothing left alive. */
async function finalCheck(base, released, what) {
  await collect();
  checkAllReleased(base, released, what);
  settled = true;
}

/** Counts relative to `base`: every field of now − base. */
function delta(base) {
  const now = diagnostics();
  const out = {};
  for (const key of Object.keys(now)) out[key] = now[key] - base[key];
  return out;
}
const showDelta = (d) =>
  `released ${d.releasedTensors}, live ${d.liveTensors}, pinned JS buffers ${d.pinnedJsBuffers}, ` +
  `external buffers ${d.externalBuffers}, pending exports ${d.pendingExports}`;

/** After everything a request made is gone: exactly `released` tensors released, nothing live. */
function checkAllReleased(base, released, what) {
  const d = delta(base);
  check(
    d.releasedTensors === released &&
      d.liveTensors === 0 &&
      d.pinnedJsBuffers === 0 &&
      d.externalBuffers === 0 &&
      d.pendingExports === 0,
    `${what}: expected ${released} release(s) and nothing left alive, counts changed by: ${showDelta(d)}`,
  );
}

// ---------------------------------------------------------------------------------------------
// Requests.

/** Parses DTYPE LAYOUT into the case (an unknown name is a `fail` naming it). */
function caseOf(words) {
  const [dtypeName, layoutName] = words;
  const spec = DTYPES[dtypeName];
  const layout = LAYOUTS[layoutName];
  if (!spec) throw new CheckFailed(`unknown dtype ${dtypeName}`);
  if (!layout) throw new CheckFailed(`unknown layout ${layoutName}`);
  return { dtypeName, spec, layout, layoutName };
}

/** `self`, part 1: produce, export, import, check, write the sentinel. Returns held state. */
function selfStart({ dtypeName, spec, layout, layoutName }) {
  const state = { array: makeProducerArray(spec, layout), producer: null, imported: null };
  state.producer = makeProducerTensor(spec, layout, state.array);
  const n = product(layout.shape);
  const before = diagnostics();
  const pointer = state.producer.exportPointer();
  check(typeof pointer === 'bigint' && pointer !== 0n, `exportPointer returned ${pointer}`);
  state.imported = importPointer(pointer);
  const u = state.imported;
  const t = state.producer;
  check(delta(before).pendingExports === 0, `the import did not take the export: ${showDelta(delta(before))}`);

  check(fmt(u.shape) === fmt(layout.shape), `import shape ${fmt(u.shape)}, expected ${fmt(layout.shape)}`);
  check(t.dtype === dtypeName, `producer dtype ${t.dtype}, expected ${dtypeName}`);
  check(u.dtype === dtypeName, `import dtype ${u.dtype}, expected ${dtypeName}`);
  if (n > 0) {
    check(fmt(u.strides) === fmt(layout.strides), `import strides ${fmt(u.strides)}, expected ${fmt(layout.strides)}`);
  }
  check(u.readonly === !!layout.readonly, `import readonly is ${u.readonly}, expected ${!!layout.readonly}`);
  check(u.copied === false, 'import copied is true on an in-process exchange');
  // Zero-copy: the import's element 0 is the producer's, which is in the producer's array.
  check(u.dataPtr === t.dataPtr, `import element 0 at ${u.dataPtr}, producer's at ${t.dataPtr}`);
  if (n > 0) {
    const expected = addressOf(state.array) + BigInt(layout.offset * spec.per * state.array.BYTES_PER_ELEMENT);
    check(t.dataPtr === expected, `producer element 0 at ${t.dataPtr}, its typed array puts it at ${expected}`);
  }

  // Every element, read in place through the import: a typed-array view where the layout is
  // row-major (and writable), the strided element accessor (`get`) otherwise.
  const viewable = ROW_MAJOR.has(layoutName) && !layout.readonly;
  let elements = null;
  if (viewable) {
    elements = u.toTypedArray();
    if (n > 0) {
      check(elements.buffer === state.array.buffer, "the import's typed array is not a view of the producer's ArrayBuffer");
    }
    checkElements(spec, elements, n, 'import');
  } else {
    checkElementsByIndex(spec, u, layout.shape, 'import');
  }

  // The sentinel, written to logical element 0 through the import, read through the producer.
  const origin = layout.shape.map(() => 0);
  if (layout.readonly && n > 0) {
    checkWriteRefused(spec, u, origin);
  } else if (n > 0) {
    const value = spec.sentinel(element0(spec));
    if (viewable) {
      value.forEach((element, k) => {
        elements[k] = element;
      });
    } else {
      u.set(origin, spec.sentinelValue(element0(spec)));
    }
    const at = layout.offset * spec.per;
    const seen = Array.from(state.array.subarray(at, at + spec.per));
    check(
      seen.every((element, k) => element === value[k]),
      `sentinel ${spec.decode(value)} written through the import, producer reads ${spec.decode(seen)}`,
    );
  }
  elements = null;
  return { state, n, address: t.dataPtr };
}

async function selfCase(words) {
  const kase = caseOf(words);
  const base = await baseline();
  const { state, n, address } = selfStart(kase);
  // Drop the producer's Tensor object (its array stays with the test): the import alone holds
  // the memory now, so nothing may be released yet.
  state.producer = null;
  await collect();
  let d = delta(base);
  check(
    d.releasedTensors === 0 && d.liveTensors === 1 && d.pinnedJsBuffers === 1,
    `released before the import was dropped: ${showDelta(d)}`,
  );
  check(state.imported.dataPtr === address, `import element 0 moved to ${state.imported.dataPtr} from ${address}`);
  state.imported = null;
  state.array = null;
  await finalCheck(base, 1, 'after dropping the import');
  return `ok ${n} zero-copy`;
}

/** `produce`, part 1: the case tensor, handed over to a new segment. */
function produceStart({ spec, layout }) {
  const state = { array: makeProducerArray(spec, layout), producer: null };
  state.producer = makeProducerTensor(spec, layout, state.array);
  state.handle = toShared(state.producer);
  check(typeof state.handle === 'string' && state.handle.length > 0, `toShared returned ${state.handle}`);
  return state;
}

/** Removes a segment nobody will open (a produce that failed after the hand-over). */
function discard(handle) {
  try {
    fromShared(handle);
  } catch (error) {
    process.stderr.write(`node agent: could not remove segment ${handle}: ${error.message}\n`);
  }
}

async function produceCase(words) {
  const kase = caseOf(words);
  const base = await baseline();
  const state = produceStart(kase);
  try {
    // toShared keeps no reference: only our own tensor holds the producer's memory.
    await collect();
    let d = delta(base);
    check(d.releasedTensors === 0 && d.liveTensors === 1, `after toShared, with the tensor held: ${showDelta(d)}`);
    state.producer = null;
    state.array = null;
    await finalCheck(base, 1, 'after dropping the producer');
  } catch (error) {
    state.producer = null;
    state.array = null;
    discard(state.handle);
    await collect();
    throw error;
  }
  return `ok ${state.handle}`;
}

/** `consume`, part 1: open, check, return the element count. */
function consumeCheck({ dtypeName, spec, layout }, handle) {
  const readonly = !!layout.readonly;
  const tensor = fromShared(handle, { writable: !readonly });
  const n = product(layout.shape);
  const want = dtypeName;
  check(fmt(tensor.shape) === fmt(layout.shape), `shape ${fmt(tensor.shape)}, expected ${fmt(layout.shape)}`);
  check(tensor.dtype === want, `dtype ${tensor.dtype}, expected ${want}`);
  check(tensor.copied === true, 'copied is false, expected true (a shared-memory exchange copies once)');
  check(tensor.readonly === readonly, `readonly is ${tensor.readonly}, expected ${readonly}`);
  check(tensor.device.type === 'cpu', `device ${tensor.device.type}, expected cpu`);
  if (n > 0) {
    const strides = rowMajor(layout.shape);
    const ok = tensor.strides.every((s, axis) => layout.shape[axis] === 1 || s === strides[axis]);
    check(ok, `strides ${fmt(tensor.strides)}, expected row-major ${fmt(strides)}`);
  }
  // A zero-copy view of the mapping when writable; read-only pages are read through a copy.
  const elements = readonly ? tensor.toTypedArray({ copy: true }) : tensor.toTypedArray();
  return checkElements(spec, elements, n, 'segment');
}

async function consumeCase(words) {
  if (words.length !== 3) throw new CheckFailed(`consume needs DTYPE LAYOUT HANDLE, got ${words.length} words`);
  const kase = caseOf(words);
  const base = await baseline();
  const n = consumeCheck(kase, words[2]);
  await finalCheck(base, 1, 'after dropping the consumed tensor');
  return `ok ${n}`;
}


// ---------------------------------------------------------------------------------------------
// host: a guest library in this process (tests/matrix/agents/c/guest.h), through koffi.

const guests = new Map();

class Unsupported extends Error {}

/**
 * The Rust guest as a napi-rs addon on dlbridge-napi (tests/matrix/agents/rust/napi-guest),
 * loaded from $DLBRIDGE_MATRIX_GUEST_RUST_NAPI, behind the guest library's interface. Tensors
 * cross as a Node addon's users pass them (`handsObjects`): the producer's dlbridge `Tensor`
 * itself goes out as the addon's `JsTensor` argument, and the addon's `TensorObject` result
 * comes back, which `fromTensorObject` makes a `Tensor` over the Rust memory. A thrown error
 * becomes the guest ABI's `fail`.
 */
function napiGuest(name, file) {
  const module = { exports: {} };
  process.dlopen(module, file);
  const addon = module.exports;
  let message = '';
  let produced = null;
  const reply = (call) => {
    try {
      const result = call();
      message = `ok ${result ?? ''}`;
      return 0;
    } catch (error) {
      message = `fail ${error.message.replace(/^check failed: /, '')}`;
      return 1;
    }
  };
  return {
    name,
    handsObjects: true,
    produce: (dtype, layout) => reply(() => {
      produced = addon.produce(dtype, layout);
    }),
    /** The tensor object of the last produce, handed over once (so nothing here keeps it). */
    produced: () => {
      const object = produced;
      produced = null;
      return object;
    },
    producedElement0: () => addon.producedElement0(),
    checkWritten: () => reply(() => addon.checkWritten()),
    checkReleased: () => reply(() => addon.checkReleased()),
    consume: (dtype, layout, tensor, element0) => reply(() => addon.consume(dtype, layout, tensor, element0)),
    drop: () => reply(() => addon.dropImport()),
    message: () => message,
  };
}

/** The guest library of runtime `name`, loaded once. */
function guestLibrary(name) {
  const napiFile = name === 'rust' ? process.env.DLBRIDGE_MATRIX_GUEST_RUST_NAPI : undefined;
  if (napiFile && !guests.has(name)) guests.set(name, napiGuest(name, napiFile));
  if (!guests.has(name)) {
    const variable = `DLBRIDGE_MATRIX_GUEST_${name.toUpperCase()}`;
    const path = process.env[variable];
    if (!path) throw new Unsupported(`no guest library for ${name} ($${variable} is not set)`);
    const koffi = require('koffi');
    const lib = koffi.load(path);
    guests.set(name, {
      name,
      produce: lib.func('int matrix_guest_produce(const char *dtype, const char *layout)'),
      produced: lib.func('uintptr_t matrix_guest_produced(void)'),
      producedElement0: lib.func('uintptr_t matrix_guest_produced_element0(void)'),
      checkWritten: lib.func('int matrix_guest_check_written(void)'),
      checkReleased: lib.func('int matrix_guest_check_released(void)'),
      consume: lib.func('int matrix_guest_consume(const char *dtype, const char *layout, uintptr_t managed, uintptr_t producer0)'),
      drop: lib.func('int matrix_guest_drop(void)'),
      message: lib.func('const char *matrix_guest_message(void)'),
    });
  }
  return guests.get(name);
}

/** The payload of the guest's reply for `status`; throws naming the guest otherwise. */
function guestResult(g, status) {
  const message = g.message();
  const space = message.indexOf(' ');
  const reason = space >= 0 ? message.slice(space + 1) : '';
  if (status === 0) return reason;
  if (status === 2) throw new Unsupported(`${g.name}: ${reason}`);
  throw new CheckFailed(`${g.name}: ${reason}`);
}

/** `out`, part 1: the case tensor's export goes to the guest, which imports, checks, writes. */
function hostOutStart(g, { dtypeName, spec, layout, layoutName }) {
  const state = { array: makeProducerArray(spec, layout), producer: null };
  state.producer = makeProducerTensor(spec, layout, state.array);
  const source = g.handsObjects ? state.producer : state.producer.exportPointer();
  state.answer = guestResult(g, g.consume(dtypeName, layoutName, source, state.producer.dataPtr));
  state.producer = null;
  return state;
}

/** `out`, part 2: the producer reads the sentinel the guest wrote (same memory). */
function hostOutCheckWritten(g, { spec, layout }, state) {
  if (layout.readonly || product(layout.shape) === 0) return;
  const value = spec.sentinel(element0(spec));
  const at = layout.offset * spec.per;
  const seen = Array.from(state.array.subarray(at, at + spec.per));
  check(
    seen.every((element, k) => element === value[k]),
    `${g.name} wrote the sentinel ${spec.decode(value)} through its import, the producer reads ${spec.decode(seen)}`,
  );
}

async function hostOut(g, kase) {
  const base = await baseline();
  const state = hostOutStart(g, kase);
  let problem = null;
  try {
    hostOutCheckWritten(g, kase, state);
    await collect();
    const d = delta(base);
    check(d.releasedTensors === 0 && d.pendingExports === 1, `released while ${g.name}'s import lives: ${showDelta(d)}`);
  } catch (error) {
    problem = error;
  }
  const dropped = g.drop();
  state.array = null;
  if (problem) throw problem;
  guestResult(g, dropped);
  await finalCheck(base, 1, `after ${g.name} dropped its import and the producer its array`);
  return `ok ${state.answer}`;
}

/** `in`, part 1: imports the guest's export, checks it in place, writes the sentinel. */
function hostInImport({ dtypeName, spec, layout }, g, state) {
  const element0Address = BigInt(g.producedElement0());
  if (g.handsObjects) {
    state.imported = fromTensorObject(g.produced());
  } else {
    const pointer = BigInt(g.produced());
    check(pointer !== 0n, `${g.name} produced no export`);
    state.imported = importPointer(pointer);
  }
  const u = state.imported;
  const n = product(layout.shape);
  check(fmt(u.shape) === fmt(layout.shape), `import shape ${fmt(u.shape)}, expected ${fmt(layout.shape)}`);
  check(u.dtype === dtypeName, `import dtype ${u.dtype}, expected ${dtypeName}`);
  if (n > 0) {
    check(fmt(u.strides) === fmt(layout.strides), `import strides ${fmt(u.strides)}, expected ${fmt(layout.strides)}`);
    check(u.dataPtr === element0Address, `import element 0 at ${u.dataPtr}, ${g.name}'s at ${element0Address}: not zero-copy`);
  }
  check(u.readonly === !!layout.readonly, `import readonly is ${u.readonly}, expected ${!!layout.readonly}`);
  check(u.copied === false, `the import from ${g.name} is flagged copied`);
  checkElementsByIndex(spec, u, layout.shape, `import from ${g.name}`);
  if (n > 0) {
    const origin = layout.shape.map(() => 0);
    if (layout.readonly) {
      checkWriteRefused(spec, u, origin);
    } else {
      u.set(origin, spec.sentinelValue(element0(spec)));
    }
  }
  return n;
}

async function hostIn(g, kase) {
  guestResult(g, g.produce(kase.dtypeName, kase.layoutName));
  const state = { imported: null };
  let n = 0;
  let problem = null;
  try {
    n = hostInImport(kase, g, state);
    guestResult(g, g.checkWritten());
  } catch (error) {
    problem = error;
  }
  state.imported = null;
  await collect();
  const released = g.checkReleased();
  if (problem) throw problem;
  guestResult(g, released);
  return `ok ${n} zero-copy`;
}

async function hostCase(words) {
  if (words.length !== 4) throw new CheckFailed(`host needs GUEST DIRECTION DTYPE LAYOUT, got ${words.length} words`);
  const [guest, direction, ...rest] = words;
  if (direction !== 'out' && direction !== 'in') {
    throw new CheckFailed(`unknown direction ${JSON.stringify(direction)} (expected out or in)`);
  }
  const kase = caseOf(rest);
  const g = guestLibrary(guest);
  return direction === 'out' ? hostOut(g, kase) : hostIn(g, kase);
}

async function answer(line) {
  const words = line.trim().split(' ').filter((w) => w !== '');
  const [request, ...rest] = words;
  switch (request) {
    case 'hello':
      return 'ok node';
    case 'self':
      return selfCase(rest);
    case 'produce':
      return produceCase(rest);
    case 'consume':
      return consumeCase(rest);
    case 'host':
      return hostCase(rest);
    default:
      throw new CheckFailed(`unknown request ${JSON.stringify(line)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// The loop: requests one at a time, one response line each.

const oneLine = (text) => String(text).replace(/[\r\n]+/g, ' ').trim();

function respond(text) {
  process.stdout.write(`${oneLine(text)}\n`);
}

process.stdout.on('error', (error) => {
  // The driver went away (EPIPE): nothing left to answer.
  process.stderr.write(`node agent: stdout: ${error.message}\n`);
  process.exitCode = 0;
  process.stdin.destroy();
});
process.on('uncaughtException', (error) => {
  process.stderr.write(`node agent: uncaught ${error && error.stack}\n`);
});
process.on('unhandledRejection', (error) => {
  process.stderr.write(`node agent: unhandled rejection ${error && error.stack}\n`);
});

async function main() {
  if (typeof global.gc !== 'function') {
    process.stderr.write('node agent: run with node --expose-gc (the release checks need it)\n');
  }
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of lines) {
    if (line.trim() === 'quit') break;
    if (line.trim() === '') continue;
    let response;
    try {
      if (typeof global.gc !== 'function' && !line.startsWith('hello')) {
        throw new CheckFailed('the agent was started without --expose-gc, so it cannot check releases');
      }
      settledAtStart = settled;
      settled = false;
      response = await answer(line);
    } catch (error) {
      if (error instanceof Unsupported) {
        response = `unsupported ${error.message}`;
      } else {
        const name = error instanceof CheckFailed ? '' : `${error && error.code ? error.code : error && error.name}: `;
        response = `fail ${name}${error && error.message}`;
      }
    }
    respond(response);
  }
  lines.close();
  // End by draining the event loop (never process.exit(): shared tensors release on a normal end).
  process.exitCode = 0;
}

main().catch((error) => {
  process.stderr.write(`node agent: ${error && error.stack}\n`);
  process.exitCode = 1;
});
