"""The Mojo agent of the cross-language matrix (tests/matrix/PROTOCOL.md).

Reads one request per line on stdin and answers one line on stdout (flushed):
`hello`, `produce DTYPE LAYOUT`, `consume DTYPE LAYOUT HANDLE`, `self DTYPE LAYOUT`, `quit`.
Producer memory is a Mojo `List` lent with `from_memory`, whose release callback counts; the
hand-over is `to_shared`, the consumer side `from_shared`, the in-process exchange
`export_versioned` -> `import_versioned`. Mojo has no complex `DType`: complex cases answer
`unsupported`. Every error becomes `fail ...`.

`host GUEST out|in DTYPE LAYOUT` (in-process pairs, PROTOCOL.md): the C and Rust guests are
libraries with the guest ABI (tests/matrix/agents/c/guest.h, found through
`DLBRIDGE_MATRIX_GUEST_<GUEST>`) called through `std.ffi` with `export_versioned` /
`import_versioned` pointers; the Python guest is the Python agent's module
(tests/matrix/agents/python/agent.py, `guest_*` functions) in the embedded CPython, exchanging
`to_dlpack` results and numpy arrays through `from_dlpack`.

Launch from the repository root: `mojo run -I bindings/mojo tests/matrix/agents/mojo/agent.mojo`
(with `DLBRIDGE_LIB` set, or `target/release/libdlbridge.so` built).
"""

from std.atomic import Atomic
from std.memory import OwnedPointer
from std.ffi import CStringSpan, OwnedDLHandle, RTLD, c_char, c_int, external_call
from std.os import getenv
from std.python import Python, PythonObject

from dlbridge import (
    ManagedTensorVersionedPtr,
    OpaquePtr,
    StridedTensor,
    TensorView,
    export_versioned,
    from_memory,
    from_dlpack,
    from_shared,
    import_versioned,
    to_dlpack,
    to_shared,
)


# ---------------------------------------------------------------------------------------------
# stdin, one line at a time (Mojo 1.2's `input()` loses buffered lines on a pipe)


struct LineReader(Movable):
    """Reads lines from file descriptor 0 with `read(2)`, keeping what follows the newline."""

    var _pending: List[UInt8]
    var _eof: Bool

    def __init__(out self):
        self._pending = List[UInt8]()
        self._eof = False

    def read_line(mut self) -> Optional[String]:
        """The next line without its `\\n` (and `\\r`), or None at end of input."""
        while True:
            for k in range(len(self._pending)):
                if self._pending[k] == UInt8(ord("\n")):
                    var line = self._take(k)
                    var rest = List[UInt8](self._pending[k + 1 :])
                    self._pending = rest^
                    return line^
            if self._eof:
                if len(self._pending) == 0:
                    return None
                var line = self._take(len(self._pending))
                self._pending = List[UInt8]()
                return line^
            var chunk = List[UInt8](length=4096, fill=0)
            var n = external_call["read", Int](
                c_int(0), chunk.unsafe_ptr(), UInt(len(chunk))
            )
            if n <= 0:
                # 0: end of input; < 0: an error (EINTR is not expected here): stop reading.
                self._eof = True
            else:
                self._pending.extend(Span(chunk)[:n])

    def _take(self, end: Int) -> String:
        var stop = end
        if stop > 0 and self._pending[stop - 1] == UInt8(ord("\r")):
            stop -= 1
        return String(unsafe_from_utf8=Span(self._pending)[:stop])


def respond(line: String):
    """Writes one response line (newlines inside it flattened) and flushes."""
    print(line.replace("\n", " ").replace("\r", " "), flush=True)


# ---------------------------------------------------------------------------------------------
# The release counter of the producer memory


def count_release(context: Optional[OpaquePtr]) abi("C"):
    """A `dlb_release_fn` that bumps the `Atomic[Int]` behind `context`."""
    _ = context.value().unsafe_bitcast[Atomic[Int]]()[].fetch_add(1)


# ---------------------------------------------------------------------------------------------
# Cases


