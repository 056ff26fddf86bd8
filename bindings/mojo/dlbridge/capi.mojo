"""The C ABI of libdlbridge (`crates/dlbridge-capi/include/dlbridge.h`).

Where the library is, the C types this package passes, one function pointer per C function it
calls (resolved once per process), and the one path from status codes to `Error`s.

`dlb_dtype` and `dlb_device` are small structs passed by value; they travel here as the integers
the header documents (`code | bits << 8 | lanes << 16` and `type | id << 32`), which is exact on
little-endian targets.
"""

from std.ffi import CStringSpan, OwnedDLHandle, RTLD, _Global, c_char, c_int
from std.os import getenv
from std.os.path import dirname, join
from std.reflection import source_location
from std.sys.info import Endian, size_of

comptime FLAG_READ_ONLY: UInt64 = 1
"""DLB_FLAG_READ_ONLY: the memory must not be written."""
comptime FLAG_IS_COPIED: UInt64 = 2
"""DLB_FLAG_IS_COPIED: the data was copied for this exchange."""
comptime DEVICE_TYPE_CPU = 1
"""DLB_DEVICE_TYPE_CPU (kDLCPU)."""
comptime ORDER_C: Int32 = 0
"""DLB_ORDER_C: row-major order."""
comptime SHM_HANDLE_CAPACITY = 256
"""DLB_SHM_HANDLE_CAPACITY: bytes that hold every segment handle and its terminating NUL."""


struct DLBTensor:
    """The opaque C `dlb_tensor`: one shared reference to a tensor's description and memory."""

    pass


struct DLManagedTensorVersioned:
    """DLPack's `DLManagedTensorVersioned` (>= 1.0), only ever handled through pointers."""

    pass


struct DLManagedTensor:
    """DLPack's legacy `DLManagedTensor` (< 1.0), only ever handled through pointers."""

    pass


comptime OpaquePtr = Pointer[NoneType, MutUntrackedOrigin]
"""A C `void *` that is never NULL."""
comptime TensorPtr = Pointer[DLBTensor, MutUntrackedOrigin]
"""A live `dlb_tensor *` handle."""
comptime ManagedTensorVersionedPtr = Pointer[DLManagedTensorVersioned, MutUntrackedOrigin]
"""A `DLManagedTensorVersioned *` (a DLPack >= 1.0 export or import)."""
comptime ManagedTensorPtr = Pointer[DLManagedTensor, MutUntrackedOrigin]
"""A legacy `DLManagedTensor *`."""
comptime ReleaseFn = def(Optional[OpaquePtr]) thin abi("C") -> None
"""`dlb_release_fn`: called once with the caller's `owner_ctx` when a wrapped memory is free."""

comptime _I64Ptr = Pointer[Int64, ImmUntrackedOrigin]
comptime _Out[T: AnyType] = Pointer[T, MutAnyOrigin]


def _out[T: AnyType](mut value: T) -> _Out[T]:
    # MutAnyOrigin tells the compiler that the C call may write `value`.
    return Pointer(to=value).unsafe_origin_cast[MutAnyOrigin]()


def _int64s(values: List[Int]) -> Optional[_I64Ptr]:
    # Int is 64 bits on every target this package builds for. The caller keeps `values` alive
    # for the C call by holding it as an argument.
    if not values:
        return None
    var int64s = values.unsafe_ptr().as_imm().unsafe_bitcast[Int64]()
    return int64s.unsafe_origin_cast[ImmUntrackedOrigin]()


@fieldwise_init
struct TensorDesc(Defaultable, ImplicitlyCopyable):
    """The C `dlb_tensor_desc` filled by `dlb_tensor_info` (72 bytes, no padding).

    `shape` and `strides` point into the tensor and stay valid while its handle lives.
    """

    var data: Optional[OpaquePtr]
    """Address of element 0 (byte offset applied); None when the tensor has no elements."""
    var shape: Optional[_I64Ptr]
    """`ndim` dimension sizes; None when ndim is 0."""
    var strides: Optional[_I64Ptr]
    """`ndim` strides in elements; None when ndim is 0."""
    var ndim: Int32
    """Number of dimensions."""
    var dtype: UInt32
    """The `dlb_dtype` as `code | bits << 8 | lanes << 16`."""
    var device: UInt64
    """The `dlb_device` as `device_type | device_id << 32`."""
    var flags: UInt64
    """DLPack flag bits (FLAG_READ_ONLY, FLAG_IS_COPIED, ...)."""
    var size: Int64
    """Number of elements."""
    var itemsize: Int64
    """Bytes per element."""
    var nbytes: Int64
    """Bytes of the elements if they were compact."""

    def __init__(out self):
        """An all-zero description, for `dlb_tensor_info` to fill."""
        self = Self(None, None, None, 0, 0, 0, 0, 0, 0, 0)


