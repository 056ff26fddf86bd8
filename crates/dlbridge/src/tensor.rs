//! [`Tensor`]: a tensor whose metadata we built (trusted) over memory kept alive by an owner.

use std::any::Any;
use std::fmt;

use smallvec::SmallVec;

use crate::buffer::AlignedBuffer;
use crate::dtype::{DataType, DataTypeCode, Element};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::layout::{self, Order};
use crate::managed::ManagedTensor;
use crate::stream_order::{self, ReadyMark};
use crate::view::{AsTensorView, TensorView};
use crate::{Device, MAX_NDIM};

/// A tensor with trusted metadata and an owner that keeps its memory alive.
///
/// The owner can be a `Vec`, a boxed slice, an [`AlignedBuffer`], a foreign [`ManagedTensor`]
/// (whose deleter then runs when this tensor drops) or any `Send + Sync` value.
pub struct Tensor {
    data: *mut u8,
    shape: SmallVec<[i64; 6]>,
    strides: SmallVec<[i64; 6]>,
    dtype: DataType,
    device: Device,
    flags: Flags,
    ready: ReadyMark,
    _owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: the owner is Send + Sync and keeps the memory alive; the pointer is only dereferenced
// through views whose reads are valid from any thread, and writes are the caller's unsafe contract.
unsafe impl Send for Tensor {}
// SAFETY: as above; `&Tensor` exposes only immutable metadata and views.
unsafe impl Sync for Tensor {}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("data", &self.data)
            .field("shape", &self.shape.as_slice())
            .field("strides", &self.strides.as_slice())
            .field("dtype", &self.dtype.name())
            .field("device", &self.device.to_string())
            .field("flags", &self.flags)
            .finish()
    }
}

/// Checks a Rust-side shape: ndim in range, no negative dims, element and byte counts fit.
pub(crate) fn check_shape(shape: &[i64], itemsize: usize) -> Result<usize> {
    if shape.len() > MAX_NDIM {
        return Err(Error::NdimOutOfRange(shape.len() as i64));
    }
    if let Some((axis, &size)) = shape.iter().enumerate().find(|(_, &d)| d < 0) {
        return Err(Error::NegativeDim { axis, size });
    }
    layout::element_count(shape)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| {
            n.checked_mul(itemsize)
                .is_some_and(|b| b <= isize::MAX as usize)
        })
        .ok_or_else(|| Error::ShapeOverflow {
            shape: shape.to_vec(),
        })
}

