/**
 * dlbridge: zero-copy tensor exchange over DLPack 1.3 for Node.js.
 *
 * Typed arrays become {@link Tensor}s without copying ({@link fromTypedArray}), tensors become
 * typed arrays without copying ({@link Tensor.toTypedArray}), and tensors travel to and from other
 * native addons as DLPack managed-tensor pointers ({@link Tensor.exportPointer},
 * {@link importPointer}), and to and from other processes through shared-memory segments
 * ({@link emptyShared}, {@link toShared}, {@link fromShared}).
 *
 * @packageDocumentation
 */

/** Element type names (numpy / ml_dtypes style), as the core names them. */
export type DType =
  | 'bool'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'float16'
  | 'bfloat16'
  | 'float32'
  | 'float64'
  | 'complex32'
  | 'complex64'
  | 'complex128'
  | 'float8_e3m4'
  | 'float8_e4m3'
  | 'float8_e4m3b11fnuz'
  | 'float8_e4m3fn'
  | 'float8_e4m3fnuz'
  | 'float8_e5m2'
  | 'float8_e5m2fnuz'
  | 'float8_e8m0fnu'
  | 'float6_e2m3fn'
  | 'float6_e3m2fn'
  | 'float4_e2m1fn'
  | 'handle64';

/**
 * The typed array that views each dtype. 64-bit integers are BigInt arrays; float16 and
 * bfloat16 are their raw bits in a Uint16Array; bool and the 8-bit floats are bytes; complex
 * numbers are interleaved (re, im) pairs, two array elements per tensor element; padded fp6/fp4
 * are one byte each (packed ones have no typed-array view). Vector dtypes such as "float32x4"
 * use their scalar's array with `lanes` elements per tensor element.
 */
export interface TypedArrayOf {
  bool: Uint8Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  float32: Float32Array;
  float64: Float64Array;
  complex32: Uint16Array;
  complex64: Float32Array;
  complex128: Float64Array;
  float8_e3m4: Uint8Array;
  float8_e4m3: Uint8Array;
  float8_e4m3b11fnuz: Uint8Array;
  float8_e4m3fn: Uint8Array;
  float8_e4m3fnuz: Uint8Array;
  float8_e5m2: Uint8Array;
  float8_e5m2fnuz: Uint8Array;
  float8_e8m0fnu: Uint8Array;
  float6_e2m3fn: Uint8Array;
  float6_e3m2fn: Uint8Array;
  float4_e2m1fn: Uint8Array;
  handle64: BigUint64Array;
}

/** Every typed array dlbridge reads. Uint8ClampedArray is read as uint8. */
export type SupportedTypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/** The typed array that views dtype `D` (any typed array for dtypes named at run time). */
export type TypedArrayFor<D extends string> = D extends keyof TypedArrayOf
  ? TypedArrayOf[D]
  : SupportedTypedArray;

/** The dtype of a typed array read without a `dtype` option. */
export type DTypeOf<A extends SupportedTypedArray> = A extends Int8Array
  ? 'int8'
  : A extends Uint8Array | Uint8ClampedArray
    ? 'uint8'
    : A extends Int16Array
      ? 'int16'
      : A extends Uint16Array
        ? 'uint16'
        : A extends Int32Array
          ? 'int32'
          : A extends Uint32Array
            ? 'uint32'
            : A extends Float32Array
              ? 'float32'
              : A extends Float64Array
                ? 'float64'
                : A extends BigInt64Array
                  ? 'int64'
                  : A extends BigUint64Array
                    ? 'uint64'
                    : never;

/** The dtypes an array of type `A` can be read as through the `dtype` option. */
export type DTypesViewedBy<A extends SupportedTypedArray> = A extends Uint8ClampedArray
  ? DTypesViewedBy<Uint8Array>
  : { [D in keyof TypedArrayOf]: A extends TypedArrayOf[D] ? D : never }[keyof TypedArrayOf];

/**
 * The JS value of one element of dtype `D` ({@link Tensor.get}, {@link Tensor.set}): boolean for
 * "bool", BigInt for "int64" / "uint64", `[re, im]` for complex dtypes, number otherwise
 * (float16 and bfloat16 as their value, not their bits).
 */
export type ElementOf<D extends string> = D extends 'bool'
  ? boolean
  : D extends 'int64' | 'uint64'
    ? bigint
    : D extends 'complex64' | 'complex128'
      ? [number, number]
      : number;