@fieldwise_init
struct Layout(Copyable):
    """Where a case's elements live in the producer's buffer (strides in elements)."""

    var shape: List[Int]
    var strides: List[Int]
    var buffer_len: Int
    """Elements the producer allocates."""
    var offset: Int
    """Buffer index of element 0."""
    var read_only: Bool

    def size(self) -> Int:
        var n = 1
        for d in self.shape:
            n *= d
        return n

    def logical_index(self, i: Int) -> List[Int]:
        """The multi-index of row-major logical element `i`."""
        var idx = List[Int](length=len(self.shape), fill=0)
        var rest = i
        for k in reversed(range(len(self.shape))):
            idx[k] = rest % self.shape[k]
            rest //= self.shape[k]
        return idx^

    def buffer_index(self, idx: List[Int]) -> Int:
        var at = self.offset
        for k in range(len(idx)):
            at += idx[k] * self.strides[k]
        return at


def layout_of(name: String) raises -> Layout:
    if name == "c":
        return Layout([3, 4], [4, 1], 12, 0, False)
    if name == "f":
        return Layout([3, 4], [1, 3], 12, 0, False)
    if name == "strided":
        return Layout([3, 4], [16, 2], 48, 0, False)
    if name == "negative":
        return Layout([3, 4], [4, -1], 12, 3, False)
    if name == "zero_d":
        return Layout(List[Int](), List[Int](), 1, 0, False)
    if name == "empty":
        # One element allocated, so element 0's address is a real (never read) address.
        return Layout([0, 3], [3, 1], 1, 0, False)
    if name == "readonly":
        return Layout([3, 4], [4, 1], 12, 0, True)
    raise Error(t"unknown layout {repr(name)}")


def expected[dtype: DType](i: Int) -> Scalar[dtype]:
    """The case value of logical element `i` (PROTOCOL.md, Values)."""
    var v = (7 * i + 3) % 61
    comptime if dtype == DType.bool:
        return Scalar[DType.bool](v % 2 == 1).cast[dtype]()
    elif dtype.is_unsigned():
        return Scalar[dtype](v)
    elif dtype.is_integral():
        return Scalar[dtype](v - 30)
    else:
        return (Float64(v - 30) * 0.5).cast[dtype]()


def sentinel[dtype: DType](element0: Scalar[dtype]) -> Scalar[dtype]:
    comptime if dtype == DType.bool:
        return Scalar[DType.bool](not Bool(element0)).cast[dtype]()
    else:
        return Scalar[dtype](42)


def same[dtype: DType](a: Scalar[dtype], b: Scalar[dtype]) -> Bool:
    # Compared as float64: exact for every value of the cases, and it lowers for every dtype.
    return a.cast[DType.float64]() == b.cast[DType.float64]()


def element[T: StridedTensor](t: T, idx: List[Int]) raises -> Scalar[T.element_dtype]:
    if len(idx) == 0:
        return t[]
    if len(idx) == 2:
        return t[idx[0], idx[1]]
    raise Error(t"cases have 0 or 2 dimensions, not {len(idx)}")


def set_element[T: StridedTensor](mut t: T, idx: List[Int], value: Scalar[T.element_dtype]) raises:
    if len(idx) == 0:
        t[] = value
    elif len(idx) == 2:
        t[idx[0], idx[1]] = value
    else:
        raise Error(t"cases have 0 or 2 dimensions, not {len(idx)}")


def check_elements[T: StridedTensor](t: T, layout: Layout, what: StaticString) raises -> Int:
    """Checks every element of `t` against the formula; returns how many."""
    for i in range(layout.size()):
        var got = element(t, layout.logical_index(i))
        var want = expected[T.element_dtype](i)
        if not same(got, want):
            raise Error(t"{what} element {i} is {got}, expected {want}")
    return layout.size()


def check_shape[T: StridedTensor](t: T, layout: Layout, what: StaticString) raises:
    if t.shape() != layout.shape:
        raise Error(t"{what} shape is {t.shape()}, expected {layout.shape}")


def check_read_only[T: StridedTensor](t: T, want: Bool, what: StaticString) raises:
    if t.is_read_only() != want:
        raise Error(t"{what} read-only flag is {t.is_read_only()}, expected {want}")


