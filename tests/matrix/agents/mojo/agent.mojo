"""The Mojo agent of the cross-language matrix (tests/matrix/PROTOCOL.md).

Reads one request per line on stdin and answers one line on stdout (flushed):
`hello`, `produce DTYPE LAYOUT`, `consume DTYPE LAYOUT HANDLE`, `self DTYPE LAYOUT`, `quit`.
Producer memory is a Mojo `List` lent with `from_memory`, whose release callback counts; the
hand-over is `to_shared`, the consumer side `from_shared`, the in-process exchange
`export_versioned` -> `import_versioned`. Mojo has no complex `DType`: complex cases answer
`unsupported`. Every error becomes `fail ...`.

Launch from the repository root: `mojo run -I bindings/mojo tests/matrix/agents/mojo/agent.mojo`
(with `DLBRIDGE_LIB` set, or `target/release/libdlbridge.so` built).
"""

from std.atomic import Atomic
from std.ffi import c_int, external_call

from dlbridge import (
    OpaquePtr,
    StridedTensor,
    TensorView,
    export_versioned,
    from_memory,
    from_shared,
    import_versioned,
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
    var released: Atomic[Int]
    var layout: Layout

    def __init__(out self, layout: Layout):
        self.data = List[Scalar[Self.dtype]](length=layout.buffer_len, fill=Scalar[Self.dtype](0))
        self.released = Atomic[Int](0)
        self.layout = layout.copy()
        for i in range(layout.size()):
            self.data[layout.buffer_index(layout.logical_index(i))] = expected[Self.dtype](i)

    def element0(mut self) -> Pointer[Scalar[Self.dtype], MutAnyOrigin]:
        var base = self.data.unsafe_ptr().unsafe_offset(self.layout.offset)
        return base.unsafe_origin_cast[MutAnyOrigin]()

    def context(mut self) -> OpaquePtr:
        return Pointer(to=self.released).unsafe_bitcast[NoneType]().unsafe_origin_cast[
            MutUntrackedOrigin
        ]()

    def count(self) -> Int:
        return self.released.load()

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


def run_case[dtype: DType](words: List[String]) raises -> String:
    var op = words[0]
    if op == "self":
        return run_self[dtype](words[2])
    if op == "produce":
        return run_produce[dtype](words[2])
    return run_consume[dtype](words[2], words[3])


def dispatch(words: List[String]) raises -> String:
    var name = words[1]
    if name == "complex64" or name == "complex128":
        return String(t"unsupported Mojo has no complex dtype ({name})")
    if name == "bool":
        return run_case[DType.bool](words)
    if name == "int8":
        return run_case[DType.int8](words)
    if name == "int16":
        return run_case[DType.int16](words)
    if name == "int32":
        return run_case[DType.int32](words)
    if name == "int64":
        return run_case[DType.int64](words)
    if name == "uint8":
        return run_case[DType.uint8](words)
    if name == "uint16":
        return run_case[DType.uint16](words)
    if name == "uint32":
        return run_case[DType.uint32](words)
    if name == "uint64":
        return run_case[DType.uint64](words)
    if name == "float16":
        return run_case[DType.float16](words)
    if name == "bfloat16":
        return run_case[DType.bfloat16](words)
    if name == "float32":
        return run_case[DType.float32](words)
    if name == "float64":
        return run_case[DType.float64](words)
    return String(t"fail unknown dtype {repr(name)}")


def handle_request(line: String) -> String:
    var words = List[String]()
    for word in line.split(" "):
        if word:
            words.append(String(word))
    if len(words) == 0:
        return "fail empty request"
    var op = words[0]
    if op == "hello":
        return "ok mojo"
    var arity = 4 if op == "consume" else 3
    if op != "self" and op != "produce" and op != "consume":
        return String(t"fail unknown request {repr(line)}")
    if len(words) != arity:
        return String(t"fail {op} takes {arity - 1} arguments, got {len(words) - 1}: {repr(line)}")
    try:
        _ = layout_of(words[2])
        return dispatch(words)
    except e:
        return String(t"fail {op} {words[1]} {words[2]}: {e}")


def main():
    var reader = LineReader()
    while True:
        var line = reader.read_line()
        if not line:
            break
        var request = line.value()
        if request.strip() == "quit":
            break
        respond(handle_request(request))
