//! Calling Julia: arguments in, results out, exceptions as errors.

use std::borrow::Cow;
use std::ffi::c_void;
use std::ptr::NonNull;

use dlbridge::export::to_versioned;
use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{Flags, ManagedTensor, Tensor};
use jlrs::error::JlrsResult;
use jlrs::global::Global;
use jlrs::prelude::{Module, Value};
use jlrs::traits::Frame;

use crate::error::{Error, Result};
use crate::runtime::Julia;

/// At most this many arguments per call (tensor arguments are marked by a 64-bit mask).
pub const MAX_ARGUMENTS: usize = 64;

/// An argument of [`Julia::call`].
#[derive(Debug)]
pub enum Argument<'a> {
    /// A tensor, seen in Julia with its dimensions reversed whatever its memory layout
    /// (`x[k, j, i] == T[i, j, k]`): an `Array` for row-major data, a `PermutedDimsArray` over
    /// DLBridge's column-major `Array` for column-major data, a `DLBridge.StridedView` for other
    /// strides. Its memory is shared, not copied; the tensor is dropped (its owner released)
    /// once Julia no longer references the array. Read-only tensors are refused (Julia arrays
    /// are always writable). Array results of the call come back reversed too.
    Tensor(Tensor),
    /// A tensor seen in Julia in its own dimension order: `DLBridge.wrap(t; order = :permuted)`,
    /// a `PermutedDimsArray` over the same memory (a row-major 2×3 tensor is a 2×3 array whose
    /// `x[i, j]` is the tensor's element `[i, j]`). Shared, kept alive and refused as
    /// [`Argument::Tensor`] is. Array results of a call on permuted arguments come back in
    /// Julia's order (an m×n array is an m×n tensor); a call takes either permuted tensors or
    /// plain ones, not both.
    Permuted(Tensor),
    /// A `Float64`.
    Float(f64),
    /// An `Int64`.
    Int(i64),
    /// A `Bool`.
    Bool(bool),
    /// A `String`.
    Str(Cow<'a, str>),
}

impl From<Tensor> for Argument<'_> {
    fn from(t: Tensor) -> Self {
        Argument::Tensor(t)
    }
}

impl From<ManagedTensor> for Argument<'_> {
    fn from(t: ManagedTensor) -> Self {
        Argument::Tensor(Tensor::from_managed(t))
    }
}

impl From<f64> for Argument<'_> {
    fn from(x: f64) -> Self {
        Argument::Float(x)
    }
}

impl From<i64> for Argument<'_> {
    fn from(x: i64) -> Self {
        Argument::Int(x)
    }
}

impl From<bool> for Argument<'_> {
    fn from(x: bool) -> Self {
        Argument::Bool(x)
    }
}

impl<'a> From<&'a str> for Argument<'a> {
    fn from(s: &'a str) -> Self {
        Argument::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Argument<'_> {
    fn from(s: String) -> Self {
        Argument::Str(Cow::Owned(s))
    }
}

/// A value Julia returned, converted for the host.
#[derive(Debug)]
pub enum Output {
    /// An array, shared through `DLBridge.share`, oriented as the call's tensor arguments were:
    /// dimensions reversed (a Julia `m×n` matrix is an `n×m` tensor, row-major for an `Array`),
    /// or, for a call on [`Argument::Permuted`] tensors, as is. Same memory, no copy; Julia keeps
    /// the array alive until the tensor is dropped (on any thread), and a `Vector` shared so can
    /// no longer be resized in Julia.
    Tensor(Tensor),
    /// A `Float64` (also `Float32` and `Float16`).
    Float(f64),
    /// An `Int64` (also the smaller integer types).
    Int(i64),
    /// A `UInt64`.
    UInt(u64),
    /// A complex number (`ComplexF64`, `ComplexF32` or `ComplexF16`).
    Complex {
        /// The real part.
        re: f64,
        /// The imaginary part.
        im: f64,
    },
    /// A `Bool`.
    Bool(bool),
    /// A string.
    String(String),
    /// `nothing`.
    Nothing,
    /// A tuple, converted element by element.
    Tuple(Vec<Output>),
    /// Any other value, by its `summary` (e.g. `"typeof(f)"` for a function).
    Other(String),
}

/// Managed tensors exported for a call, released here unless Julia took them over.
struct Exports(Vec<NonNull<DLManagedTensorVersioned>>);

impl Drop for Exports {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            // SAFETY: each pointer came from `to_versioned` and was not handed to Julia (the
            // vector is emptied before the call that transfers them), so its deleter runs once.
            unsafe {
                let managed = p.as_ptr();
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        }
    }
}

