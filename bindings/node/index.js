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
const entryPoints = native.initEnvironment({
  isMainThread,
  maxTypedArrayLength: bufferConstants.MAX_LENGTH,
  maxExternalByteLength: bufferConstants.MAX_LENGTH,
  resizable: Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')?.get ??
    (() => false),
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

/**
 * A typed array over the tensor's memory (row-major tensors; one ArrayBuffer per memory block),
 * or a copy with `{copy: true}` (see index.d.ts).
 */
defineMethod('toTypedArray', entryPoints.toTypedArray);

// `using tensor = …` (explicit resource management) closes the tensor at the end of its block,
// where the runtime has `Symbol.dispose`.
if (typeof Symbol.dispose === 'symbol') {
  defineMethod(Symbol.dispose, function dispose() {
    this.close();
  });
}

/**
 * A tensor over a typed array's own memory: no copy, same address (byteOffset honoured).
 *
 * The typed array's ArrayBuffer stays alive for as long as any holder of the tensor lives
 * (JavaScript, Rust, another addon holding an exported pointer), and it is marked
 * untransferable (`worker_threads.markAsUntransferable`), because native code holds its
 * address: `postMessage` copies it instead of moving it. Resizable ArrayBuffers are refused
 * (they can shrink under native code); growable SharedArrayBuffers are fine. Every check is
 * native: it holds for typed arrays of any realm (`vm` contexts, Jest), whatever their `buffer`
 * property says, and the options are read before the buffer is checked and pinned.
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
const fromTypedArray = entryPoints.fromTypedArray;

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
  toShared: native.toShared,
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
  ...(native._testHooks ? { _testHooks: native._testHooks } : {}),
};