/** What {@link Tensor.set} accepts for dtype `D`: integer dtypes take numbers and BigInts alike. */
export type ElementInputOf<D extends string> = D extends 'bool'
  ? boolean
  : D extends 'complex64' | 'complex128'
    ? readonly [number, number]
    : D extends 'float16' | 'bfloat16' | 'float32' | 'float64'
      ? number
      : number | bigint;

/** Where a tensor's memory lives. */
export interface Device {
  /** DLPack device type name: "cpu", "cuda", "cuda_host", "rocm", …. */
  type: string;
  /** Device ordinal (0 for the CPU). */
  id: number;
}

/**
 * Options of {@link fromTypedArray}. Every options object below is checked: an own key the
 * function does not take throws a `TypeError` (`ERR_DLBRIDGE_UNKNOWN_OPTION`) naming it and the
 * option meant (`readOnly` → "did you mean "readonly"?").
 */
export interface FromTypedArrayOptions {
  /** Dimension sizes; default `[array.length]` (in tensor elements). */
  shape?: readonly number[];
  /** Strides in elements (may be negative); default row-major. */
  strides?: readonly number[];
  /** Index (in tensor elements) of element 0 in the array, so negative strides fit; default 0. */
  offset?: number;
  /** Mark the tensor read-only: consumers see DLPack's READ_ONLY flag. Default false. */
  readonly?: boolean;
  /** Reinterpret the elements as this dtype (one the array's type views, see {@link TypedArrayOf}). */
  dtype?: string;
}

/** Options of {@link Tensor.toTypedArray}. */
export interface ToTypedArrayOptions {
  /**
   * Return a new, private, row-major copy (always allowed: any layout, read-only tensors).
   * Default false: a zero-copy view, or an error if the tensor is not row-major.
   */
  copy?: boolean;
  /**
   * Hand out a writable view of a read-only tensor. JavaScript has no read-only typed arrays,
   * so this is the only zero-copy way to look at such memory; writing through the view breaks
   * the producer's contract (it may share, cache or map that memory read-only). Default false.
   */
  unsafeIgnoreReadOnly?: boolean;
}

/** Options of {@link Tensor.exportPointer}. */
export interface ExportPointerOptions {
  /** Export a legacy (pre-1.0) `DLManagedTensor` instead of a `DLManagedTensorVersioned`. */
  legacy?: boolean;
  /**
   * Export a read-only tensor as legacy anyway (a legacy tensor cannot say "read-only"), trusting
   * the consumer not to write. Default false.
   */
  unsafeIgnoreReadOnly?: boolean;
}

/** Options of {@link importPointer}. */
export interface ImportPointerOptions {
  /** The pointer is a legacy `DLManagedTensor` (default: `DLManagedTensorVersioned`). */
  legacy?: boolean;
  /**
   * Whether the imported tensor is read-only. Default: `true` for a legacy pointer (which cannot
   * say "read-only"; `false` is the caller's word that its memory is writable), else `false`
   * (a versioned tensor carries its own flag, which `true` can only add to).
   */
  readonly?: boolean;
}

/**
 * A DLPack tensor: metadata, plus memory kept alive for as long as anyone holds it (this
 * object, a typed array from {@link Tensor.toTypedArray}, a consumer of an exported pointer).
 * Made by {@link fromTypedArray}, {@link empty}, {@link arange}, {@link importPointer},
 * {@link emptyShared} or {@link fromShared}. {@link Tensor.close} lets go of it at once;
 * otherwise the collector does, whenever it finds the object.
 *
 * Once closed, every property and method but {@link Tensor.closed} and {@link Tensor.close}
 * throws an `Error` with code `ERR_DLBRIDGE_CLOSED`.
 */