struct Producer[dtype: DType](Movable):
    """The producer's memory (a Mojo `List`) filled with the case values, and its release count.

    Must outlive every tensor lent from it: the release callback writes `self.released`.
    """

    var data: List[Scalar[Self.dtype]]
    var released: OwnedPointer[Atomic[Int]]
    """On the heap: the release callback's context must not move with the struct."""
    var layout: Layout

    def __init__(out self, layout: Layout):
        self.data = List[Scalar[Self.dtype]](length=layout.buffer_len, fill=Scalar[Self.dtype](0))
        self.released = OwnedPointer(Atomic[Int](0))
        self.layout = layout.copy()
        for i in range(layout.size()):
            self.data[layout.buffer_index(layout.logical_index(i))] = expected[Self.dtype](i)

    def element0(mut self) -> Pointer[Scalar[Self.dtype], MutAnyOrigin]:
        var base = self.data.unsafe_ptr().unsafe_offset(self.layout.offset)
        return base.unsafe_origin_cast[MutAnyOrigin]()

    def context(mut self) -> OpaquePtr:
        return Pointer(to=self.released[]).unsafe_bitcast[NoneType]().unsafe_origin_cast[
            MutUntrackedOrigin
        ]()

    def count(self) -> Int:
        return self.released[].load()

    def lend(mut self) raises -> TensorView[Self.dtype]:
        """A view of the buffer whose release bumps `released`."""
        return from_memory(
            self.element0(),
            self.layout.shape,
            self.layout.strides,
            owner_ctx=self.context(),
            release=count_release,
            read_only=self.layout.read_only,
        )


def run_self[dtype: DType](layout_name: String) raises -> String:
    var layout = layout_of(layout_name)
    var producer = Producer[dtype](layout)
    var view = producer.lend()
    var managed = export_versioned(view)
    _ = view^
    if producer.count() != 0:
        raise Error(t"producer memory released {producer.count()} times before the import")
    var imported = import_versioned[dtype](managed)
    check_shape(imported, layout, "imported")
    check_read_only(imported, layout.read_only, "imported")
    var address = imported.description().data
    var producer_address = Int(producer.element0())
    if layout.size() > 0:
        if not address or Int(address.value()) != producer_address:
            var got = Int(address.value()) if address else 0
            raise Error(
                t"imported element 0 is at {hex(got)}, the producer's at {hex(producer_address)}"
            )
    elif address and Int(address.value()) != producer_address:
        raise Error(
            t"imported data is at {hex(Int(address.value()))}, the producer's at"
            t" {hex(producer_address)}"
        )
    var n = check_elements(imported, layout, "imported")
    if layout.size() > 0:
        var idx0 = layout.logical_index(0)
        var value = sentinel[dtype](expected[dtype](0))
        if layout.read_only:
            var refused = False
            try:
                set_element(imported, idx0, value)
            except:
                refused = True
            if not refused:
                raise Error("a write through the read-only import was not refused")
        else:
            set_element(imported, idx0, value)
            var seen = producer.element0()[]
            if not same(seen, value):
                raise Error(t"wrote {value} through the import, the producer reads {seen}")
    _ = imported^
    if producer.count() != 1:
        raise Error(t"producer memory released {producer.count()} times, expected once")
    _ = producer^
    return String(t"ok {n} zero-copy")


def run_produce[dtype: DType](layout_name: String) raises -> String:
    var layout = layout_of(layout_name)
    var producer = Producer[dtype](layout)
    var view = producer.lend()
    var handle = to_shared(view)
    _ = view^
    if producer.count() != 1:
        raise Error(
            t"producer memory released {producer.count()} times after to_shared, expected once"
            t" (handle {handle})"
        )
    _ = producer^
    return String(t"ok {handle}")


def run_consume[dtype: DType](layout_name: String, handle: String) raises -> String:
    var layout = layout_of(layout_name)
    var t = from_shared[dtype](handle, writable=not layout.read_only)
    check_shape(t, layout, "segment")
    if not t.is_copied():
        raise Error(t"segment {handle} is not flagged IS_COPIED")
    check_read_only(t, layout.read_only, "segment")
    var n = check_elements(t, layout, "segment")
    _ = t^
    return String(t"ok {n}")


# ---------------------------------------------------------------------------------------------
# host: another runtime in this process


comptime _CStr = Pointer[c_char, ImmUntrackedOrigin]