impl Julia {
    /// Evaluates `code` (any number of top-level expressions) in `Main`; returns the value of
    /// the last one.
    ///
    /// # Errors
    /// [`Error::Julia`] with Julia's message when parsing or evaluation throws.
    pub fn eval(&self, code: &str) -> Result<Output> {
        self.with_runtime(|runtime| {
            runtime.dynamic_frame(|global, frame| {
                let glue = embedded_module(global)?;
                let code = Value::new(frame, code)?;
                let result = glue.function("eval_code")?.call1(frame, code)?;
                finish(global, frame, glue, result)
            })
        })??
    }

    /// Calls the Julia function `function` with `args`; returns its result. A name such as
    /// `"scale!"` or `"Base.sum"` is looked up in `Main` on every call (a rebound name is
    /// followed); any other expression, such as `"x -> 2x"`, is evaluated once and remembered.
    ///
    /// # Errors
    /// [`Error::Julia`] with Julia's message when the call throws (also when a tensor argument
    /// is refused, such as a read-only one); [`Error::Argument`] for more than
    /// [`MAX_ARGUMENTS`] arguments, or permuted and plain tensors in one call;
    /// [`Error::Embedding`] for a string with a NUL byte.
    pub fn call<'a>(
        &self,
        function: &str,
        args: impl IntoIterator<Item = Argument<'a>>,
    ) -> Result<Output> {
        let args: Vec<Argument<'a>> = args.into_iter().collect();
        if args.len() > MAX_ARGUMENTS {
            return Err(Error::Argument(format!(
                "{} arguments given, at most {MAX_ARGUMENTS} are supported",
                args.len()
            )));
        }
        let permuted = args
            .iter()
            .filter(|a| matches!(a, Argument::Permuted(_)))
            .count();
        let plain = args
            .iter()
            .filter(|a| matches!(a, Argument::Tensor(_)))
            .count();
        if permuted > 0 && plain > 0 {
            return Err(Error::Argument(format!(
                "{permuted} permuted and {plain} plain tensor arguments in one call: results are \
                 oriented as the arguments are, so a call takes one kind only"
            )));
        }
        let mut exports = Exports(Vec::new());
        // Bit i of `mask` marks argument i as a tensor, bit i of `permuted` as a permuted one.
        let (mut mask, mut permuted) = (0u64, 0u64);
        let mut scalars = Vec::with_capacity(args.len());
        for (i, arg) in args.into_iter().enumerate() {
            match arg {
                Argument::Tensor(t) => {
                    mask |= 1 << i;
                    exports.0.push(to_versioned(t, Flags::empty()));
                }
                Argument::Permuted(t) => {
                    mask |= 1 << i;
                    permuted |= 1 << i;
                    exports.0.push(to_versioned(t, Flags::empty()));
                }
                other => scalars.push(other),
            }
        }
        self.with_runtime(|runtime| {
            runtime.dynamic_frame(|global, frame| {
                let glue = embedded_module(global)?;
                let mut values = Vec::with_capacity(scalars.len() + exports.0.len() + 3);
                values.push(Value::new(frame, function)?);
                values.push(Value::new(frame, mask)?);
                values.push(Value::new(frame, permuted)?);
                let (mut tensors, mut scalars) = (exports.0.iter(), scalars.iter());
                for i in 0..(exports.0.len() + scalars.len()) {
                    let value = if mask & (1 << i) != 0 {
                        let p = tensors.next().expect("one export per marked argument");
                        Value::new(frame, p.as_ptr().cast::<c_void>())?
                    } else {
                        match scalars.next().expect("one scalar per unmarked argument") {
                            Argument::Float(x) => Value::new(frame, *x)?,
                            Argument::Int(x) => Value::new(frame, *x)?,
                            Argument::Bool(x) => Value::new(frame, *x)?,
                            Argument::Str(s) => Value::new(frame, s.as_ref())?,
                            Argument::Tensor(_) | Argument::Permuted(_) => {
                                unreachable!("tensors are marked")
                            }
                        }
                    };
                    values.push(value);
                }
                let call = glue.function("call")?;
                // From here on Julia owns the exported tensors, whatever the call does: the embedded
                // module imports every marked pointer before anything can throw.
                exports.0.clear();
                let result = call.call(frame, &mut values)?;
                finish(global, frame, glue, result)
            })
        })??
    }
}