struct CApi(Movable):
    """The libdlbridge functions this package calls, as Mojo methods.

    Each method makes the C call with pointers into its own arguments (which live until it
    returns) and turns a nonzero status into an `Error` carrying `dlb_last_error()`.
    """

    var _last_error: def() thin abi("C") -> Pointer[c_char, ImmUntrackedOrigin]
    var _empty: def(Int32, Optional[_I64Ptr], UInt32, _Out[Optional[TensorPtr]]) thin abi(
        "C"
    ) -> c_int
    var _arange: def(Int64, UInt32, _Out[Optional[TensorPtr]]) thin abi("C") -> c_int
    var _from_memory: def(
        Optional[OpaquePtr],
        Int32,
        Optional[_I64Ptr],
        Optional[_I64Ptr],
        UInt32,
        UInt64,
        UInt64,
        Optional[OpaquePtr],
        ReleaseFn,
        _Out[Optional[TensorPtr]],
    ) thin abi("C") -> c_int
    var _import_versioned: def(
        ManagedTensorVersionedPtr, _Out[Optional[TensorPtr]]
    ) thin abi("C") -> c_int
    var _import_legacy: def(ManagedTensorPtr, UInt64, _Out[Optional[TensorPtr]]) thin abi(
        "C"
    ) -> c_int
    var _export_versioned: def(
        TensorPtr, UInt64, _Out[Optional[ManagedTensorVersionedPtr]]
    ) thin abi("C") -> c_int
    var _export_legacy: def(TensorPtr, c_int, _Out[Optional[ManagedTensorPtr]]) thin abi(
        "C"
    ) -> c_int
    var _free: def(TensorPtr) thin abi("C") -> None
    var _info: def(TensorPtr, _Out[TensorDesc]) thin abi("C") -> c_int
    var _check_values: def(TensorPtr) thin abi("C") -> c_int
    var _copy: def(TensorPtr, Int32, _Out[Optional[TensorPtr]]) thin abi("C") -> c_int
    var _dtype_name: def(UInt32, Pointer[c_char, MutAnyOrigin], UInt) thin abi("C") -> c_int
    var _shm_empty: def(
        Int32,
        Optional[_I64Ptr],
        UInt32,
        Pointer[c_char, MutAnyOrigin],
        UInt,
        _Out[Optional[TensorPtr]],
    ) thin abi("C") -> c_int
    var _shm_export: def(
        TensorPtr, Pointer[c_char, MutAnyOrigin], UInt, Optional[_Out[Optional[TensorPtr]]]
    ) thin abi("C") -> c_int
    var _shm_open: def(
        Pointer[c_char, ImmUntrackedOrigin], c_int, _Out[Optional[TensorPtr]]
    ) thin abi("C") -> c_int

    def __init__(out self, lib: OwnedDLHandle):
        """Resolves every function in `lib` (aborts naming the symbol if one is missing).

        Args:
            lib: The opened libdlbridge.
        """
        comptime assert Endian.native() == .little, "dlb_dtype/dlb_device travel as integers"
        comptime assert size_of[TensorDesc]() == 72, "TensorDesc must match dlb_tensor_desc"
        self._last_error = lib._get_function["dlb_last_error", type_of(self._last_error)]()
        self._empty = lib._get_function["dlb_tensor_empty", type_of(self._empty)]()
        self._arange = lib._get_function["dlb_tensor_arange", type_of(self._arange)]()
        self._from_memory = lib._get_function[
            "dlb_tensor_from_memory", type_of(self._from_memory)
        ]()
        self._import_versioned = lib._get_function[
            "dlb_tensor_import_versioned", type_of(self._import_versioned)
        ]()
        self._import_legacy = lib._get_function[
            "dlb_tensor_import_legacy", type_of(self._import_legacy)
        ]()
        self._export_versioned = lib._get_function[
            "dlb_tensor_export_versioned", type_of(self._export_versioned)
        ]()
        self._export_legacy = lib._get_function[
            "dlb_tensor_export_legacy", type_of(self._export_legacy)
        ]()
        self._free = lib._get_function["dlb_tensor_free", type_of(self._free)]()
        self._info = lib._get_function["dlb_tensor_info", type_of(self._info)]()
        self._check_values = lib._get_function[
            "dlb_tensor_check_values", type_of(self._check_values)
        ]()
        self._copy = lib._get_function["dlb_tensor_copy", type_of(self._copy)]()
        self._dtype_name = lib._get_function["dlb_dtype_name", type_of(self._dtype_name)]()
        self._shm_empty = lib._get_function["dlb_shm_empty", type_of(self._shm_empty)]()
        self._shm_export = lib._get_function["dlb_shm_export", type_of(self._shm_export)]()
        self._shm_open = lib._get_function["dlb_shm_open", type_of(self._shm_open)]()

    def _check(self, status: c_int, call: StaticString) raises:
        if status != 0:
            var message = StringSlice(
                unsafe_from_utf8=CStringSpan(unsafe_from_ptr=self._last_error())
            )
            raise Error(t"{call} failed (status {status}): {message}")

    def empty(self, shape: List[Int], dtype: UInt32) raises -> TensorPtr:
        """`dlb_tensor_empty`: a zero-filled, 64-byte aligned, C-contiguous CPU tensor.

        Args:
            shape: Dimension sizes.
            dtype: The packed `dlb_dtype`.

        Returns:
            A new handle.

        Raises:
            On negative dims, overflow, an invalid dtype or allocation failure.
        """
        var out = Optional[TensorPtr]()
        self._check(
            self._empty(Int32(len(shape)), _int64s(shape), dtype, _out(out)), "dlb_tensor_empty"
        )
        return out.value()

    def arange(self, n: Int, dtype: UInt32) raises -> TensorPtr:
        """`dlb_tensor_arange`: the 1-d CPU tensor `0, 1, ..., n-1`.

        Args:
            n: Number of elements.
            dtype: The packed `dlb_dtype`.

        Returns:
            A new handle.

        Raises:
            On a negative `n` or a dtype without arange.
        """
        var out = Optional[TensorPtr]()
        self._check(self._arange(Int64(n), dtype, _out(out)), "dlb_tensor_arange")
        return out.value()

    def from_memory(
        self,
        data: Optional[OpaquePtr],
        shape: List[Int],
        strides: List[Int],
        dtype: UInt32,
        flags: UInt64,
        owner_ctx: Optional[OpaquePtr],
        release: ReleaseFn,
    ) raises -> TensorPtr:
        """`dlb_tensor_from_memory`: a CPU tensor over caller-owned memory.

        Args:
            data: Address of element 0 (None only without elements).
            shape: Dimension sizes.
            strides: Element strides, or empty for C order.
            dtype: The packed `dlb_dtype`.
            flags: DLPack flag bits the tensor carries.
            owner_ctx: Passed to `release`.
            release: Called exactly once when the last reference is gone.

        Returns:
            A new handle that owns the memory's release.

        Raises:
            On invalid metadata; `release` is then not called.
        """
        var out = Optional[TensorPtr]()
        self._check(
            self._from_memory(
                data,
                Int32(len(shape)),
                _int64s(shape),
                _int64s(strides),
                dtype,
                UInt64(DEVICE_TYPE_CPU),
                flags,
                owner_ctx,
                release,
                _out(out),
            ),
            "dlb_tensor_from_memory",
        )
        return out.value()

    def import_versioned(self, managed: ManagedTensorVersionedPtr) raises -> TensorPtr:
        """`dlb_tensor_import_versioned`: takes ownership of a DLPack >= 1.0 tensor.

        Args:
            managed: The producer's tensor; its deleter runs exactly once, already on return if
                this raises.

        Returns:
            A new handle.

        Raises:
            If the tensor fails validation.
        """
        var out = Optional[TensorPtr]()
        self._check(self._import_versioned(managed, _out(out)), "dlb_tensor_import_versioned")
        return out.value()

    def import_legacy(self, managed: ManagedTensorPtr, flags: UInt64) raises -> TensorPtr:
        """`dlb_tensor_import_legacy`: takes ownership of a legacy DLPack tensor.

        Args:
            managed: The producer's tensor; its deleter runs exactly once, already on return if
                this raises.
            flags: Flags the legacy struct cannot carry (FLAG_READ_ONLY).

        Returns:
            A new handle.

        Raises:
            If the tensor fails validation.
        """
        var out = Optional[TensorPtr]()
        self._check(self._import_legacy(managed, flags, _out(out)), "dlb_tensor_import_legacy")
        return out.value()

    def export_versioned(
        self, tensor: TensorPtr, extra_flags: UInt64
    ) raises -> ManagedTensorVersionedPtr:
        """`dlb_tensor_export_versioned`: a DLPack 1.3 tensor sharing the memory.

        Args:
            tensor: A live handle (not consumed).
            extra_flags: Flags added to the tensor's own (FLAG_READ_ONLY).

        Returns:
            The export; whoever holds it calls its deleter once.

        Raises:
            If the export cannot be allocated.
        """
        var out = Optional[ManagedTensorVersionedPtr]()
        self._check(
            self._export_versioned(tensor, extra_flags, _out(out)), "dlb_tensor_export_versioned"
        )
        return out.value()

    def export_legacy(self, tensor: TensorPtr, allow_read_only: Bool) raises -> ManagedTensorPtr:
        """`dlb_tensor_export_legacy`: a legacy DLPack tensor sharing the memory.

        Args:
            tensor: A live handle (not consumed).
            allow_read_only: Export a read-only tensor anyway (the legacy struct cannot say so).

        Returns:
            The export; whoever holds it calls its deleter once.

        Raises:
            For a read-only tensor unless `allow_read_only`.
        """
        var out = Optional[ManagedTensorPtr]()
        self._check(
            self._export_legacy(tensor, c_int(Int(allow_read_only)), _out(out)),
            "dlb_tensor_export_legacy",
        )
        return out.value()

    def free(self, tensor: TensorPtr):
        """`dlb_tensor_free`: releases a handle (the memory goes with the last reference).

        Args:
            tensor: A live handle, not used afterwards.
        """
        self._free(tensor)

    def info(self, tensor: TensorPtr) raises -> TensorDesc:
        """`dlb_tensor_info`: the tensor's full description.

        Args:
            tensor: A live handle.

        Returns:
            The description; its shape and strides live as long as the handle.

        Raises:
            Never for a live handle.
        """
        var desc = TensorDesc()
        self._check(self._info(tensor, _out(desc)), "dlb_tensor_info")
        return desc

    def check_values(self, tensor: TensorPtr) raises:
        """`dlb_tensor_check_values`: every bool element is the byte 0 or 1.

        Args:
            tensor: A live handle.

        Raises:
            DLB_ERR_INVALID_BOOL naming the first other byte's index and value; device memory.
        """
        self._check(self._check_values(tensor), "dlb_tensor_check_values")

    def copy(self, tensor: TensorPtr) raises -> TensorPtr:
        """`dlb_tensor_copy` in C order: a compact, writable, library-owned copy.

        Args:
            tensor: A live handle.

        Returns:
            A new handle flagged FLAG_IS_COPIED.

        Raises:
            For device memory or when allocation fails.
        """
        var out = Optional[TensorPtr]()
        self._check(self._copy(tensor, ORDER_C, _out(out)), "dlb_tensor_copy")
        return out.value()

    def dtype_name(self, dtype: UInt32) -> String:
        """`dlb_dtype_name`: the numpy-style name of a packed `dlb_dtype`.

        Args:
            dtype: The packed `dlb_dtype`.

        Returns:
            The name ("float32", "complex64", ...), or the raw code/bits/lanes when DLPack 1.3
            does not define the type.
        """
        var buf = List[c_char](length=32, fill=0)
        var buf_ptr = buf.unsafe_ptr().unsafe_origin_cast[MutAnyOrigin]()
        if self._dtype_name(dtype, buf_ptr, UInt(len(buf))) != 0:
            return String(
                t"dtype(code={dtype & 0xFF}, bits={(dtype >> 8) & 0xFF}, lanes={dtype >> 16})"
            )
        var name = String(
            StringSlice(unsafe_from_utf8=CStringSpan(unsafe_from_ptr=buf_ptr.as_imm()))
        )
        _ = buf^  # read through buf_ptr above: keep the buffer alive until here
        return name


    def shm_empty(self, shape: List[Int], dtype: UInt32) raises -> Tuple[String, TensorPtr]:
        """`dlb_shm_empty`: a zero-filled, C-contiguous tensor in a new shared-memory segment.

        Args:
            shape: Dimension sizes.
            dtype: The packed `dlb_dtype`.

        Returns:
            The segment's handle and a new handle over the segment (this side's reference).

        Raises:
            On negative dims, overflow, an invalid dtype or when the segment cannot be made (no
            segment is left behind then).
        """
        var buf = List[c_char](length=SHM_HANDLE_CAPACITY, fill=0)
        var buf_ptr = buf.unsafe_ptr().unsafe_origin_cast[MutAnyOrigin]()
        var out = Optional[TensorPtr]()
        self._check(
            self._shm_empty(
                Int32(len(shape)), _int64s(shape), dtype, buf_ptr, UInt(len(buf)), _out(out)
            ),
            "dlb_shm_empty",
        )
        var handle = String(
            StringSlice(unsafe_from_utf8=CStringSpan(unsafe_from_ptr=buf_ptr.as_imm()))
        )
        _ = buf^  # read through buf_ptr above: keep the buffer alive until here
        return (handle^, out.value())

    def shm_export(self, tensor: TensorPtr) raises -> String:
        """`dlb_shm_export` with `out` NULL: copies the tensor into a new segment in C order
        and hands the segment over to the next opener (this side keeps no reference).

        Args:
            tensor: A live handle in host memory (not consumed).

        Returns:
            The segment's handle.

        Raises:
            For device memory, packed sub-byte elements, or when the segment cannot be made.
        """
        var buf = List[c_char](length=SHM_HANDLE_CAPACITY, fill=0)
        var buf_ptr = buf.unsafe_ptr().unsafe_origin_cast[MutAnyOrigin]()
        self._check(
            self._shm_export(tensor, buf_ptr, UInt(len(buf)), None), "dlb_shm_export"
        )
        var handle = String(
            StringSlice(unsafe_from_utf8=CStringSpan(unsafe_from_ptr=buf_ptr.as_imm()))
        )
        _ = buf^  # read through buf_ptr above: keep the buffer alive until here
        return handle^

    def shm_open(self, handle: String, writable: Bool) raises -> TensorPtr:
        """`dlb_shm_open`: maps the segment named `handle` without copying.

        Args:
            handle: The segment's handle.
            writable: Map the data writable; else copy-on-write pages and FLAG_READ_ONLY.

        Returns:
            A new handle over the segment (this side's reference).

        Raises:
            For a malformed handle, a segment that does not exist (any more), an invalid
            segment or a failed system call; the message names the handle.
        """
        var name = handle.copy()  # as_c_string_span NUL-terminates its own string
        var out = Optional[TensorPtr]()
        var status = self._shm_open(
            name.as_c_string_span().ptr().as_imm().unsafe_origin_cast[ImmUntrackedOrigin](),
            c_int(Int(writable)),
            _out(out),
        )
        _ = name^  # read by the call above: keep the string alive until here
        self._check(status, "dlb_shm_open")
        return out.value()