impl Tensor {
    /// Builds a tensor over memory owned by `owner`.
    ///
    /// `data` is the address of element 0; `strides` default to compact row-major.
    ///
    /// # Safety
    /// For host-accessible devices, every byte of the tensor's span around `data` stays readable
    /// (and writable unless `flags` has READ_ONLY) while `owner` lives, and `owner` dropping is
    /// what releases it.
    pub unsafe fn from_raw_parts(
        data: *mut u8,
        shape: &[i64],
        strides: Option<&[i64]>,
        dtype: DataType,
        device: Device,
        flags: Flags,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<Tensor> {
        let item = dtype.storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED));
        let size = check_shape(shape, item.unwrap_or(1))?;
        if size > 0 && data.is_null() {
            return Err(Error::NullData { size: size as i64 });
        }
        let strides: SmallVec<[i64; 6]> = match strides {
            Some(s) => {
                layout::check_strides_len(shape, s)?;
                SmallVec::from_slice(s)
            }
            None => SmallVec::from_vec(layout::compact_strides(shape, Order::C)),
        };
        if item.is_none() && !layout::is_contiguous(shape, &strides, Order::C) {
            return Err(Error::UnsupportedLayout(format!(
                "packed {dtype} elements need C-contiguous strides, got {strides:?} for shape {shape:?}"
            )));
        }
        layout::element_span(shape, &strides, item, dtype.total_bits(), 0)?;
        Ok(Tensor {
            data,
            shape: SmallVec::from_slice(shape),
            strides,
            dtype,
            device,
            flags,
            ready: ReadyMark::default(),
            _owner: owner,
        })
    }

    /// A tensor over the elements of `owner` (a `Vec<T>`, `Box<[T]>`, …), starting at element
    /// `offset`, with the given shape and strides (compact row-major when `None`; negative strides
    /// allowed). Fails with [`Error::BufferTooSmall`] if the layout reaches outside the elements.
    pub fn from_elements<T, O>(
        owner: O,
        shape: &[i64],
        strides: Option<&[i64]>,
        offset: usize,
    ) -> Result<Tensor>
    where
        T: Element,
        O: AsMut<[T]> + Send + Sync + 'static,
    {
        let item = std::mem::size_of::<T>();
        check_shape(shape, item)?;
        let compact;
        let strides = match strides {
            Some(s) => {
                layout::check_strides_len(shape, s)?;
                s
            }
            None => {
                compact = layout::compact_strides(shape, Order::C);
                &compact
            }
        };
        // Box first: the elements' address must be taken where the owner will stay.
        let mut owner = Box::new(owner);
        let elems = (*owner).as_mut();
        let len = std::mem::size_of_val(elems);
        let byte_offset = (offset as u64).saturating_mul(item as u64);
        let span = layout::byte_span(shape, strides, item, byte_offset)?;
        if !span.is_empty() && (span.start < 0 || span.end as usize > len) {
            return Err(Error::BufferTooSmall {
                len,
                shape: shape.to_vec(),
                strides: strides.to_vec(),
                start: span.start as i64,
                end: span.end as i64,
            });
        }
        let base = elems.as_mut_ptr() as *mut u8;
        let data = base.wrapping_add(byte_offset as usize);
        // SAFETY: the span lies inside the owner's elements (checked above), which are uniquely
        // owned (AsMut), do not move while the box moves, and are released by dropping the owner.
        unsafe {
            Tensor::from_raw_parts(
                data,
                shape,
                Some(strides),
                T::DTYPE,
                Device::CPU,
                Flags::empty(),
                owner,
            )
        }
    }

    /// A C-contiguous tensor owning `data`; `shape` must hold exactly `data.len()` elements.
    ///
    /// ```
    /// use dlbridge::{DataType, Tensor};
    ///
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    /// assert_eq!((t.shape(), t.strides(), t.dtype()), (&[2, 3][..], &[3, 1][..], DataType::I32));
    /// assert!(Tensor::from_vec(vec![1i32, 2, 3], &[2, 2]).is_err()); // 4 elements wanted
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        Self::from_exact(data, shape)
    }

    /// A C-contiguous tensor owning a boxed slice; `shape` must hold exactly its length.
    pub fn from_boxed_slice<T: Element>(data: Box<[T]>, shape: &[i64]) -> Result<Tensor> {
        Self::from_exact(data, shape)
    }

    fn from_exact<T: Element, O: AsMut<[T]> + Send + Sync + 'static>(
        mut data: O,
        shape: &[i64],
    ) -> Result<Tensor> {
        let len = data.as_mut().len();
        let size = check_shape(shape, std::mem::size_of::<T>())?;
        if size != len {
            let item = std::mem::size_of::<T>() as i64;
            return Err(Error::BufferTooSmall {
                len: len * item as usize,
                shape: shape.to_vec(),
                strides: layout::compact_strides(shape, Order::C),
                start: 0,
                end: size as i64 * item,
            });
        }
        Self::from_elements(data, shape, None, 0)
    }

    /// A zero-filled, 64-byte aligned, compact tensor on the CPU.
    pub fn zeros(shape: &[i64], dtype: DataType, order: Order) -> Result<Tensor> {
        Self::alloc(shape, dtype, order, Flags::empty())
    }

    /// `zeros` for any dtype: `flags` may carry IS_SUBBYTE_TYPE_PADDED (one byte per sub-byte
    /// element); without it sub-byte elements are packed, which only C order can describe.
    pub(crate) fn alloc(
        shape: &[i64],
        dtype: DataType,
        order: Order,
        flags: Flags,
    ) -> Result<Tensor> {
        let item = dtype.storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED));
        let size = check_shape(shape, item.unwrap_or(1))?;
        let bytes = match item {
            Some(item) => size * item,
            None if order == Order::C || shape.len() <= 1 => {
                layout::packed_len(size as u64, dtype.total_bits()).ok_or_else(|| {
                    Error::ShapeOverflow {
                        shape: shape.to_vec(),
                    }
                })?
            }
            None => {
                return Err(Error::UnsupportedLayout(format!(
                    "packed {dtype} elements only have a C order"
                )))
            }
        };
        let buffer = AlignedBuffer::zeroed(bytes)?;
        let strides = layout::compact_strides(shape, order);
        let data = buffer.as_ptr();
        // SAFETY: the buffer holds exactly the compact layout's bytes, zeroed and writable.
        unsafe {
            Tensor::from_raw_parts(
                data,
                shape,
                Some(&strides),
                dtype,
                Device::CPU,
                flags,
                Box::new(buffer),
            )
        }
    }

    /// `zeros` in C order: the constructor the frontends expose as `empty`.
    pub fn empty(shape: &[i64], dtype: DataType) -> Result<Tensor> {
        Self::zeros(shape, dtype, Order::C)
    }

    /// A 1-d tensor holding `0, 1, …, n-1` converted to `dtype` (bool: `i != 0`; complex: real part).
    pub fn arange(n: i64, dtype: DataType) -> Result<Tensor> {
        let t = Self::zeros(&[n], dtype, Order::C)?;
        let data = t.data;
        let n = n as usize;
        macro_rules! fill {
            ($ty:ty, $conv:expr) => {{
                // SAFETY: `t` is a fresh, compact, uniquely owned buffer of `n` elements of `$ty`
                // (64-byte aligned), matching dtype checked by the dispatch below.
                let out = unsafe { std::slice::from_raw_parts_mut(data as *mut $ty, n) };
                for (i, v) in out.iter_mut().enumerate() {
                    *v = $conv(i);
                }
            }};
        }
        match (dtype.code(), dtype.bits(), dtype.lanes()) {
            (DataTypeCode::Bool, 8, 1) => fill!(u8, |i| u8::from(i != 0)),
            (DataTypeCode::Int, 8, 1) => fill!(i8, |i| i as i8),
            (DataTypeCode::Int, 16, 1) => fill!(i16, |i| i as i16),
            (DataTypeCode::Int, 32, 1) => fill!(i32, |i| i as i32),
            (DataTypeCode::Int, 64, 1) => fill!(i64, |i| i as i64),
            (DataTypeCode::UInt, 8, 1) => fill!(u8, |i| i as u8),
            (DataTypeCode::UInt, 16, 1) => fill!(u16, |i| i as u16),
            (DataTypeCode::UInt, 32, 1) => fill!(u32, |i| i as u32),
            (DataTypeCode::UInt, 64, 1) => fill!(u64, |i| i as u64),
            (DataTypeCode::Float, 16, 1) => fill!(half::f16, |i| half::f16::from_f64(i as f64)),
            (DataTypeCode::Float, 32, 1) => fill!(f32, |i| i as f32),
            (DataTypeCode::Float, 64, 1) => fill!(f64, |i| i as f64),
            (DataTypeCode::Bfloat, 16, 1) => fill!(half::bf16, |i| half::bf16::from_f64(i as f64)),
            (DataTypeCode::Complex, 64, 1) => fill!([f32; 2], |i| [i as f32, 0.0]),
            (DataTypeCode::Complex, 128, 1) => fill!([f64; 2], |i| [i as f64, 0.0]),
            _ => {
                return Err(Error::UnsupportedLayout(format!(
                    "arange is not defined for dtype {dtype}"
                )))
            }
        }
        Ok(t)
    }

    /// Wraps a validated foreign tensor; its deleter runs when the returned tensor drops.
    pub fn from_managed(managed: ManagedTensor) -> Tensor {
        let v = managed.view();
        let (data, dtype, device, flags) = (v.data_ptr(), v.dtype(), v.device(), v.flags());
        let (shape, strides) = (
            SmallVec::from_slice(v.shape()),
            SmallVec::from_slice(v.strides()),
        );
        Tensor {
            data,
            shape,
            strides,
            dtype,
            device,
            flags,
            ready: ReadyMark::default(),
            _owner: Box::new(managed),
        }
    }

    /// Says that the data is ready once the work queued so far on `stream` of the tensor's CUDA
    /// device is done (1 and 2 are the legacy and per-thread default streams, as in DLPack):
    /// records an event there, replacing any earlier one, and returns at once. Consumers then call
    /// [`Tensor::order_stream`] with their own stream. [`Error::StreamsUnsupported`] off CUDA.
    pub fn mark_ready_on(&self, stream: usize) -> Result<()> {
        self.ready.record(self.device, stream)
    }

    /// Makes work queued later on `stream` wait until the point given to
    /// [`Tensor::mark_ready_on`] is reached; nothing to wait for if none was given. Returns at
    /// once. [`Error::StreamsUnsupported`] off CUDA.
    pub fn order_stream(&self, stream: usize) -> Result<()> {
        self.ready.order(self.device, stream)
    }

    /// Blocks until the data can be read on the host: at once for CPU memory; for CUDA memory the
    /// host can read (`cuda_host`, `cuda_managed`), until the point given to
    /// [`Tensor::mark_ready_on`], or until the whole device is idle if none was given.
    /// [`Error::NotOnCpu`] for memory the host cannot read.
    pub fn wait_for_host(&self) -> Result<()> {
        match self.device.kind {
            crate::DeviceType::Cpu => Ok(()),
            crate::DeviceType::CudaHost | crate::DeviceType::CudaManaged => {
                match self.ready.event() {
                    Some(event) => event.wait(),
                    None => stream_order::synchronize_device(self.device),
                }
            }
            _ => Err(Error::NotOnCpu(self.device.to_string())),
        }
    }

    /// A borrowed view.
    pub fn view(&self) -> TensorView<'_> {
        AsTensorView::view(self)
    }

    /// Address of element 0.
    pub fn data_ptr(&self) -> *mut u8 {
        self.data
    }

    /// Address of element 0 for writing; fails for read-only tensors.
    pub fn data_ptr_mut(&self) -> Result<*mut u8> {
        if self.flags.contains(Flags::READ_ONLY) {
            Err(Error::ReadOnly)
        } else {
            Ok(self.data)
        }
    }

    /// Dimension sizes.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }

    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// DLPack flags.
    pub fn flags(&self) -> Flags {
        self.flags
    }

    /// Returns the tensor with `flags` added (e.g. READ_ONLY to share memory that must not be
    /// written).
    pub fn with_flags(mut self, flags: Flags) -> Tensor {
        self.flags |= flags;
        self
    }
}

impl AsTensorView for Tensor {
    fn view(&self) -> TensorView<'_> {
        // SAFETY: metadata checked by every constructor; the owner keeps the memory alive for as
        // long as `self` (and so the borrow) lives.
        unsafe {
            TensorView::from_raw_parts(
                self.data,
                &self.shape,
                &self.strides,
                self.dtype,
                self.device,
                self.flags,
            )
        }
    }
}

impl From<ManagedTensor> for Tensor {
    fn from(managed: ManagedTensor) -> Tensor {
        Tensor::from_managed(managed)
    }
}