export declare class Tensor<D extends string = DType> {
  private constructor();
  /** Dimension sizes. */
  readonly shape: number[];
  /** Strides, in elements. */
  readonly strides: number[];
  /** Element type name. */
  readonly dtype: D;
  /** Device of the memory. */
  readonly device: Device;
  /** Number of dimensions. */
  readonly ndim: number;
  /** Number of elements. */
  readonly size: number;
  /** Bytes per element. */
  readonly itemsize: number;
  /** Bytes of the elements if they were compact. */
  readonly nbytes: number;
  /**
   * Byte offset of element 0: in the typed array's ArrayBuffer for tensors made by
   * {@link fromTypedArray}, else from the lowest byte the tensor touches (0 when row-major).
   */
  readonly byteOffset: number;
  /** Whether the producer forbids writing the memory. */
  readonly readonly: boolean;
  /**
   * Whether the data is a copy: the producer copied it for the exchange (DLPack's IS_COPIED),
   * or this object's typed arrays are copies because the runtime forbids external buffers.
   */
  readonly copied: boolean;
  /** Address of element 0. */
  readonly dataPtr: bigint;
  /** Whether {@link Tensor.close} has run. */
  readonly closed: boolean;
  /**
   * Lets go of this object's hold on the memory now: a shared-memory segment (and its file
   * descriptor), a Rust allocation or a pinned typed array is released at once unless typed
   * arrays from {@link Tensor.toTypedArray}, exports or other `Tensor`s over it still hold it.
   * Closing twice does nothing. Where the runtime has `Symbol.dispose`, `tensor[Symbol.dispose]()`
   * calls it, so `using t = empty([4])` closes `t` at the end of its block.
   */
  close(): void;
  /**
   * The elements as a typed array (see {@link TypedArrayOf}), in row-major order.
   *
   * Zero-copy for row-major tensors: every view of one tensor shares one ArrayBuffer over its
   * memory, and the memory is released when the tensor and all views are collected. Other
   * layouts throw (`ERR_DLBRIDGE_NOT_CONTIGUOUS`) unless `copy: true`; read-only tensors throw
   * (`ERR_DLBRIDGE_READ_ONLY`) unless `copy: true` or `unsafeIgnoreReadOnly: true`. Where the
   * runtime forbids external buffers the view is a copy and {@link Tensor.copied} turns true.
   *
   * @throws {Error} not row-major / read-only / not on the CPU
   * @throws {TypeError} a dtype without typed-array view, or a detached source buffer
   * @throws {RangeError} `ERR_DLBRIDGE_TOO_LARGE`: more elements than a typed array holds, or a
   *   view of more bytes than an external ArrayBuffer holds (both `buffer.constants.MAX_LENGTH`,
   *   4 GiB on Node 20); `ERR_DLBRIDGE_ALLOCATION_FAILED`: a copy the engine cannot allocate
   */
  toTypedArray(options?: ToTypedArrayOptions): TypedArrayFor<D>;
  /**
   * Exports the tensor as a DLPack managed-tensor pointer for another native consumer, which
   * must call its deleter exactly once (or hand it to {@link importPointer} /
   * {@link releasePointer}). The tensor's memory stays alive until then.
   */
  exportPointer(options?: ExportPointerOptions): bigint;
  /**
   * The element at `index`, read in place through the strides, for every layout (column-major,
   * strided, negative strides). `index` has one integer per dimension (`[]` for a 0-d tensor; a
   * plain integer for a 1-d one), each in `0 .. shape[k] - 1`. See {@link ElementOf}.
   *
   * @throws {RangeError} `ERR_DLBRIDGE_INDEX_OUT_OF_RANGE`: wrong number of indices, or one out
   *   of bounds
   * @throws {TypeError} `ERR_DLBRIDGE_INVALID_ARGUMENT` (an index that is not an integer),
   *   `ERR_DLBRIDGE_UNSUPPORTED_DTYPE` (float8, sub-byte and vector dtypes), a detached buffer
   * @throws {Error} `ERR_DLBRIDGE_NOT_ON_CPU`
   */
  get(index: readonly number[] | number): ElementOf<D>;
  /**
   * Writes `value` to the element at `index` in place (the producer sees it: no copy is
   * involved). Floats are rounded to the dtype's nearest value; integers must fit the dtype.
   *
   * @throws {Error} `ERR_DLBRIDGE_READ_ONLY` for a read-only tensor, and what {@link Tensor.get}
   *   throws
   * @throws {TypeError} `ERR_DLBRIDGE_INVALID_VALUE`: a value of the wrong JS type
   * @throws {RangeError} `ERR_DLBRIDGE_VALUE_OUT_OF_RANGE`: an integer the dtype cannot hold
   */
  set(index: readonly number[] | number, value: ElementInputOf<D>): void;
  /** The metadata, as `util.inspect` shows it: `Tensor { dtype: 'float32', shape: [2, 3], … }`. */
  toString(): string;
  /** What `JSON.stringify` writes: the metadata as plain data, never the elements. */
  toJSON(): TensorJSON<D>;
}

