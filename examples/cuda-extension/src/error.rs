//! The extension's one error type, [`KernelError`], and the Python exceptions it becomes.

use std::fmt;

use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::PyErr;

pyo3::create_exception!(
    cudaops,
    CudaError,
    PyRuntimeError,
    "A CUDA driver call failed: the message names the call, the device and the driver's error."
);
pyo3::create_exception!(
    cudaops,
    CudaUnavailableError,
    CudaError,
    "CUDA cannot run here: no driver library, no NVRTC library, no device, or no device of \
     the tensor's ordinal."
);
pyo3::create_exception!(
    cudaops,
    KernelCompileError,
    CudaError,
    "NVRTC did not compile the kernels: the message has its options and log."
);

/// Why a kernel was not launched.
#[derive(Debug)]
pub enum KernelError {
    /// No CUDA driver library (`libcuda.so`) could be loaded.
    NoDriver,
    /// No NVRTC library (`libnvrtc.so.13`, `.12`, ...) could be loaded.
    NoNvrtc,
    /// The tensor's device ordinal is not a device of this process.
    NoSuchDevice {
        /// The tensor's device ordinal.
        ordinal: i32,
        /// How many devices the driver sees.
        count: i32,
    },
    /// A driver call failed.
    Driver {
        /// The driver function, e.g. `cuLaunchKernel`.
        call: &'static str,
        /// The device ordinal it was called for.
        ordinal: i32,
        /// The driver's error.
        error: DriverError,
    },
    /// NVRTC failed to compile the kernel source.
    Compile {
        /// The architecture compiled for, e.g. `compute_90`.
        arch: String,
        /// NVRTC's error and log.
        detail: String,
    },
    /// Two tensors of one launch are on different devices.
    DeviceMismatch {
        /// The first tensor's ordinal.
        x: i32,
        /// The second tensor's ordinal.
        y: i32,
    },
    /// Two tensors of an element-wise kernel differ in shape.
    ShapeMismatch {
        /// The first tensor's shape.
        x: Vec<i64>,
        /// The second tensor's shape.
        y: Vec<i64>,
    },
    /// A tensor written in place has elements that share memory (a 0 stride on a longer
    /// dimension), so threads writing it would race.
    OverlappingWrite {
        /// Its shape.
        shape: Vec<i64>,
        /// Its strides, in elements.
        strides: Vec<i64>,
    },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::NoDriver => write!(
                f,
                "no CUDA driver: libcuda could not be loaded (searched {})",
                searched("cuda")
            ),
            KernelError::NoNvrtc => write!(
                f,
                "no NVRTC: the kernels are compiled at run time, and libnvrtc could not be \
                 loaded (searched {}); add the folder that has it to LD_LIBRARY_PATH",
                searched("nvrtc")
            ),
            KernelError::NoSuchDevice { ordinal, count } => write!(
                f,
                "cuda:{ordinal} is not a device of this process: the driver sees {count} CUDA \
                 device(s)"
            ),
            KernelError::Driver {
                call,
                ordinal,
                error,
            } => {
                let detail = error
                    .error_string()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                write!(
                    f,
                    "{call} on cuda:{ordinal} failed: {:?} ({detail})",
                    error.0
                )
            }
            KernelError::Compile { arch, detail } => {
                write!(
                    f,
                    "NVRTC could not compile the kernels for {arch}: {detail}"
                )
            }
            KernelError::DeviceMismatch { x, y } => write!(
                f,
                "x is on cuda:{x} and y on cuda:{y}: a kernel reads and writes one device"
            ),
            KernelError::ShapeMismatch { x, y } => {
                write!(
                    f,
                    "x has shape {x:?} and y has shape {y:?}: they must be equal"
                )
            }
            KernelError::OverlappingWrite { shape, strides } => write!(
                f,
                "x (shape {shape:?}, strides {strides:?}) has elements that share memory (a 0 \
                 stride), so a kernel writing it in place would race: pass a tensor without \
                 broadcast dimensions"
            ),
        }
    }
}

impl std::error::Error for KernelError {}

/// "libcuda.so, libcuda64.so, …": the names cudarc tries for library `name`, each once.
fn searched(name: &str) -> String {
    let mut names: Vec<String> = Vec::new();
    for candidate in cudarc::get_lib_name_candidates(name) {
        if !names.contains(&candidate) {
            names.push(candidate);
        }
    }
    names.join(", ")
}

impl From<KernelError> for PyErr {
    fn from(err: KernelError) -> PyErr {
        let message = err.to_string();
        match err {
            KernelError::NoDriver | KernelError::NoNvrtc | KernelError::NoSuchDevice { .. } => {
                CudaUnavailableError::new_err(message)
            }
            // A driver without a GPU (or with every GPU hidden) says so at `cuInit`.
            KernelError::Driver { error, .. } if error.0 == CUresult::CUDA_ERROR_NO_DEVICE => {
                CudaUnavailableError::new_err(message)
            }
            KernelError::Driver { .. } => CudaError::new_err(message),
            KernelError::Compile { .. } => KernelCompileError::new_err(message),
            KernelError::DeviceMismatch { .. }
            | KernelError::ShapeMismatch { .. }
            | KernelError::OverlappingWrite { .. } => PyValueError::new_err(message),
        }
    }
}
