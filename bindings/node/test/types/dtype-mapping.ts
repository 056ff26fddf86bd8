// Type-level tests of index.d.ts, checked by types.test.js with `tsc --noEmit --strict`:
// every assignment states what the declarations must infer; every @ts-expect-error a mistake
// they must reject.
import {
  arange,
  empty,
  emptyShared,
  fromShared,
  fromTypedArray,
  toShared,
  importPointer,
  Tensor,
  type DTypeOf,
  type TensorJSON,
  type TypedArrayFor,
} from '../../index';

const f32 = fromTypedArray(new Float32Array(4));
const f32Dtype: 'float32' = f32.dtype;
const f32View: Float32Array = f32.toTypedArray();

const bf16 = fromTypedArray(new Uint16Array(4), { dtype: 'bfloat16' });
const bf16Dtype: 'bfloat16' = bf16.dtype;
const bf16View: Uint16Array = bf16.toTypedArray();

const mask = fromTypedArray(new Uint8Array(4), { dtype: 'bool' });
const maskDtype: 'bool' = mask.dtype;

const clamped = fromTypedArray(new Uint8ClampedArray(4));
const clampedDtype: 'uint8' = clamped.dtype;
const clampedView: Uint8Array = clamped.toTypedArray();

const complex = fromTypedArray(new Float32Array(4), { dtype: 'complex64' });
const complexView: Float32Array = complex.toTypedArray();

const i64: BigInt64Array = arange(4, 'int64').toTypedArray();
const u64: BigUint64Array = empty([2], 'uint64').toTypedArray();
const half: Uint16Array = empty([2], 'float16').toTypedArray();
const defaultDtype: Float32Array = empty([2, 2]).toTypedArray();

const mapped: TypedArrayFor<'float64'> = new Float64Array(1);
const inferred: DTypeOf<Int16Array> = 'int16';

const address: bigint = f32.exportPointer({ legacy: true, unsafeIgnoreReadOnly: true });
const imported: Tensor = importPointer(address, { legacy: true, readonly: true });
const anyView = imported.toTypedArray({ copy: true, unsafeIgnoreReadOnly: false });

const shared = emptyShared([2], 'int32');
const sharedHandle: string = shared.handle;
const sharedView: Int32Array = shared.tensor.toTypedArray();
const sharedDefault: Float32Array = emptyShared(3).tensor.toTypedArray();
const reshared: string = toShared(f32);
const opened: Tensor = fromShared(reshared, { writable: true });

// @ts-expect-error fromShared's options are typed
fromShared(sharedHandle, { writable: 'yes' });
// @ts-expect-error a handle is a string
fromShared(42);
// @ts-expect-error toShared takes a Tensor
toShared(new Float32Array(2));
// @ts-expect-error a Float32Array tensor is not viewed by a Float64Array
const wrongView: Float64Array = f32.toTypedArray();
// @ts-expect-error the dtype literal is inferred, not widened
const wrongDtype: 'float64' = f32.dtype;
// @ts-expect-error Tensor has no public constructor
const constructed = new Tensor();
// @ts-expect-error a BigInt64Array tensor is not a Float64Array
const wrongBig: Float64Array = arange(2, 'int64').toTypedArray();
// @ts-expect-error options are typed
f32.toTypedArray({ copy: 'yes' });

const described: string = String(f32) + f32.toString();
const json: TensorJSON<'float32'> = f32.toJSON();
// @ts-expect-error toJSON keeps the dtype literal
const wrongJson: TensorJSON<'int8'> = f32.toJSON();

export const uses = [
  described, json, wrongJson,
  f32Dtype, f32View, bf16Dtype, bf16View, maskDtype, clampedDtype, clampedView,
  complexView, i64, u64, half, defaultDtype, mapped, inferred, anyView, wrongView, wrongDtype,
  constructed, wrongBig, sharedView, sharedDefault, opened,
];

// Element accessors: the JS value type follows the dtype.
const f32Element: number = f32.get([0]);
f32.set(0, 1.5);
const i64Element: bigint = arange(4, 'int64').get(2);
arange(4, 'int64').set([1], 7n);
const boolElement: boolean = empty([2], 'bool').get([1]);
const complexElement: [number, number] = empty([2], 'complex64').get([0]);
empty([2], 'complex128').set([0], [1, 2]);
// @ts-expect-error a bool element takes a boolean
empty([2], 'bool').set([0], 1);
// @ts-expect-error a float32 element is a number, not a bigint
const f32AsBigint: bigint = f32.get([0]);
void [f32Element, i64Element, boolElement, complexElement, f32AsBigint];

// close(): explicit release; `closed` says whether it ran.
const closing = empty([2], 'int32');
closing.close();
const isClosed: boolean = closing.closed;
// @ts-expect-error close takes no arguments
closing.close(true);
void isClosed;