def library_path() -> String:
    """The libdlbridge this package loads.

    Returns:
        `$DLBRIDGE_LIB` if set, else `target/release/libdlbridge.so` of the repository holding
        this package (built by `cargo build --release -p dlbridge-capi`).
    """
    var path = getenv("DLBRIDGE_LIB")
    if path:
        return path
    # This file is <repo>/bindings/mojo/dlbridge/capi.mojo.
    var repo = dirname(dirname(dirname(dirname(source_location().file_name()))))
    return join(repo, "target", "release", "libdlbridge.so")


struct _LoadedCApi(Movable):
    """The process-wide result of loading libdlbridge: the function table or why it failed."""

    var api: Optional[CApi]
    var error: String

    def __init__(out self):
        var path = library_path()
        try:
            # NODELETE: the function pointers stay valid for the life of the process.
            var lib = OwnedDLHandle(path, RTLD.NOW | RTLD.NODELETE)
            self.api = CApi(lib)
            self.error = ""
        except e:
            self.api = None
            self.error = String(
                t"cannot load libdlbridge from {path} ({e}); build it with `cargo build --release"
                t" -p dlbridge-capi` or set DLBRIDGE_LIB"
            )


def _load_capi() -> _LoadedCApi:
    return _LoadedCApi()


comptime _CAPI_GLOBAL = _Global["dlbridge.mojo.capi", _load_capi]


def capi() raises -> Pointer[CApi, MutUntrackedOrigin]:
    """The libdlbridge function table, loaded on first use.

    Returns:
        A pointer to the process-wide table (it lives until the process ends).

    Raises:
        If libdlbridge cannot be loaded (the message names the path tried).
    """
    var loaded = _CAPI_GLOBAL.get_or_create_ptr()
    if not loaded[].api:
        raise Error(loaded[].error)
    return Pointer(to=loaded[].api.unsafe_value()).unsafe_origin_cast[MutUntrackedOrigin]()
