//! Errors of tensor arguments that name the parameter: `argument 'x': expected …`.
//!
//! A `FromPyObject` conversion is not told which parameter it converts. pyo3 tells the error
//! instead: when extracting a `#[pyfunction]` argument fails, it calls the exception's
//! `add_note("while processing 'x'")` (Python 3.11+). An argument's `TypeError`, `ValueError`,
//! `BufferError` or `MemoryError` (ours, or a producer's `__dlpack__` refusing, as torch refuses
//! sparse tensors with a `BufferError`) is therefore raised as a subclass of exactly that class
//! (so `except ValueError` catches it as before), with the same arguments, cause and traceback,
//! whose `add_note` takes that note as the parameter's name and puts it at the head of the
//! message. Exceptions of other classes (a producer's `RuntimeError`, subclasses of those four)
//! pass through unchanged, with pyo3's note.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

/// The exception classes and the converter, defined once per process.
const SOURCE: &std::ffi::CStr = cr#"
_NOTE = "while processing '"


class _NamesTheArgument:
    """Takes pyo3's note naming the parameter being extracted into the message."""

    def add_note(self, note):
        if (
            "_argument" not in self.__dict__
            and isinstance(note, str)
            and note.startswith(_NOTE)
            and note.endswith("'")
            and len(self.args) == 1
            and isinstance(self.args[0], str)
        ):
            self._argument = note[len(_NOTE) : -1]
            self.args = (f"argument '{self._argument}': {self.args[0]}",)
        else:
            super().add_note(note)


class ArgumentTypeError(_NamesTheArgument, TypeError):
    """A TypeError of a tensor argument, naming the parameter."""


class ArgumentValueError(_NamesTheArgument, ValueError):
    """A ValueError of a tensor argument, naming the parameter."""


class ArgumentBufferError(_NamesTheArgument, BufferError):
    """A BufferError of a tensor argument, naming the parameter."""


class ArgumentMemoryError(_NamesTheArgument, MemoryError):
    """A MemoryError of a tensor argument, naming the parameter."""


_NAMED = {
    TypeError: ArgumentTypeError,
    ValueError: ArgumentValueError,
    BufferError: ArgumentBufferError,
    MemoryError: ArgumentMemoryError,
}


def named(exc):
    cls = _NAMED.get(type(exc))
    if cls is None:
        return exc
    new = cls(*exc.args).with_traceback(exc.__traceback__)
    new.__cause__ = exc.__cause__
    new.__context__ = exc.__context__
    new.__suppress_context__ = exc.__suppress_context__
    return new
"#;

/// `named(exc)` of [`SOURCE`].
fn converter(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static NAMED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    NAMED
        .get_or_try_init(py, || {
            let globals = PyDict::new(py);
            globals.set_item("__name__", "dlbridge_pyo3")?;
            py.run(SOURCE, Some(&globals), None)?;
            Ok::<_, PyErr>(globals.as_any().get_item("named")?.unbind())
        })
        .map(|named| named.bind(py))
}

/// `err` as the exception of an argument's extraction: of our own classes, a subclass that
/// names the parameter when pyo3 reports it (see the module docs); any other exception as it is.
#[cold]
pub(crate) fn argument_error(py: Python<'_>, err: PyErr) -> PyErr {
    let value = err.into_value(py);
    match converter(py).and_then(|named| named.call1((value.clone_ref(py),))) {
        Ok(named) => PyErr::from_value(named),
        Err(_) => PyErr::from_value(value.into_bound(py).into_any()),
    }
}
