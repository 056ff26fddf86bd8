//! The kernels: their CUDA C++ source, compiled by NVRTC for each device at its first launch and
//! kept for the life of the process, and their launches on a stream the caller names.

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::CUstream;
use cudarc::driver::{result, CudaContext, CudaFunction, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use dlbridge_pyo3::CudaStream;

use crate::current_context::CurrentContext;
use crate::error::KernelError;

/// The kernels' source. Each walks its elements with a grid-stride loop, so any grid covers any
/// length; `add_f32_2d` addresses both tensors through their strides (in elements, negative
/// ones included), from the address of element 0.
const SOURCE: &str = r#"
extern "C" __global__ void scale_f32(float* x, float factor, unsigned long long n) {
    unsigned long long step = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n; i += step) {
        x[i] *= factor;
    }
}

extern "C" __global__ void add_f32_2d(float* x, long long x_row, long long x_col,
                                      const float* y, long long y_row, long long y_col,
                                      long long rows, long long cols) {
    long long n = rows * cols;
    long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        long long r = i / cols, c = i % cols;
        x[r * x_row + c * x_col] += y[r * y_row + c * y_col];
    }
}
"#;

/// Threads per block.
const BLOCK: u32 = 256;

/// The most blocks a launch asks for; the grid-stride loops cover longer tensors.
const MAX_BLOCKS: u64 = 1 << 16;

/// The kernels compiled and loaded on one device, in its primary context (the one torch, cupy
/// and jax use).
pub struct DeviceKernels {
    ordinal: i32,
    context: Arc<CudaContext>,
    scale: CudaFunction,
    add_2d: CudaFunction,
}

/// The devices whose kernels are loaded. Held while one is loaded, so that two threads never
/// compile for the same device.
static LOADED: Mutex<Vec<Arc<DeviceKernels>>> = Mutex::new(Vec::new());

/// The kernels on device `ordinal`, compiled and loaded at its first use.
pub fn kernels_on(ordinal: i32) -> Result<Arc<DeviceKernels>, KernelError> {
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kernels) = loaded.iter().find(|k| k.ordinal == ordinal) {
        return Ok(Arc::clone(kernels));
    }
    let kernels = Arc::new(DeviceKernels::load(ordinal)?);
    loaded.push(Arc::clone(&kernels));
    Ok(kernels)
}

/// What becomes of a failed driver call `call` on device `ordinal`.
fn driver(call: &'static str, ordinal: i32) -> impl FnOnce(DriverError) -> KernelError {
    move |error| KernelError::Driver {
        call,
        ordinal,
        error,
    }
}

/// NVRTC's error, with its options and log when compiling failed.
fn describe(err: CompileError) -> String {
    match err {
        CompileError::CompileError {
            nvrtc,
            options,
            log,
        } => format!(
            "{:?} with options {options:?}:\n{}",
            nvrtc.0,
            log.to_string_lossy()
        ),
        other => format!("{other:?}"),
    }
}

