//! Making tensors: `fromTypedArray` (zero-copy over JS memory), `empty` and `arange` (memory
//! owned by Rust).

use dlbridge::layout::{self, Order};
use dlbridge::{DataType, Device, Error as CoreError, Flags, Tensor as CoreTensor, MAX_NDIM};
use dlbridge_napi::JsTensor;
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::arguments::{describe, dtype_name, integer, integer_list, Options};
use crate::env_context::EnvContext;
use crate::errors::OrThrow;
use crate::js_memory::{detached, JsMemory};
use crate::live_tensor::LiveTensor;
use crate::tensor::Tensor;
use dlbridge_napi::node_api::{Handle, ObjectTag, Scope};
use dlbridge_napi::typed_arrays::dtype_for;
use dlbridge_napi::{Error, Result};

/// Fails for negative dimensions or too many of them (a `RangeError`, naming the value), before
/// any layout arithmetic on them.
fn check_dims(shape: &[i64]) -> Result<()> {
    if shape.len() > MAX_NDIM {
        return Err(CoreError::NdimOutOfRange(shape.len() as i64).into());
    }
    match shape.iter().enumerate().find(|(_, &d)| d < 0) {
        Some((axis, &size)) => Err(CoreError::NegativeDim { axis, size }.into()),
        None => Ok(()),
    }
}

/// `fromTypedArray`'s options, read (and their getters run) before the typed array is looked
/// at, so that no JavaScript runs between checking its buffer and pinning it.
struct TypedArrayOptions {
    dtype: Option<String>,
    offset: i64,
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    readonly: bool,
}

impl TypedArrayOptions {
    fn read(options: &Options<'_>) -> Result<Self> {
        Ok(TypedArrayOptions {
            dtype: options.dtype(c"dtype")?,
            offset: options.integer(c"offset")?.unwrap_or(0),
            shape: options.integer_list(c"shape")?,
            strides: options.integer_list(c"strides")?,
            readonly: options.bool(c"readonly")?.unwrap_or(false),
        })
    }
}

/// The Node-API type tag of an ArrayBuffer found fixed-length and marked untransferable.
const PINNABLE_TAG: ObjectTag =
    napi::bindgen_prelude::type_tag_from_ident("dlbridge.node::PinnableArrayBuffer");

/// The `TypeError` for a resizable ArrayBuffer.
fn resizable() -> Error {
    Error::type_error(
        "ERR_DLBRIDGE_RESIZABLE",
        "fromTypedArray: resizable ArrayBuffers can shrink under native code; use a fixed-length \
         one (growable SharedArrayBuffers are fine)",
    )
}

fn tensor_over_typed_array<'env>(
    scope: Scope<'env>,
    array: Handle<'env>,
    options: &Options<'env>,
) -> Result<Handle<'env>> {
    let context = EnvContext::of(scope)?;
    let engine = context.require_engine()?;
    let TypedArrayOptions {
        dtype,
        offset,
        shape,
        strides,
        readonly,
    } = TypedArrayOptions::read(options)?;
    // From here on no JavaScript of the caller's runs: the buffer checked below is the buffer
    // pinned at the end. Node-API reports the typed array's own buffer, whatever realm it comes
    // from and whatever its `buffer` property says.
    let info = array.typed_array_info()?.ok_or_else(|| {
        Error::type_error(
            "ERR_DLBRIDGE_INVALID_ARGUMENT",
            format!(
                "fromTypedArray expects a typed array, got {}",
                describe(array)
            ),
        )
    })?;
    // A detached buffer leaves its typed arrays empty: only an empty one can be over one.
    if info.length == 0 && info.buffer.is_detached() {
        return Err(detached());
    }
    // An ArrayBuffer that an earlier call already found fixed-length and marked untransferable
    // carries PINNABLE_TAG (neither can change back); others cost two calls into JavaScript.
    // A typed array's buffer is an object (an ArrayBuffer or a SharedArrayBuffer, never tagged).
    let unchecked_arraybuffer =
        !info.buffer.object_has_type_tag(&PINNABLE_TAG) && info.buffer.is_arraybuffer();
    if unchecked_arraybuffer && engine.is_resizable(scope, info.buffer)? {
        return Err(resizable());
    }
    let (dtype, js) = dtype_for(info.kind, dtype.as_deref())?;
    let itemsize = dtype.itemsize();
    let byte_len = info.length * info.kind.element_size();
    let elements = (byte_len / itemsize) as i64;
    if !(0..=elements).contains(&offset) {
        return Err(Error::range_error(
            "ERR_DLBRIDGE_OUT_OF_BOUNDS",
            format!(
                "fromTypedArray: offset {offset} is outside the {elements} {dtype} elements of the {}",
                info.kind.name()
            ),
        ));
    }
    // The default shape (1-d) and compact 1-d strides live on the stack.
    let default_shape: [i64; 1];
    let shape: &[i64] = match &shape {
        Some(shape) => shape,
        None if info.length % js.per_element != 0 => {
            return Err(Error::range_error(
                "ERR_DLBRIDGE_OUT_OF_BOUNDS",
                format!(
                    "{} {} of {} elements holds no whole number of {dtype} elements ({} each): \
                     pass a shape",
                    dlbridge::indefinite_article(info.kind.name()),
                    info.kind.name(),
                    info.length,
                    js.per_element
                ),
            ))
        }
        None => {
            default_shape = [elements - offset];
            &default_shape
        }
    };
    check_dims(shape)?;
    let compact;
    let strides: &[i64] = match &strides {
        Some(strides) => {
            layout::check_strides_len(shape, strides)?;
            strides
        }
        None if shape.len() == 1 => &[1],
        None => {
            compact = layout::compact_strides(shape, Order::C);
            &compact
        }
    };
    let byte_offset = offset as usize * itemsize;
    let span = layout::byte_span(shape, strides, itemsize, byte_offset as u64)?;
    if !span.is_empty() && (span.start < 0 || span.end as usize > byte_len) {
        return Err(CoreError::BufferTooSmall {
            len: byte_len,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            start: span.start as i64,
            end: span.end as i64,
        }
        .into());
    }
    let flags = match readonly {
        true => Flags::READ_ONLY,
        false => Flags::empty(),
    };
    let data = info.data.wrapping_add(byte_offset);
    // SAFETY: the span lies inside the typed array's bytes (checked above), which the JsMemory
    // pinned below keeps alive (and un-transferable) for as long as the LiveTensor that holds
    // both; the empty owner is fine because that pin is the owner.
    let tensor = unsafe {
        CoreTensor::from_raw_parts(
            data,
            shape,
            Some(strides),
            dtype,
            Device::CPU,
            flags,
            Box::new(()),
        )
    }?;
    if unchecked_arraybuffer {
        // Native code holds the address from now on: `postMessage` must copy, not move, it.
        engine.mark_untransferable(scope, info.buffer)?;
        // Untagged (another addon's tag is there) only means the checks run again next time.
        info.buffer.add_type_tag(&PINNABLE_TAG);
    }
    let memory = JsMemory::pin(
        scope,
        context.clone(),
        info.buffer,
        info.byte_offset + byte_offset,
    )?;
    Tensor::new(LiveTensor::over_js(tensor, memory)).into_object(scope, engine)
}