def _c_string(mut s: String) -> _CStr:
    """`s`'s bytes, NUL-terminated (valid while `s` lives unchanged: keep it alive after the
    call that reads them)."""
    return s.as_c_string_span().ptr().as_imm().unsafe_origin_cast[ImmUntrackedOrigin]()


struct Guest(Movable):
    """A guest library: the guest ABI of tests/matrix/agents/c/guest.h."""

    var name: String
    var _produce: def(_CStr, _CStr) thin abi("C") -> c_int
    var _produced: def() thin abi("C") -> Optional[ManagedTensorVersionedPtr]
    var _produced_element0: def() thin abi("C") -> Int
    var _check_written: def() thin abi("C") -> c_int
    var _check_released: def() thin abi("C") -> c_int
    var _consume: def(_CStr, _CStr, ManagedTensorVersionedPtr, Int) thin abi("C") -> c_int
    var _drop: def() thin abi("C") -> c_int
    var _message: def() thin abi("C") -> _CStr

    def __init__(out self, name: String, path: String) raises:
        # NODELETE: the function pointers stay valid for the life of the process.
        var lib = OwnedDLHandle(path, RTLD.NOW | RTLD.NODELETE)
        self.name = name
        self._produce = lib._get_function["matrix_guest_produce", type_of(self._produce)]()
        self._produced = lib._get_function["matrix_guest_produced", type_of(self._produced)]()
        self._produced_element0 = lib._get_function[
            "matrix_guest_produced_element0", type_of(self._produced_element0)
        ]()
        self._check_written = lib._get_function[
            "matrix_guest_check_written", type_of(self._check_written)
        ]()
        self._check_released = lib._get_function[
            "matrix_guest_check_released", type_of(self._check_released)
        ]()
        self._consume = lib._get_function["matrix_guest_consume", type_of(self._consume)]()
        self._drop = lib._get_function["matrix_guest_drop", type_of(self._drop)]()
        self._message = lib._get_function["matrix_guest_message", type_of(self._message)]()

    def result(self, status: c_int) raises -> String:
        """The payload of the last call's reply; raises `fail`/`unsupported` naming the guest."""
        var line = String(StringSlice(unsafe_from_utf8=CStringSpan(unsafe_from_ptr=self._message())))
        var space = line.find(" ")
        var reason = String(line[byte=space + 1 :]) if space >= 0 else String("")
        if status == 0:
            return reason^
        if status == 2:
            raise Error(t"unsupported {self.name}: {reason}")
        raise Error(t"{self.name}: {reason}")


struct Guests(Movable):
    """The guest libraries loaded so far, by runtime."""

    var loaded: Dict[String, Int]
    var libraries: List[Guest]

    def __init__(out self):
        self.loaded = Dict[String, Int]()
        self.libraries = List[Guest]()

    def index(mut self, name: String) raises -> Int:
        """The position in `libraries` of runtime `name`'s guest, loaded on first use."""
        if name not in self.loaded:
            var variable = String(t"DLBRIDGE_MATRIX_GUEST_{name.upper()}")
            var path = getenv(variable)
            if not path:
                raise Error(t"unsupported no guest library for {name} (${variable} is not set)")
            self.libraries.append(Guest(name, path))
            self.loaded[name] = len(self.libraries) - 1
        return self.loaded[name]


def check_sentinel_seen[dtype: DType](mut producer: Producer[dtype], who: String) raises:
    """The producer reads the sentinel in element 0 (cases with elements, not read-only) and
    its memory was not released."""
    if producer.layout.size() > 0 and not producer.layout.read_only:
        var want = sentinel[dtype](expected[dtype](0))
        var seen = producer.element0()[]
        if not same(seen, want):
            raise Error(t"{who} wrote the sentinel {want} through its import, the producer reads {seen}")
    if producer.count() != 0:
        raise Error(t"producer memory released {producer.count()} times while {who}'s import lives")


