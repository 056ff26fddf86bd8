//! Conversion of a tensor's elements to Python scalars (`tolist`).

use dlbridge::{DataType, DataTypeCode, TensorView};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyList};

use crate::errors::{to_py_err, type_error};

/// Converts the element at a pointer to a Python scalar.
///
/// # Safety
/// The pointer addresses a readable element of the converter's dtype (alignment not required).
type Convert = for<'py> unsafe fn(Python<'py>, *const u8) -> PyResult<Bound<'py, PyAny>>;

/// Reads a `T` at `p`.
///
/// # Safety
/// `p` addresses `size_of::<T>()` readable bytes holding a valid `T`.
unsafe fn read<T: Copy>(p: *const u8) -> T {
    // SAFETY: per the function contract; unaligned reads are allowed.
    unsafe { p.cast::<T>().read_unaligned() }
}

macro_rules! converters {
    ($($name:ident: $ty:ty => |$py:ident, $v:ident| $body:expr;)*) => {
        $(
            /// Element converter (see [`Convert`]).
            ///
            /// # Safety
            /// As for [`Convert`].
            unsafe fn $name<'py>($py: Python<'py>, p: *const u8) -> PyResult<Bound<'py, PyAny>> {
                // SAFETY: the caller passes a readable element of this type.
                let $v: $ty = unsafe { read(p) };
                $body
            }
        )*
    };
}

converters! {
    bool_element: u8 => |py, v| Ok(PyBool::new(py, v != 0).to_owned().into_any());
    i8_element: i8 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    i16_element: i16 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    i32_element: i32 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    i64_element: i64 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    u8_element: u8 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    u16_element: u16 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    u32_element: u32 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    u64_element: u64 => |py, v| Ok(v.into_pyobject(py)?.into_any());
    f16_element: u16 => |py, v| Ok(PyFloat::new(py, half::f16::from_bits(v).to_f64()).into_any());
    bf16_element: u16 => |py, v| Ok(PyFloat::new(py, half::bf16::from_bits(v).to_f64()).into_any());
    f32_element: f32 => |py, v| Ok(PyFloat::new(py, v.into()).into_any());
    f64_element: f64 => |py, v| Ok(PyFloat::new(py, v).into_any());
    c64_element: [f32; 2] => |py, v| Ok(PyComplex::from_doubles(py, v[0].into(), v[1].into()).into_any());
    c128_element: [f64; 2] => |py, v| Ok(PyComplex::from_doubles(py, v[0], v[1]).into_any());
}

fn converter(dtype: DataType) -> Option<Convert> {
    if dtype.lanes() != 1 {
        return None;
    }
    Some(match (dtype.code(), dtype.bits()) {
        (DataTypeCode::Bool, 8) => bool_element,
        (DataTypeCode::Int, 8) => i8_element,
        (DataTypeCode::Int, 16) => i16_element,
        (DataTypeCode::Int, 32) => i32_element,
        (DataTypeCode::Int, 64) => i64_element,
        (DataTypeCode::UInt, 8) => u8_element,
        (DataTypeCode::UInt, 16) => u16_element,
        (DataTypeCode::UInt, 32) => u32_element,
        (DataTypeCode::UInt, 64) => u64_element,
        (DataTypeCode::Float, 16) => f16_element,
        (DataTypeCode::Float, 32) => f32_element,
        (DataTypeCode::Float, 64) => f64_element,
        (DataTypeCode::Bfloat, 16) => bf16_element,
        (DataTypeCode::Complex, 64) => c64_element,
        (DataTypeCode::Complex, 128) => c128_element,
        _ => return None,
    })
}

/// The elements of a host tensor as nested lists (a scalar for 0-d), honouring strides.
///
/// A bool element must be the byte 0 or 1 (dlbridge's one bool rule): any other byte gives a
/// ValueError naming the first such element's index and byte.
pub(crate) fn to_list<'py>(py: Python<'py>, view: &TensorView<'_>) -> PyResult<Bound<'py, PyAny>> {
    view.require_host().map_err(to_py_err)?;
    if view.dtype() == DataType::BOOL {
        view.check_values::<bool>().map_err(to_py_err)?;
    }
    let convert = converter(view.dtype())
        .ok_or_else(|| type_error(format!("tolist() does not support dtype {}", view.dtype())))?;
    let item = view
        .storage_size()
        .expect("convertible dtypes are whole bytes") as isize;
    build(py, view, 0, view.data_ptr(), item, convert)
}

fn build<'py>(
    py: Python<'py>,
    view: &TensorView<'_>,
    dim: usize,
    at: *const u8,
    item: isize,
    convert: Convert,
) -> PyResult<Bound<'py, PyAny>> {
    if dim == view.ndim() {
        // SAFETY: `at` is element (i0, …, in) of a host tensor with every index in bounds, so it
        // lies inside the validated, readable span; `convert` matches the dtype.
        return unsafe { convert(py, at) };
    }
    let step = view.strides()[dim] as isize * item;
    let list = PyList::empty(py);
    for i in 0..view.shape()[dim] as isize {
        list.append(build(
            py,
            view,
            dim + 1,
            at.wrapping_offset(i * step),
            item,
            convert,
        )?)?;
    }
    Ok(list.into_any())
}