/// `fromTypedArray(array, options)`: a `Tensor` over a typed array's own memory (see
/// index.d.ts); a native function of [`entry_points`](crate::entry_points).
pub(crate) fn from_typed_array<'env>(
    scope: Scope<'env>,
    array: Handle<'env>,
    options: Option<Handle<'env>>,
) -> Result<Handle<'env>> {
    let options = Options::new(
        options,
        "fromTypedArray",
        &["shape", "strides", "offset", "readonly", "dtype"],
    )?;
    tensor_over_typed_array(scope, array, &options)
}

/// A `Tensor` over the memory of a tensor object that another native addon returned
/// (`dlbridge_napi::TensorObject`), or of any object of the tensor-object protocol: shape,
/// strides and read-only flag kept, nothing copied; the addon's tensor lives until this one and
/// every view of it are collected.
#[napi(js_name = "fromTensorObject")]
pub fn from_tensor_object(object: JsTensor<'_>) -> napi::Result<Tensor> {
    let tensor = object.into_tensor()?;
    Ok(Tensor::new(LiveTensor::native(tensor)))
}

/// The dtype argument of `empty`/`arange` (default float32).
pub(crate) fn dtype_argument(
    scope: Scope<'_>,
    value: Option<&Unknown<'_>>,
    what: &str,
) -> Result<DataType> {
    match dtype_name(value.map(|v| scope.adopt(v)), what)? {
        Some(name) => Ok(name.parse()?),
        None => Ok(DataType::F32),
    }
}

/// A zero-filled, 64-byte aligned, row-major tensor in memory owned by Rust.
#[napi]
pub fn empty(env: &Env, shape: Unknown<'_>, dtype: Option<Unknown<'_>>) -> napi::Result<Tensor> {
    let scope = Scope::new(env);
    let made = || -> Result<Tensor> {
        let shape = integer_list(scope.adopt(&shape), "empty: shape", true)?;
        let dtype = dtype_argument(scope, dtype.as_ref(), "empty: dtype")?;
        Ok(Tensor::new(LiveTensor::native(CoreTensor::empty(
            &shape, dtype,
        )?)))
    };
    made().or_throw(env)
}

/// A 1-d tensor holding `0, 1, …, n-1` in memory owned by Rust.
#[napi]
pub fn arange(env: &Env, n: Unknown<'_>, dtype: Option<Unknown<'_>>) -> napi::Result<Tensor> {
    let scope = Scope::new(env);
    let made = || -> Result<Tensor> {
        let n = integer(scope.adopt(&n), "arange: n")?;
        let dtype = dtype_argument(scope, dtype.as_ref(), "arange: dtype")?;
        Ok(Tensor::new(LiveTensor::native(CoreTensor::arange(
            n, dtype,
        )?)))
    };
    made().or_throw(env)
}