impl DeviceKernels {
    /// Loads the driver (the first time), retains the device's primary context, compiles the
    /// source for the device's compute capability and loads it. The thread's current context is
    /// the same after as before.
    fn load(ordinal: i32) -> Result<Self, KernelError> {
        // SAFETY: only opens and closes the libraries cudarc would load; nothing is called.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(KernelError::NoDriver);
        }
        result::init().map_err(driver("cuInit", ordinal))?;
        let count = CudaContext::device_count().map_err(driver("cuDeviceGetCount", ordinal))?;
        let device = usize::try_from(ordinal)
            .ok()
            .filter(|_| ordinal < count)
            .ok_or(KernelError::NoSuchDevice { ordinal, count })?;
        let _restore = CurrentContext::save().map_err(driver("cuCtxGetCurrent", ordinal))?;
        let context =
            CudaContext::new(device).map_err(driver("cuDevicePrimaryCtxRetain", ordinal))?;
        let (major, minor) = context
            .compute_capability()
            .map_err(driver("cuDeviceGetAttribute", ordinal))?;
        let arch = format!("compute_{major}{minor}");
        // SAFETY: as above, for NVRTC.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(KernelError::NoNvrtc);
        }
        let options = CompileOptions {
            options: vec![format!("--gpu-architecture={arch}")],
            ..CompileOptions::default()
        };
        let ptx = compile_ptx_with_opts(SOURCE, options).map_err(|err| KernelError::Compile {
            arch,
            detail: describe(err),
        })?;
        let module = context
            .load_module(ptx)
            .map_err(driver("cuModuleLoadData", ordinal))?;
        let function = |name| {
            module
                .load_function(name)
                .map_err(driver("cuModuleGetFunction", ordinal))
        };
        Ok(DeviceKernels {
            ordinal,
            scale: function("scale_f32")?,
            add_2d: function("add_f32_2d")?,
            context,
        })
    }

    /// Launches `x[i] *= factor` for `i < n` on `stream`, and returns without waiting for it.
    ///
    /// # Safety
    ///
    /// `x` is the address of `n` float32 elements in this device's memory that nothing else
    /// reads or writes until the kernel has run, and they stay allocated until then; `stream`
    /// is a stream of this device's primary context (or one of the default streams).
    pub unsafe fn scale(
        &self,
        stream: CudaStream,
        x: u64,
        factor: f32,
        n: u64,
    ) -> Result<(), KernelError> {
        let _restore = CurrentContext::save().map_err(driver("cuCtxGetCurrent", self.ordinal))?;
        // SAFETY: the caller vouches that `stream` belongs to this context and outlives the
        // launch; the wrapper never destroys it.
        let stream = unsafe {
            self.context
                .wrap_borrowed_stream(stream.as_ptr() as CUstream)
        };
        let mut launch = stream.launch_builder(&self.scale);
        launch.arg(&x).arg(&factor).arg(&n);
        // SAFETY: the arguments match `scale_f32(float*, float, unsigned long long)` in order
        // and size; the caller vouches for the memory.
        unsafe { launch.launch(grid(n)) }.map_err(driver("cuLaunchKernel", self.ordinal))?;
        Ok(())
    }

    /// Launches `x[r, c] += y[r, c]` over a `rows` × `cols` grid on `stream`, each tensor
    /// addressed through its strides (in elements), and returns without waiting for it.
    ///
    /// # Safety
    ///
    /// `x` and `y` are the addresses of element 0 of float32 tensors of that shape with those
    /// strides in this device's memory, whose elements stay allocated until the kernel has
    /// run; `x`'s elements are distinct and nothing else reads or writes them meanwhile, and
    /// nothing writes `y`'s; `stream` is as for [`scale`](Self::scale).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn add_2d(
        &self,
        stream: CudaStream,
        x: u64,
        x_strides: [i64; 2],
        y: u64,
        y_strides: [i64; 2],
        rows: i64,
        cols: i64,
    ) -> Result<(), KernelError> {
        let _restore = CurrentContext::save().map_err(driver("cuCtxGetCurrent", self.ordinal))?;
        // SAFETY: as in `scale`.
        let stream = unsafe {
            self.context
                .wrap_borrowed_stream(stream.as_ptr() as CUstream)
        };
        let mut launch = stream.launch_builder(&self.add_2d);
        launch
            .arg(&x)
            .arg(&x_strides[0])
            .arg(&x_strides[1])
            .arg(&y)
            .arg(&y_strides[0])
            .arg(&y_strides[1])
            .arg(&rows)
            .arg(&cols);
        let n = rows.unsigned_abs() * cols.unsigned_abs();
        // SAFETY: the arguments match `add_f32_2d(float*, long long, long long, const float*,
        // long long, long long, long long, long long)` in order and size; the caller vouches
        // for the memory.
        unsafe { launch.launch(grid(n)) }.map_err(driver("cuLaunchKernel", self.ordinal))?;
        Ok(())
    }
}

/// A grid of `BLOCK`-thread blocks for `n` elements (`n` > 0), at most `MAX_BLOCKS` of them.
fn grid(n: u64) -> LaunchConfig {
    let blocks = n.div_ceil(u64::from(BLOCK)).min(MAX_BLOCKS);
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}
