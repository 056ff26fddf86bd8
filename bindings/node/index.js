'use strict';
/**
 * dlbridge: zero-copy tensor exchange over DLPack 1.3 for Node.js.
 *
 * Typed arrays become {@link Tensor}s without copying (`fromTypedArray`), tensors become typed
 * arrays without copying (`Tensor#toTypedArray`), and tensors travel to and from other native
 * addons as DLPack managed-tensor pointers (`Tensor#exportPointer`, `importPointer`), and to
 * and from other processes through shared-memory segments (`emptyShared`, `toShared`,
 * `fromShared`).
 * See docs/node.md for the guide; index.d.ts for the dtype ↔ typed-array mapping.
 * @module dlbridge
 */

const { constants: bufferConstants } = require('node:buffer');
const { isMainThread, markAsUntransferable } = require('node:worker_threads');
const { addonFileName, platformPackageName } = require('./platform');

/**
 * Whether `error` says that `name` itself (not something it requires) was not found.
 * @param {Error & {code?: string}} error
 * @param {string} name
 */
function isMissing(error, name) {
  return error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(name);
}

/**
 * Loads the native addon: the one build-addon.js (`npm run build`) put next to this file, else
 * the per-platform package's (`dlbridge-<platform>`, made by platform-package.js).
 * @returns {object} the addon's exports
 */
function loadNative() {
  const file = addonFileName();
  const platformPackage = platformPackageName();
  try {
    return require(`./${file}`);
  } catch (error) {
    if (!isMissing(error, file)) throw error;
  }
  try {
    return require(platformPackage);
  } catch (error) {
    if (!isMissing(error, platformPackage)) throw error;
    throw new Error(
      `dlbridge: no native addon ${file} in ${__dirname} and no package ${platformPackage}; ` +
        'build it with `npm run build` (needs Rust) in bindings/node',
    );
  }
}

const native = loadNative();

// What the addon needs from this environment's engine, taken before user code can replace the
// globals: its size limits and the intrinsics Node-API lacks (see src/engine.rs).
// `initEnvironment` returns the hot entry points, native functions made without napi-rs's
// per-call glue (src/entry_points.rs): `fromTypedArray` and the `toTypedArray` method.
const resizableGetter =
  Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')?.get ?? (() => false);
const entryPoints = native.initEnvironment({
  isMainThread,
  maxTypedArrayLength: bufferConstants.MAX_LENGTH,
  maxExternalByteLength: bufferConstants.MAX_LENGTH,
  resizable: resizableGetter,
  markAsUntransferable,
  ArrayBuffer,
  Tensor: native.Tensor,
});

/**
 * What `console.log(tensor)` and `util.inspect(tensor)` show: the metadata, not the elements
 * (`Tensor { closed }` once closed).
 * @this {Tensor}
 * @returns {string}
 */
function inspectTensor() {
  if (this.closed) return 'Tensor { closed }';
  const { type, id } = this.device;
  const flags = [this.readonly && 'readonly', this.copied && 'copied'].filter(Boolean);
  return (
    `Tensor { dtype: '${this.dtype}', shape: [${this.shape.join(', ')}], ` +
    `strides: [${this.strides.join(', ')}], device: '${type}:${id}'` +
    `${flags.length ? `, ${flags.join(', ')}` : ''} }`
  );
}

/**
 * Puts `value` on Tensor.prototype under `key`, configurable: the addon is loaded once per
 * environment, but this file may run again in it (Jest evaluates it once per test file).
 */
function defineMethod(key, value) {
  Object.defineProperty(native.Tensor.prototype, key, { value, configurable: true });
}

defineMethod(Symbol.for('nodejs.util.inspect.custom'), inspectTensor);
// `String(tensor)` and template literals show the same description.
defineMethod('toString', inspectTensor);

/**
 * What `JSON.stringify(tensor)` writes: the metadata as plain data (never the elements, which
 * may be huge or BigInts); `byteOffset` and `dataPtr` are left out, being meaningless elsewhere.
 * @this {Tensor}
 * @returns {{dtype: string, shape: number[], strides: number[], device: object,
 *   readonly: boolean, copied: boolean}}
 */
function tensorToJSON() {
  const { dtype, shape, strides, device, readonly, copied } = this;
  return { dtype, shape, strides, device, readonly, copied };
}
defineMethod('toJSON', tensorToJSON);