/** A tensor's metadata as plain data ({@link Tensor.toJSON}). */
export interface TensorJSON<D extends string = string> {
  dtype: D;
  shape: number[];
  strides: number[];
  device: Device;
  readonly: boolean;
  copied: boolean;
}

/**
 * A tensor over a typed array's own memory: no copy, same address (byteOffset honoured). The
 * ArrayBuffer stays alive while any holder of the tensor lives, and is marked untransferable.
 * The checks hold for typed arrays of any realm (`vm` contexts, Jest) whatever their `buffer`
 * property says, and the options are read before the buffer is checked.
 *
 * @throws {TypeError} not a typed array, detached (`ERR_DLBRIDGE_DETACHED`, also when an
 *   option's getter detached it), resizable (`ERR_DLBRIDGE_RESIZABLE`), a dtype the array
 *   cannot hold, or an unknown option
 * @throws {RangeError} shape, strides or offset reaching outside the typed array
 */
export declare function fromTypedArray<A extends SupportedTypedArray>(
  array: A,
  options?: FromTypedArrayOptions & { dtype?: undefined },
): Tensor<DTypeOf<A>>;
export declare function fromTypedArray<
  A extends SupportedTypedArray,
  D extends DTypesViewedBy<A>,
>(array: A, options: FromTypedArrayOptions & { dtype: D }): Tensor<D>;
export declare function fromTypedArray(
  array: SupportedTypedArray,
  options?: FromTypedArrayOptions,
): Tensor<string>;

/**
 * A zero-filled, 64-byte aligned, row-major tensor in memory owned by Rust (released when the
 * tensor, its views and its exports are gone).
 * @param shape dimension sizes (a number means `[n]`)
 * @param dtype element type, default "float32"
 * @throws {RangeError} negative or overflowing dimensions
 * @throws {TypeError} an unknown dtype
 */
export declare function empty<D extends DType = 'float32'>(
  shape: number | readonly number[],
  dtype?: D,
): Tensor<D>;

/**
 * A 1-d tensor `0, 1, …, n-1` in memory owned by Rust (bool: `i != 0`; complex: real part).
 * @param dtype element type, default "float32"
 */
export declare function arange<D extends DType = 'float32'>(
  n: number | bigint,
  dtype?: D,
): Tensor<D>;

/**
 * Takes ownership of a DLPack managed-tensor pointer (BigInt address) from another native addon
 * or {@link Tensor.exportPointer}; its deleter runs once, when the tensor and its views are
 * collected. Importing our own export gives back the exported tensor, except a tensor over a
 * worker's typed array imported in another thread: that becomes a row-major copy
 * ({@link Tensor.copied}), since the worker's memory goes when it exits.
 *
 * **Unsafe by nature**: a wrong or already-deleted address crashes the process.
 *
 * @throws {Error} `ERR_DLBRIDGE_MEMORY_GONE`: a tensor over the typed array of a worker that
 *   has exited (the pointer is consumed)
 */
export declare function importPointer(address: bigint, options?: ImportPointerOptions): Tensor;

/**
 * Calls the deleter of a managed-tensor pointer without importing it (an export nobody took).
 * **Unsafe by nature**, like {@link importPointer}.
 */
export declare function releasePointer(address: bigint, options?: { legacy?: boolean }): void;

/** Address of a typed array's first element (its byteOffset applied). */
export declare function addressOf(array: SupportedTypedArray): bigint;

/**
 * A Tensor over the memory of a tensor object that another native addon returned (the
 * `TensorObject` return type of the dlbridge-napi crate): shape, strides and read-only flag
 * kept, nothing copied; the addon's tensor lives until this tensor and its views are collected.
 * A dlbridge `Tensor` is accepted too (a new handle on the same memory).
 * @throws {TypeError} anything else, typed arrays included (use {@link fromTypedArray})
 */
export declare function fromTensorObject(object: object): Tensor;

/** What {@link emptyShared} returns. */
export interface SharedAllocation<D extends string = DType> {
  /**
   * The segment's name: pass it to {@link fromShared} in another process (or to
   * `dlbridge.shm_open` / `shm::open` in another runtime).
   */
  handle: string;
  /** This side's tensor over the segment; it holds this side's reference. */
  tensor: Tensor<D>;
}

/** Options of {@link fromShared}. */
export interface FromSharedOptions {
  /**
   * Map the data writable: writes are seen by every side. Default false: the pages are mapped
   * read-only and the tensor is {@link Tensor.readonly} (see {@link Tensor.toTypedArray}).
   */
  writable?: boolean;
}