def check_import[
    dtype: DType
](mut imported: TensorView[dtype], layout: Layout, element0: Int, who: String) raises -> Int:
    """The consumer's checks of an in-process import; writes the sentinel. Returns N."""
    check_shape(imported, layout, "imported")
    check_read_only(imported, layout.read_only, "imported")
    if imported.is_copied():
        raise Error(t"the import from {who} is flagged IS_COPIED")
    var address = imported.description().data
    if layout.size() > 0 and (not address or Int(address.value()) != element0):
        var got = Int(address.value()) if address else 0
        raise Error(t"imported element 0 is at {hex(got)}, {who}'s at {hex(element0)}: not zero-copy")
    var n = check_elements(imported, layout, "imported")
    if layout.size() > 0:
        var idx0 = layout.logical_index(0)
        var value = sentinel[dtype](expected[dtype](0))
        if layout.read_only:
            var refused = False
            try:
                set_element(imported, idx0, value)
            except:
                refused = True
            if not refused:
                raise Error("a write through the read-only import was not refused")
        else:
            set_element(imported, idx0, value)
    return n


def host_library_out[
    dtype: DType
](g: Guest, dtype_name: String, layout_name: String) raises -> String:
    """Mojo produces (`export_versioned`), the guest library consumes."""
    var layout = layout_of(layout_name)
    var producer = Producer[dtype](layout)
    var view = producer.lend()
    var managed = export_versioned(view)
    _ = view^
    var d = dtype_name.copy()
    var l = layout_name.copy()
    var status = g._consume(_c_string(d), _c_string(l), managed, Int(producer.element0()))
    _ = d^
    _ = l^
    var answer = g.result(status)  # on failure the guest freed its import
    var problem = String("")
    try:
        check_sentinel_seen(producer, g.name)
    except e:
        problem = String(e)
    _ = g.result(g._drop())
    if problem:
        raise Error(problem)
    if producer.count() != 1:
        raise Error(t"producer memory released {producer.count()} times after {g.name} dropped its import, expected 1")
    _ = producer^
    return answer^


def host_library_in[
    dtype: DType
](g: Guest, dtype_name: String, layout_name: String) raises -> String:
    """The guest library produces, Mojo consumes (`import_versioned`)."""
    var layout = layout_of(layout_name)
    var d = dtype_name.copy()
    var l = layout_name.copy()
    var produced = g._produce(_c_string(d), _c_string(l))
    _ = d^
    _ = l^
    _ = g.result(produced)
    var n = 0
    var problem = String("")
    try:
        var managed = g._produced()
        if not managed:
            raise Error(t"{g.name} produced no export")
        var imported = import_versioned[dtype](managed.value())
        n = check_import(imported, layout, g._produced_element0(), g.name)
        _ = g.result(g._check_written())
        _ = imported^
    except e:
        problem = String(e)
    var released = g._check_released()
    if problem:
        raise Error(problem)
    _ = g.result(released)
    return String(t"{n} zero-copy")


def python_guest() raises -> PythonObject:
    """The Python agent's module (its `guest_*` functions), imported once."""
    var sys = Python.import_module("sys")
    var here = "tests/matrix/agents/python"
    if not Bool(sys.path.__contains__(here)):
        sys.path.insert(0, here)
    return Python.import_module("agent")


def host_python_out[dtype: DType](dtype_name: String, layout_name: String) raises -> String:
    """Mojo produces and hands a `to_dlpack` tensor to Python, which imports it."""
    var layout = layout_of(layout_name)
    var guest = python_guest()
    var producer = Producer[dtype](layout)
    var view = producer.lend()
    var obj = to_dlpack(view)
    _ = view^
    var answer = String("")
    var problem = String("")
    try:
        answer = String(guest.guest_consume(dtype_name, layout_name, obj, Int(producer.element0())))
    except e:
        problem = String(t"python: {e}")
    _ = obj^
    if not problem:
        try:
            check_sentinel_seen(producer, "python")
        except e:
            problem = String(e)
        try:
            _ = guest.guest_drop()
        except e:
            if not problem:
                problem = String(t"python: {e}")
    if problem:
        _ = Python.import_module("gc").collect()  # whatever Python still holds goes now
        raise Error(problem)
    if producer.count() != 1:
        raise Error(t"producer memory released {producer.count()} times after python dropped its import, expected 1")
    _ = producer^
    return answer^