// `using tensor = …` (explicit resource management) closes the tensor at the end of its block,
// where the runtime has `Symbol.dispose`.
if (typeof Symbol.dispose === 'symbol') {
  defineMethod(Symbol.dispose, function dispose() {
    this.close();
  });
}

// Tensors over JS memory are plain JavaScript objects (`JsTensor`, below): creating, reading,
// `get`/`set`, `toTypedArray` and dropping one make no native call, allocate nothing native and
// leave the collector no finalizer to run. Their native twin, a native `Tensor` over the same
// typed array, is made once, when the tensor crosses into native code (`exportPointer`,
// `toShared`, another addon's argument, what the JavaScript side leaves to native code), and is
// closed with it. Tensors over native memory are native objects, as ever. See docs/node.md.

const { call } = Function.prototype;
/** The intrinsic getter `key` of `object` as a function of the receiver, taken before user code runs. */
const intrinsicGetter = (object, key) => call.bind(Object.getOwnPropertyDescriptor(object, key).get);
const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
// These answer for typed arrays of any realm, whatever their own properties say; the name is
// `undefined` for anything that is not a typed array (a DataView, a Proxy, a primitive).
const typedArrayName = intrinsicGetter(TypedArrayPrototype, Symbol.toStringTag);
const typedArrayLength = intrinsicGetter(TypedArrayPrototype, 'length');
const typedArrayBuffer = intrinsicGetter(TypedArrayPrototype, 'buffer');
const typedArrayByteOffset = intrinsicGetter(TypedArrayPrototype, 'byteOffset');
const isResizable = call.bind(resizableGetter);

/**
 * The typed arrays whose elements are their dtype's JS values, by class name: the dtype, the
 * class `toTypedArray` returns, and the values `set` writes without asking native code.
 */
const PLAIN_ARRAYS = Object.freeze({
  __proto__: null,
  Int8Array: { dtype: 'int8', View: Int8Array, kind: 'int', min: -(2 ** 7), max: 2 ** 7 - 1 },
  Uint8Array: { dtype: 'uint8', View: Uint8Array, kind: 'int', min: 0, max: 2 ** 8 - 1 },
  Uint8ClampedArray: { dtype: 'uint8', View: Uint8Array, kind: 'int', min: 0, max: 2 ** 8 - 1 },
  Int16Array: { dtype: 'int16', View: Int16Array, kind: 'int', min: -(2 ** 15), max: 2 ** 15 - 1 },
  Uint16Array: { dtype: 'uint16', View: Uint16Array, kind: 'int', min: 0, max: 2 ** 16 - 1 },
  Int32Array: { dtype: 'int32', View: Int32Array, kind: 'int', min: -(2 ** 31), max: 2 ** 31 - 1 },
  Uint32Array: { dtype: 'uint32', View: Uint32Array, kind: 'int', min: 0, max: 2 ** 32 - 1 },
  Float32Array: { dtype: 'float32', View: Float32Array, kind: 'float' },
  Float64Array: { dtype: 'float64', View: Float64Array, kind: 'float' },
  BigInt64Array: { dtype: 'int64', View: BigInt64Array, kind: 'bigint', min: -(2n ** 63n), max: 2n ** 63n - 1n },
  BigUint64Array: { dtype: 'uint64', View: BigUint64Array, kind: 'bigint', min: 0n, max: 2n ** 64n - 1n },
});

/** Whether `set` can write `value` to an element of `plain` as native code would, unchanged. */
function fitsElement(plain, value) {
  switch (plain.kind) {
    case 'float':
      return typeof value === 'number';
    case 'int':
      return Number.isInteger(value) && value >= plain.min && value <= plain.max;
    default:
      return typeof value === 'bigint' && value >= plain.min && value <= plain.max;
  }
}

const { defineProperty } = Object;
const ErrorClass = Error;

/**
 * The error every access to a closed tensor throws, as native code throws it. Its `code` is
 * defined, not assigned: no setter of user code on `Object.prototype` runs.
 */