/**
 * A zero-filled, row-major tensor allocated in a new POSIX shared-memory segment (no copy ever
 * needed to share it). The tensor holds this side's reference; the segment is removed when every
 * side (this tensor and its views, and every process that opened the handle) has let go.
 * @param shape dimension sizes (a number means `[n]`)
 * @param dtype element type, default "float32"
 * @throws {RangeError} negative or overflowing dimensions
 * @throws {TypeError} an unknown dtype
 * @throws {Error} `ERR_DLBRIDGE_SHM_IO`: the segment could not be created
 */
export declare function emptyShared<D extends DType = 'float32'>(
  shape: number | readonly number[],
  dtype?: D,
): SharedAllocation<D>;

/**
 * Copies a tensor (any layout) once, in row-major order, into a new shared-memory segment and
 * returns its handle. The opener's tensor reports {@link Tensor.copied}. This side keeps no
 * reference: the segment is handed over to the next {@link fromShared} of the handle, so the
 * caller may send the handle and exit: this process's keeper holds the segment until then, for
 * at most `DLBRIDGE_SHM_HANDOFF_SECONDS` (default 600). The handle opens once.
 * @throws {TypeError} not a Tensor, or a detached source buffer
 * @throws {Error} not on the CPU (`ERR_DLBRIDGE_NOT_ON_CPU`), or `ERR_DLBRIDGE_SHM_IO` (also when
 *   no keeper can hold the hand-over)
 * @throws {RangeError} a size the system cannot back (`ERR_DLBRIDGE_ALLOCATION_FAILED`)
 */
export declare function toShared(tensor: Tensor<string>): string;

/**
 * Maps a shared-memory segment by handle, without copying. Read-only (over copy-on-write pages:
 * a write that ignores the flag changes only this process's copy) unless `writable: true`.
 * @throws {Error} `ERR_DLBRIDGE_SHM_NOT_FOUND` (no such segment, already released by every
 *   side, or a hand-over already taken), `ERR_DLBRIDGE_SHM_INVALID` (not a dlbridge segment,
 *   truncated, or a corrupt header), `ERR_DLBRIDGE_SHM_IO` (a failed system call, e.g.
 *   permission denied or a file lease on the segment; never a wait)
 * @throws {TypeError} a handle that is not a string (`ERR_DLBRIDGE_INVALID_ARGUMENT`) or not a
 *   valid segment name (`ERR_DLBRIDGE_INVALID_SHM_HANDLE`)
 */
export declare function fromShared(handle: string, options?: FromSharedOptions): Tensor;

/** The DLPack version this build speaks, `[major, minor]`. */
export declare const DLPACK_VERSION: readonly [number, number];

/** The native side's counts of the resources it holds (see {@link diagnostics}). */
export interface Diagnostics {
  /** Tensors alive in Rust (each owning a JS buffer pin, a Rust allocation or a foreign tensor). */
  liveTensors: number;
  /** Tensors released since the process started (producer deleters run). */
  releasedTensors: number;
  /** JS ArrayBuffers pinned by tensors made with `fromTypedArray`. */
  pinnedJsBuffers: number;
  /** External ArrayBuffers (typed-array views of native memory) not yet finalized. */
  externalBuffers: number;
  /** Exports not yet deleted: `exportPointer` results, tensors lent to other addons. */
  pendingExports: number;
}

/**
 * The native side's counts, all threads and workers together: a leak check, as a heap snapshot
 * cannot see native memory. Once the last holder of a tensor is gone and the collector ran
 * (`global.gc()` under `--expose-gc`, then a turn of the event loop for finalizers), every count
 * but `releasedTensors` is back where it was.
 */
export declare function diagnostics(): Diagnostics;

/** Switches for the node:test suite: present only in the test build (feature `test-hooks`). */
export declare const _testHooks:
  | {
      /** Make this thread's environment refuse external buffers, as Electron's memory cage does. */
      forbidExternalBuffers(forbid: boolean): void;
      /** `tensor.exportPointer(options)` without remembering the export as this package's. */
      exportAnonymous(tensor: Tensor, options?: { legacy?: boolean; unsafeIgnoreReadOnly?: boolean }): bigint;
      /** Exports other addons asked of tensors to keep beyond a call (lent arguments make none). */
      addonExports(): number;
    }
  | undefined;