def host_python_in[dtype: DType](dtype_name: String, layout_name: String) raises -> String:
    """Python produces numpy memory; Mojo imports it with `from_dlpack`."""
    var layout = layout_of(layout_name)
    var guest = python_guest()
    var n = 0
    var problem = String("")
    var source: PythonObject
    try:
        source = guest.guest_produce(dtype_name, layout_name)
    except e:
        raise Error(t"python: {e}")
    try:
        var element0 = Int(py=guest.guest_produced_element0())
        var imported = from_dlpack[dtype](source)
        _ = source^
        n = check_import(imported, layout, element0, "python")
        try:
            _ = guest.guest_check_written()
        except e:
            raise Error(t"python: {e}")
        _ = imported^
    except e:
        problem = String(e)
    try:
        _ = guest.guest_check_released()
    except e:
        if not problem:
            problem = String(t"python: {e}")
    if problem:
        raise Error(problem)
    return String(t"{n} zero-copy")


def run_host[
    dtype: DType
](mut guests: Guests, guest: String, direction: String, dtype_name: String, layout_name: String) raises -> String:
    if direction != "out" and direction != "in":
        raise Error(t"unknown direction {repr(direction)} (expected out or in)")
    if guest == "python":
        if direction == "out":
            return host_python_out[dtype](dtype_name, layout_name)
        return host_python_in[dtype](dtype_name, layout_name)
    var at = guests.index(guest)
    if direction == "out":
        return host_library_out[dtype](guests.libraries[at], dtype_name, layout_name)
    return host_library_in[dtype](guests.libraries[at], dtype_name, layout_name)


def run_case[dtype: DType](mut guests: Guests, words: List[String]) raises -> String:
    var op = words[0]
    if op == "host":
        return "ok " + run_host[dtype](guests, words[1], words[2], words[3], words[4])
    if op == "self":
        return run_self[dtype](words[2])
    if op == "produce":
        return run_produce[dtype](words[2])
    return run_consume[dtype](words[2], words[3])


def dispatch(mut guests: Guests, words: List[String]) raises -> String:
    var name = words[3] if words[0] == "host" else words[1]
    if name == "complex64" or name == "complex128":
        return String(t"unsupported Mojo has no complex dtype ({name})")
    if name == "bool":
        return run_case[DType.bool](guests, words)
    if name == "int8":
        return run_case[DType.int8](guests, words)
    if name == "int16":
        return run_case[DType.int16](guests, words)
    if name == "int32":
        return run_case[DType.int32](guests, words)
    if name == "int64":
        return run_case[DType.int64](guests, words)
    if name == "uint8":
        return run_case[DType.uint8](guests, words)
    if name == "uint16":
        return run_case[DType.uint16](guests, words)
    if name == "uint32":
        return run_case[DType.uint32](guests, words)
    if name == "uint64":
        return run_case[DType.uint64](guests, words)
    if name == "float16":
        return run_case[DType.float16](guests, words)
    if name == "bfloat16":
        return run_case[DType.bfloat16](guests, words)
    if name == "float32":
        return run_case[DType.float32](guests, words)
    if name == "float64":
        return run_case[DType.float64](guests, words)
    return String(t"fail unknown dtype {repr(name)}")


def handle_request(mut guests: Guests, line: String) -> String:
    var words = List[String]()
    for word in line.split(" "):
        if word:
            words.append(String(word))
    if len(words) == 0:
        return "fail empty request"
    var op = words[0]
    if op == "hello":
        return "ok mojo"
    var arity = 4 if op == "consume" else (5 if op == "host" else 3)
    if op != "self" and op != "produce" and op != "consume" and op != "host":
        return String(t"fail unknown request {repr(line)}")
    if len(words) != arity:
        return String(t"fail {op} takes {arity - 1} arguments, got {len(words) - 1}: {repr(line)}")
    var layout_at = 4 if op == "host" else 2
    try:
        _ = layout_of(words[layout_at])
        return dispatch(guests, words)
    except e:
        var message = String(e)
        if message.startswith("unsupported "):
            return message^
        return String(t"fail {op} {words[1]} {words[2]}: {message}")


def main():
    var reader = LineReader()
    var guests = Guests()
    while True:
        var line = reader.read_line()
        if not line:
            break
        var request = line.value()
        if request.strip() == "quit":
            break
        respond(handle_request(guests, request))