function closedError() {
  const error = new ErrorClass('the tensor was closed: it no longer holds its memory');
  return defineProperty(error, 'code', {
    value: 'ERR_DLBRIDGE_CLOSED',
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/** Whether `shape` with `strides` is row-major (C-contiguous), size-1 dimensions aside. */
function isRowMajor(shape, strides) {
  let expected = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1 && strides[d] !== expected) return false;
    expected *= shape[d];
  }
  return true;
}

/**
 * A tensor over a typed array's elements, made by `fromTypedArray`: a plain JavaScript object
 * whose state sits in private fields, which no other code can read, forge or change. What it
 * does not do itself (other element kinds, index arrays, options, errors, exports) it hands to
 * its native twin, made on first need by the native `fromTypedArray` with the same layout,
 * which checks the typed array's own buffer and length again. Its prototype sits on the
 * `Tensor` class's: it is a `Tensor` like any other.
 */
class JsTensor {
  #array;
  #buffer;
  #plain;
  /** Number of elements. */
  #size;
  /** Index in `#array` of element 0. */
  #offset;
  /** Byte offset of element 0 in `#buffer`. */
  #byteOffset;
  /** Shape and strides; `null` for a whole 1-d array (`[#size]`, `[1]`). */
  #shape;
  #strides;
  /** The stride of a 1-d tensor, for `get`/`set` of a number index (0 otherwise). */
  #stride1d;
  #readonly;
  /** Whether `toTypedArray()` views it: row-major, writable, not empty. */
  #viewable;
  /** The layout options its twin is made with (`undefined` for a whole 1-d array). */
  #layout;
  /** The native twin, once made. */
  #twin;
  #closed = false;

  /**
   * `layout` is `undefined` for the whole array as a 1-d tensor, else checked
   * `{shape, strides, offset, readonly, size}` (see `checkedLayout`).
   */
  constructor(array, buffer, length, plain, layout) {
    this.#array = array;
    this.#buffer = buffer;
    this.#plain = plain;
    if (layout === undefined) {
      this.#size = length;
      this.#offset = 0;
      this.#byteOffset = typedArrayByteOffset(array);
      this.#shape = null;
      this.#strides = null;
      this.#stride1d = 1;
      this.#readonly = false;
      this.#viewable = true;
    } else {
      const { shape, strides, offset, readonly, size } = layout;
      this.#size = size;
      this.#offset = offset;
      this.#byteOffset = typedArrayByteOffset(array) + offset * plain.View.BYTES_PER_ELEMENT;
      this.#shape = shape;
      this.#strides = strides;
      this.#stride1d = shape.length === 1 ? strides[0] : 0;
      this.#readonly = readonly;
      this.#viewable = !readonly && size > 0 && isRowMajor(shape, strides);
      // No prototype: native code reads these options (and looks for `dtype`) while another
      // addon's call is converting its arguments, where a property inherited from
      // Object.prototype, or a getter there, must neither change the twin nor run user code.
      this.#layout = { __proto__: null, shape, strides, offset, readonly };
    }
  }

  /**
   * The native twin of `value` if it is a JsTensor (`value` itself otherwise), for native
   * functions that take a Tensor.
   */
  static native(value) {
    return typeof value === 'object' && value !== null && #array in value ? value.#native() : value;
  }

  /**
   * What the native side's prototype hook asks when a JsTensor crosses into another addon's
   * argument: its twin, `null` if it is closed or its memory is gone, `undefined` if `value` is
   * not a JsTensor. Runs no code but this class's and the native `fromTypedArray`.
   */
  static attach(value) {
    if (!(#array in value)) return undefined;
    if (value.#closed) return null;
    try {
      return value.#native();
    } catch {
      return null;
    }
  }

  #native() {
    if (this.#closed) throw closedError();
    this.#twin ??= entryPoints.fromTypedArray(this.#array, this.#layout);
    return this.#twin;
  }

  #open() {
    if (this.#closed) throw closedError();
  }

  /**
   * The index in `#array` of the element at `index` of a 1-d tensor, or -1 where the
   * JavaScript side leaves it to native code (another index, a closed tensor).
   */
  #slot(index) {
    if (typeof index !== 'number' || this.#stride1d === 0 || this.#array === undefined) return -1;
    if (!(index >= 0 && index < this.#size && Number.isInteger(index))) return -1;
    return this.#offset + index * this.#stride1d;
  }

  get shape() {
    this.#open();
    return this.#shape === null ? [this.#size] : this.#shape.slice();
  }

  get strides() {
    this.#open();
    return this.#strides === null ? [1] : this.#strides.slice();
  }

  get dtype() {
    this.#open();
    return this.#plain.dtype;
  }

  get device() {
    this.#open();
    return { type: 'cpu', id: 0 };
  }

  get ndim() {
    this.#open();
    return this.#shape === null ? 1 : this.#shape.length;
  }

  get size() {
    this.#open();
    return this.#size;
  }

  get itemsize() {
    this.#open();
    return this.#plain.View.BYTES_PER_ELEMENT;
  }

  get nbytes() {
    this.#open();
    return this.#size * this.#plain.View.BYTES_PER_ELEMENT;
  }

  get byteOffset() {
    this.#open();
    return this.#byteOffset;
  }

  get readonly() {
    this.#open();
    return this.#readonly;
  }

  get copied() {
    this.#open();
    return false;
  }

  get dataPtr() {
    this.#open();
    return native.addressOf(this.#array) + BigInt(this.#offset * this.#plain.View.BYTES_PER_ELEMENT);
  }

  get closed() {
    return this.#closed;
  }

  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#array = undefined;
    this.#buffer = undefined;
    this.#twin?.close();
    this.#twin = undefined;
  }

  get(index) {
    const slot = this.#slot(index);
    // A typed array reads `undefined` outside its elements (a detached buffer's empty view).
    if (slot >= 0) {
      const value = this.#array[slot];
      if (value !== undefined) return value;
    }
    return this.#native().get(index);
  }

  set(index, value) {
    const slot = this.#readonly ? -1 : this.#slot(index);
    if (slot >= 0 && this.#array[slot] !== undefined && fitsElement(this.#plain, value)) {
      this.#array[slot] = value;
      return;
    }
    this.#native().set(index, value);
  }

  toTypedArray(options) {
    const array = this.#array;
    if (
      options === undefined &&
      this.#viewable &&
      array !== undefined &&
      typedArrayLength(array) >= this.#offset + this.#size
    ) {
      return new this.#plain.View(this.#buffer, this.#byteOffset, this.#size);
    }
    return this.#native().toTypedArray(options);
  }

  exportPointer(options) {
    return this.#native().exportPointer(options);
  }
}
Object.setPrototypeOf(JsTensor.prototype, native.Tensor.prototype);
Object.defineProperty(JsTensor.prototype, 'constructor', { value: native.Tensor, configurable: true });
native.registerTensorPrototype(JsTensor.prototype, JsTensor.attach);

const nativeToTypedArray = entryPoints.toTypedArray;
const { apply } = Reflect;
/**
 * A typed array over the tensor's memory (row-major tensors; one ArrayBuffer per memory block),
 * or a copy with `{copy: true}` (see index.d.ts); for a tensor over JS memory called through
 * `Tensor.prototype`, its twin's.
 */
defineMethod('toTypedArray', function toTypedArray(options) {
  return apply(nativeToTypedArray, JsTensor.native(this), [options]);
});

/**
 * The ArrayBuffers and SharedArrayBuffers found fixed-length (growable SharedArrayBuffers are
 * fine) and marked untransferable by this realm.
 */
const fixedBuffers = new WeakSet();

/**
 * Whether `buffer` may hold a tensor: not a resizable ArrayBuffer, which could shrink under
 * native code. An ArrayBuffer is marked untransferable (`postMessage` copies it instead of
 * moving it), as a tensor's native twin holds its address.
 */
function fixedLength(buffer) {
  try {
    if (isResizable(buffer)) return false;
  } catch {
    // A SharedArrayBuffer (the getter is ArrayBuffer's): never detached.
    fixedBuffers.add(buffer);
    return true;
  }
  markAsUntransferable(buffer);
  fixedBuffers.add(buffer);
  return true;
}

/**
 * A tensor over a typed array's own memory: no copy, same address (byteOffset honoured).
 *
 * The typed array's ArrayBuffer stays alive for as long as any holder of the tensor lives
 * (JavaScript, Rust, another addon holding an exported pointer), and it is marked
 * untransferable (`worker_threads.markAsUntransferable`), because native code holds its
 * address: `postMessage` copies it instead of moving it. Resizable ArrayBuffers are refused
 * (they can shrink under native code); growable SharedArrayBuffers are fine. Every check holds
 * for typed arrays of any realm (`vm` contexts, Jest), whatever their `buffer` property says,
 * and the options are read before the buffer is checked and pinned.
 *
 * Over a non-empty typed array whose elements are its dtype's values (no `dtype`
 * reinterpretation), with a layout inside it, the tensor is a plain JavaScript object (see
 * `JsTensor`); otherwise the native `fromTypedArray` makes it.
 *
 * @param {ArrayBufferView} array a typed array (Int8/16/32, Uint8/16/32, Uint8Clamped,
 *   Float32/64, BigInt64/BigUint64)
 * @param {object} [options]
 * @param {number[]} [options.shape] dimension sizes; default `[array.length]`
 * @param {number[]} [options.strides] strides in elements; default row-major
 * @param {number} [options.offset] index of element 0 in the array (for negative strides)
 * @param {boolean} [options.readonly] mark the tensor read-only for its consumers
 * @param {string} [options.dtype] reinterpret the elements: "float16"/"bfloat16" for a
 *   Uint16Array, "bool" or "float8_*" for a Uint8Array, "complex64" for a Float32Array, …
 * @returns {Tensor}
 * @throws {TypeError} not a typed array, detached (also when an option's getter detached it),
 *   resizable (`ERR_DLBRIDGE_RESIZABLE`), a dtype that array cannot hold, or an unknown option
 *   key (`ERR_DLBRIDGE_UNKNOWN_OPTION`, naming the option meant)
 * @throws {RangeError} shape, strides or offset reaching outside the typed array
 */
function fromTypedArray(array, options) {
  const plain = PLAIN_ARRAYS[typedArrayName(array)];
  if (plain !== undefined && (options == null || typeof options === 'object')) {
    const length = typedArrayLength(array);
    if (options == null) {
      if (length !== 0) {
        const buffer = typedArrayBuffer(array);
        if (fixedBuffers.has(buffer) || fixedLength(buffer)) {
          return new JsTensor(array, buffer, length, plain, undefined);
        }
      }
    } else if (Object.keys(options).every((key) => OPTION_NAMES.includes(key))) {
      return withOptions(array, plain, options);
    }
  }
  return entryPoints.fromTypedArray(array, options);
}

/** `fromTypedArray`'s options. */
const OPTION_NAMES = ['shape', 'strides', 'offset', 'readonly', 'dtype'];

/**
 * `fromTypedArray(array, options)` for a typed array whose elements are their dtype's values
 * and options with no unknown key: the options are read once, in the native constructor's order
 * (their getters run before the buffer is looked at); a layout this side checks and finds
 * inside the array makes a JsTensor, anything else goes to the native constructor with the
 * values read, which makes the tensor or names what is wrong.
 */
function withOptions(array, plain, options) {
  const read = {
    dtype: options.dtype,
    offset: options.offset,
    shape: integers(options.shape),
    strides: integers(options.strides),
    readonly: options.readonly,
  };
  const length = typedArrayLength(array);
  const layout = length === 0 ? undefined : checkedLayout(plain, length, read);
  if (layout !== undefined) {
    const buffer = typedArrayBuffer(array);
    if (fixedBuffers.has(buffer) || fixedLength(buffer)) {
      return new JsTensor(array, buffer, length, plain, layout);
    }
  }
  return entryPoints.fromTypedArray(array, read);
}

/** A copy of an array option's elements, each read once (anything else as it is). */
function integers(value) {
  if (!Array.isArray(value)) return value;
  const copy = [];
  for (let i = 0, n = value.length; i < n; i++) copy.push(value[i]);
  return copy;
}

/** The most dimensions this side checks; more go to native code. */
const MAX_JS_NDIM = 64;

/**
 * `{shape, strides, offset, readonly, size}` for options read from `fromTypedArray`, when every
 * value is plain (safe integers, a boolean, the array's own dtype) and every element lies inside
 * the `length` elements of the array; `undefined` otherwise, for native code to decide. Every
 * sum and product stays a safe integer, so the arithmetic is exact.
 */
function checkedLayout(plain, length, { dtype, offset = 0, shape, strides, readonly = false }) {
  const safe = Number.isSafeInteger;
  if (dtype != null && dtype !== plain.dtype) return undefined;
  if (offset === null) offset = 0;
  if (readonly === null) readonly = false;
  if (!safe(offset) || offset < 0 || offset > length || typeof readonly !== 'boolean') return undefined;
  if (shape == null) {
    shape = [length - offset];
  } else if (!Array.isArray(shape) || shape.length > MAX_JS_NDIM || !shape.every((d) => safe(d) && d >= 0)) {
    return undefined;
  }
  let size = 1;
  for (const d of shape) {
    size *= d;
    if (!safe(size)) return undefined;
  }
  if (strides == null) {
    strides = new Array(shape.length);
    let step = 1;
    for (let d = shape.length - 1; d >= 0; d--) {
      strides[d] = step;
      step *= Math.max(shape[d], 1);
      if (!safe(step)) return undefined;
    }
  } else if (!Array.isArray(strides) || strides.length !== shape.length || !strides.every(safe)) {
    return undefined;
  }
  if (size > 0) {
    let [low, high] = [offset, offset];
    for (let d = 0; d < shape.length; d++) {
      const reach = (shape[d] - 1) * strides[d];
      if (!safe(reach)) return undefined;
      if (reach > 0) high += reach;
      else low += reach;
    }
    if (!safe(low) || !safe(high) || low < 0 || high >= length) return undefined;
  }
  return { shape, strides, offset, readonly, size };
}

module.exports = {
  /** The DLPack version this build speaks, `[major, minor]`. */
  DLPACK_VERSION: native.DLPACK_VERSION,
  /**
   * A DLPack tensor. Not constructible from JavaScript: use `fromTypedArray`, `empty`,
   * `arange`, `importPointer`, `emptyShared` or `fromShared`.
   */
  Tensor: native.Tensor,
  fromTypedArray,
  /**
   * A Tensor over the memory of a tensor object another native addon returned
   * (dlbridge-napi's `TensorObject`): shape, strides and read-only flag kept, no copy.
   */
  fromTensorObject: native.fromTensorObject,
  /** A zero-filled row-major tensor in memory owned by Rust: `empty(shape, dtype = "float32")`. */
  empty: native.empty,
  /** A 1-d tensor `0, 1, …, n-1` in memory owned by Rust: `arange(n, dtype = "float32")`. */
  arange: native.arange,
  /**
   * Takes ownership of a DLPack managed-tensor pointer (BigInt) from another native addon.
   * Unsafe by nature: a wrong address crashes the process.
   */
  importPointer: native.importPointer,
  /** Calls a managed-tensor pointer's deleter without importing it. Unsafe by nature. */
  releasePointer: native.releasePointer,
  /** Address (BigInt) of a typed array's first element, byteOffset applied. */
  addressOf: native.addressOf,
  /**
   * A zero-filled row-major tensor in a new shared-memory segment:
   * `emptyShared(shape, dtype = "float32")` returns `{handle, tensor}`. The tensor holds this
   * side's reference; the segment is removed once every side (this one, and every process that
   * opened the handle) has let go.
   */
  emptyShared: native.emptyShared,
  /**
   * Copies a tensor (any layout) once, row-major, into a new shared-memory segment and returns
   * its handle (a string). This side keeps no reference: the segment passes to the next
   * `fromShared` of the handle, so the caller may send the handle and exit (a keeper process
   * holds the segment until then, for at most DLBRIDGE_SHM_HANDOFF_SECONDS, default 600).
   */
  toShared: (tensor) => native.toShared(JsTensor.native(tensor)),
  /**
   * Maps a shared-memory segment by handle, without copying: `fromShared(handle,
   * {writable = false} = {})`. Read-only by default (pages mapped read-only, tensor flagged
   * read-only); `writable: true` shares writes with every side.
   */
  fromShared: native.fromShared,
  /**
   * The native side's counts of the resources it holds (`liveTensors`, `releasedTensors`,
   * `pinnedJsBuffers`, `externalBuffers`, `pendingExports`), all threads together: a leak check
   * for tests and leak-hunting tools, as a heap snapshot cannot see native memory.
   */
  diagnostics: native.diagnostics,
  // Switches for the node:test suite, present only in the test build (feature `test-hooks`).
  ...(native._testHooks
    ? {
        _testHooks: {
          ...native._testHooks,
          exportAnonymous: (tensor, options) =>
            native._testHooks.exportAnonymous(JsTensor.native(tensor), options),
        },
      }
    : {}),
};
