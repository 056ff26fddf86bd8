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

/** The error every access to a closed tensor throws, as native code throws it. */
function closedError() {
  return Object.assign(new Error('the tensor was closed: it no longer holds its memory'), {
    code: 'ERR_DLBRIDGE_CLOSED',
  });
}

/**
 * A 1-d tensor over a whole typed array, made by `fromTypedArray(array)` without options: a plain
 * JavaScript object whose state sits in private fields, which no other code can read, forge or
 * change. What it does not do itself (options, errors, other element kinds, exports) it hands
 * to its native twin, made on first need by the native `fromTypedArray`, which checks the typed
 * array's own buffer and length again. Its prototype sits on the `Tensor` class's: it is a
 * `Tensor` like any other.
 */
class JsTensor {
  #array;
  #buffer;
  #length;
  #byteOffset;
  #plain;
  /** The native twin, once made. */
  #twin;
  #closed = false;

  constructor(array, buffer, length, plain) {
    this.#array = array;
    this.#buffer = buffer;
    this.#length = length;
    this.#byteOffset = typedArrayByteOffset(array);
    this.#plain = plain;
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
   * not a JsTensor. Runs no code but this class's.
   */
  static attach(value) {
    if (!(#array in value)) return undefined;
    try {
      return value.#native();
    } catch {
      return null;
    }
  }

  #native() {
    if (this.#closed) throw closedError();
    this.#twin ??= entryPoints.fromTypedArray(this.#array);
    return this.#twin;
  }

  #open() {
    if (this.#closed) throw closedError();
  }

  get shape() {
    this.#open();
    return [this.#length];
  }

  get strides() {
    this.#open();
    return [1];
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
    return 1;
  }

  get size() {
    this.#open();
    return this.#length;
  }

  get itemsize() {
    this.#open();
    return this.#plain.View.BYTES_PER_ELEMENT;
  }

  get nbytes() {
    this.#open();
    return this.#length * this.#plain.View.BYTES_PER_ELEMENT;
  }

  get byteOffset() {
    this.#open();
    return this.#byteOffset;
  }

  get readonly() {
    this.#open();
    return false;
  }

  get copied() {
    this.#open();
    return false;
  }

  get dataPtr() {
    this.#open();
    return native.addressOf(this.#array);
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
    const array = this.#array;
    // A typed array reads `undefined` outside its elements: a negative, fractional or NaN index,
    // or one beyond a detached buffer's empty view, goes to native code for its error.
    if (typeof index === 'number' && index < this.#length && array !== undefined) {
      const value = array[index];
      if (value !== undefined) return value;
    }
    return this.#native().get(index);
  }

  set(index, value) {
    const array = this.#array;
    if (
      typeof index === 'number' &&
      index < this.#length &&
      array !== undefined &&
      array[index] !== undefined &&
      fitsElement(this.#plain, value)
    ) {
      array[index] = value;
      return;
    }
    this.#native().set(index, value);
  }

  toTypedArray(options) {
    const array = this.#array;
    if (options === undefined && array !== undefined && typedArrayLength(array) >= this.#length) {
      return new this.#plain.View(this.#buffer, this.#byteOffset, this.#length);
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
 * Without options, over a non-empty typed array, the tensor is a plain JavaScript object (see
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
  if (options === undefined) {
    const plain = PLAIN_ARRAYS[typedArrayName(array)];
    if (plain !== undefined) {
      const length = typedArrayLength(array);
      if (length !== 0) {
        const buffer = typedArrayBuffer(array);
        if (fixedBuffers.has(buffer) || fixedLength(buffer)) {
          return new JsTensor(array, buffer, length, plain);
        }
      }
    }
  }
  return entryPoints.fromTypedArray(array, options);
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