/// The embedded module (`Main.DLBridgeEmbedded`).
fn embedded_module(global: Global<'_>) -> JlrsResult<Module<'_>> {
    Module::main(global).submodule("DLBridgeEmbedded")
}

/// Converts a call's result, or its exception, for the host.
fn finish<'f, F: Frame<'f>>(
    global: Global<'_>,
    frame: &mut F,
    glue: Module<'_>,
    result: Result<Value<'_, '_>, Value<'_, '_>>,
) -> JlrsResult<Result<Output>> {
    match result {
        Ok(value) => to_output(global, frame, glue, value),
        Err(exception) if exception.isa(glue.global("HostExit")?) => {
            let code = exception.get_nth_field(frame, 0)?.cast::<i32>()?;
            Ok(Err(Error::Exit(code)))
        }
        Err(exception) => {
            let kind = exception.type_name().to_owned();
            let message = exception_message(global, frame, exception)?;
            Ok(Err(Error::Julia { kind, message }))
        }
    }
}

/// Converts what the embedded module's `to_host` returned.
fn to_output<'f, F: Frame<'f>>(
    global: Global<'_>,
    frame: &mut F,
    glue: Module<'_>,
    value: Value<'_, '_>,
) -> JlrsResult<Result<Output>> {
    if value.is::<*mut c_void>() {
        let p = value
            .cast::<*mut c_void>()?
            .cast::<DLManagedTensorVersioned>();
        // SAFETY: `to_host` returns a `Ptr{Cvoid}` only for a managed tensor DLBridge.jl just
        // exported for the host, which owns it from here (the import runs its deleter on failure).
        let managed = unsafe { ManagedTensor::from_versioned(p) };
        return Ok(managed
            .map(|m| Output::Tensor(Tensor::from_managed(m)))
            .map_err(Error::from));
    }
    if value.is::<f64>() {
        return Ok(Ok(Output::Float(value.cast::<f64>()?)));
    }
    if value.is::<i64>() {
        return Ok(Ok(Output::Int(value.cast::<i64>()?)));
    }
    if value.is::<u64>() {
        return Ok(Ok(Output::UInt(value.cast::<u64>()?)));
    }
    if value.is::<bool>() {
        return Ok(Ok(Output::Bool(value.cast::<bool>()?)));
    }
    if value.is::<String>() {
        return Ok(Ok(Output::String(value.cast::<String>()?)));
    }
    if value.is_nothing() {
        return Ok(Ok(Output::Nothing));
    }
    if value.isa(glue.global("Results")?) {
        let items = value.get_nth_field(frame, 0)?;
        let length = Module::base(global)
            .function("length")?
            .call1(frame, items)?
            .map_err(|_| jlrs::error::JlrsError::NotAnArray)?
            .cast::<i64>()?;
        let getindex = Module::base(global).function("getindex")?;
        let mut outputs = Vec::with_capacity(length as usize);
        let mut failure = None;
        for i in 1..=length {
            // Each element in a frame of its own, so that a tuple of any length fits the stack.
            let converted = frame.dynamic_frame(|nested| {
                let index = Value::new(&mut *nested, i)?;
                let item = getindex
                    .call2(&mut *nested, items, index)?
                    .map_err(|_| jlrs::error::JlrsError::NotAnArray)?;
                to_output(global, nested, glue, item)
            });
            // Every element is converted, so that each exported tensor is owned (and released).
            match converted.map_err(Error::from).and_then(|c| c) {
                Ok(output) => outputs.push(output),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        return Ok(match failure {
            Some(e) => Err(e),
            None => Ok(Output::Tuple(outputs)),
        });
    }
    if value.isa(glue.global("ComplexResult")?) {
        let re = value.get_nth_field(frame, 0)?.cast::<f64>()?;
        let im = value.get_nth_field(frame, 1)?.cast::<f64>()?;
        return Ok(Ok(Output::Complex { re, im }));
    }
    if value.isa(glue.global("Unconvertible")?) {
        let summary = value.get_nth_field(frame, 0)?.cast::<String>()?;
        return Ok(Ok(Output::Other(summary)));
    }
    Ok(Ok(Output::Other(value.type_name().to_owned())))
}

/// `sprint(showerror, exception)`: the text Julia shows for an exception.
pub(crate) fn exception_message<'f, F: Frame<'f>>(
    global: Global<'_>,
    frame: &mut F,
    exception: Value<'_, '_>,
) -> JlrsResult<String> {
    let base = Module::base(global);
    let showerror = base.function("showerror")?;
    match base
        .function("sprint")?
        .call2(frame, showerror, exception)?
    {
        Ok(text) => text.cast::<String>(),
        Err(_) => Ok(format!(
            "a {} (its message could not be shown)",
            exception.type_name()
        )),
    }
}
