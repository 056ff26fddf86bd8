"""What every dlbridge tensor in Mojo offers: shape, strides, device, flags and element access
that honours strides (negative ones too) and the producer's byte offset.

`TensorHandle` owns one reference to a libdlbridge tensor; `StridedTensor` is the trait that
`TensorView` (memory someone else owns) and `Tensor` (memory dlbridge allocated) share.
"""

from std.os import abort

from .capi import FLAG_IS_COPIED, FLAG_READ_ONLY, TensorDesc, TensorPtr, capi
from .dtypes import dlpack_dtype


@fieldwise_init
struct Device(Equatable, ImplicitlyCopyable, Writable):
    """Where a tensor's memory lives: DLPack's `DLDevice`."""

    var device_type: Int
    """The DLDeviceType code (1: CPU, 2: CUDA, 3: CUDA host, ...)."""
    var device_id: Int
    """The device ordinal (0 for the CPU)."""

    def is_host_accessible(self) -> Bool:
        """Whether the CPU can read and write the memory directly.

        Returns:
            True for CPU, CUDA host, ROCm host and CUDA managed memory.
        """
        return self.device_type in (1, 3, 11, 13)

    def write_to(self, mut writer: Some[Writer]):
        """Writes `Device(type=T, id=I)`.

        Args:
            writer: The destination.
        """
        writer.write("Device(type=", self.device_type, ", id=", self.device_id, ")")


struct TensorHandle(Movable):
    """One owned reference to a libdlbridge tensor and its description.

    Freeing the last reference releases the memory: an imported producer's deleter runs, a
    `from_memory` release callback is called, or dlbridge frees its own buffer.
    """

    var ptr: TensorPtr
    """The `dlb_tensor *`; valid while this handle lives."""
    var desc: TensorDesc
    """The tensor's description; its shape and strides point into the tensor."""

    def __init__(out self, ptr: TensorPtr) raises:
        """Takes ownership of `ptr`.

        Args:
            ptr: A handle returned by libdlbridge; freed here if this raises.

        Raises:
            If the description cannot be read.
        """
        var api = capi()
        try:
            self.desc = api[].info(ptr)
        except e:
            api[].free(ptr)
            raise e^
        self.ptr = ptr

    def __deinit__(deinit self):
        """Releases the reference."""
        try:
            capi()[].free(self.ptr)
        except e:
            abort(t"dlbridge: cannot free a tensor handle: {e}")


def check_dtype[dtype: DType](desc: TensorDesc) raises:
    """Checks that a tensor holds `dtype` elements.

    Parameters:
        dtype: The element type the caller asked for.

    Args:
        desc: The tensor's description.

    Raises:
        `"dtype mismatch: tensor holds float32, caller asked for float64"`.
    """
    if desc.dtype != dlpack_dtype[dtype]():
        raise Error(
            t"dtype mismatch: tensor holds {capi()[].dtype_name(desc.dtype)}, caller asked for"
            t" {capi()[].dtype_name(dlpack_dtype[dtype]())}"
        )


trait StridedTensor(Movable):
    """A dlbridge tensor seen from Mojo: DLPack metadata and strided element access.

    Implementors provide the handle and its description; everything else is shared. Strides
    are in elements and may be negative or zero; element `(i, j, ...)` lives at element 0 plus
    `i * strides[0] + j * strides[1] + ...` elements.
    """

    comptime element_dtype: DType
    """The Mojo element type."""

    def handle(self) -> TensorPtr:
        """The underlying `dlb_tensor *` (borrowed: valid while `self` lives).

        Returns:
            The handle, for C ABI calls.
        """
        ...

    def description(self) -> TensorDesc:
        """The tensor's description (`dlb_tensor_info`), read once when it was made.

        Returns:
            The description; its shape and strides are valid while `self` lives.
        """
        ...

    def ndim(self) -> Int:
        """Number of dimensions.

        Returns:
            0 for a scalar.
        """
        return Int(self.description().ndim)

    def shape(self) -> List[Int]:
        """Dimension sizes.

        Returns:
            `ndim` sizes (empty for a scalar).
        """
        var desc = self.description()
        var result = List[Int](capacity=Int(desc.ndim))
        for k in range(Int(desc.ndim)):
            result.append(Int(desc.shape.value()[unsafe_offset=k]))
        return result^

    def strides(self) -> List[Int]:
        """Strides in elements (not bytes), as DLPack and the C ABI report them.

        Returns:
            `ndim` strides; negative and zero strides are kept as they are.
        """
        var desc = self.description()
        var result = List[Int](capacity=Int(desc.ndim))
        for k in range(Int(desc.ndim)):
            result.append(Int(desc.strides.value()[unsafe_offset=k]))
        return result^

    def size(self) -> Int:
        """Number of elements.

        Returns:
            The product of the shape (1 for a scalar, 0 when a dimension is 0).
        """
        return Int(self.description().size)

    def device(self) -> Device:
        """Where the memory lives.

        Returns:
            The tensor's device.
        """
        var packed = self.description().device
        return Device(Int(packed & 0xFFFF_FFFF), Int(packed >> 32))

    def is_read_only(self) -> Bool:
        """Whether the producer forbids writes (DLPack's READ_ONLY flag).

        Returns:
            True if element writes raise.
        """
        return self.description().flags & FLAG_READ_ONLY != 0

    def is_copied(self) -> Bool:
        """Whether the data was copied for this exchange (DLPack's IS_COPIED flag).

        Returns:
            True for copies.
        """
        return self.description().flags & FLAG_IS_COPIED != 0

    def is_contiguous(self) -> Bool:
        """Whether the elements are compact in row-major (C) order.

        Size-1 dimensions are ignored and a tensor without elements is contiguous, as in numpy.

        Returns:
            True for C-contiguous layouts.
        """
        var desc = self.description()
        if desc.size == 0:
            return True
        var expected: Int64 = 1
        for k in reversed(range(Int(desc.ndim))):
            var n = desc.shape.value()[unsafe_offset=k]
            if n != 1 and desc.strides.value()[unsafe_offset=k] != expected:
                return False
            expected *= n
        return True

    def unsafe_ptr(
        ref self,
    ) raises -> Pointer[Scalar[Self.element_dtype], origin_of(self)]:
        """The address of element 0 (the producer's byte offset applied).

        The pointer's origin keeps `self` (and so the memory) alive while it is used. Writes
        through it bypass the read-only check.

        Returns:
            A pointer to element 0; other elements are at multiples of `strides()` from it.

        Raises:
            If the tensor has no elements.
        """
        var data = self.description().data
        if not data:
            raise Error(t"tensor has no elements (shape {self.shape()}): no element 0")
        return Pointer[Scalar[Self.element_dtype], origin_of(self)](
            unsafe_from_address=Int(data.value())
        )

    def _element_address(
        self, indices: VariadicList[Int, ...]
    ) raises -> Pointer[Scalar[Self.element_dtype], MutAnyOrigin]:
        var desc = self.description()
        var ndim = Int(desc.ndim)
        if len(indices) != ndim:
            raise Error(t"expected {ndim} indices for a {ndim}-d tensor, got {len(indices)}")
        var device = self.device()
        if not device.is_host_accessible():
            raise Error(t"element access needs host memory; the tensor is on {device}")
        var offset = 0
        for k in range(ndim):
            var n = Int(desc.shape.value()[unsafe_offset=k])
            var i = indices[k]
            var wrapped = i + n if i < 0 else i
            if wrapped < 0 or wrapped >= n:
                raise Error(t"index {i} is out of bounds for axis {k} with size {n}")
            offset += wrapped * Int(desc.strides.value()[unsafe_offset=k])
        var element0 = desc.data.value().unsafe_bitcast[Scalar[Self.element_dtype]]()
        return element0.unsafe_offset(offset).unsafe_origin_cast[MutAnyOrigin]()

    def __getitem__(self, *indices: Int) raises -> Scalar[Self.element_dtype]:
        """Reads one element.

        Args:
            indices: One index per dimension (none for a scalar); negative ones count from the
                end.

        Returns:
            The element.

        Raises:
            On a wrong number of indices, an out-of-bounds index or device memory; for bool, on
            a byte other than 0 or 1 (`"bool element at index [2] holds byte 0x02; only 0 and
            1 are booleans"`: dlbridge's one bool rule).
        """
        var at = self._element_address(indices)
        comptime if Self.element_dtype == DType.bool:
            var byte = at.unsafe_bitcast[UInt8]()[]
            if byte > 1:
                var index = List[Int]()
                for i in indices:
                    index.append(i)
                raise Error(
                    t"bool element at index {index} holds byte 0x{_hex_digit(byte >> 4)}"
                    t"{_hex_digit(byte & 15)}; only 0 and 1 are booleans"
                )
        return at[]

    def __setitem__(mut self, *indices: Int, value: Scalar[Self.element_dtype]) raises:
        """Writes one element; the producer sees the write (the memory is shared).

        Args:
            indices: One index per dimension (none for a scalar); negative ones count from the
                end.
            value: The new element.

        Raises:
            On a read-only tensor, a wrong number of indices, an out-of-bounds index or device
            memory.
        """
        if self.is_read_only():
            raise Error("tensor is read-only: the producer forbids writes")
        self._element_address(indices)[] = value


def _hex_digit(d: UInt8) -> String:
    return chr(Int(d) + 48) if d < 10 else chr(Int(d) + 87)


def write_tensor[T: StridedTensor](kind: StaticString, tensor: T, mut writer: Some[Writer]):
    """Writes what `print` shows for a tensor: its kind, dtype, shape, strides, device and flags,
    e.g. `TensorView[float32](shape=[2, 3], strides=[3, 1], Device(type=1, id=0), read-only)`.
    The elements are not written (a tensor describes memory; it is no array library).

    Parameters:
        T: The tensor type.

    Args:
        kind: The type's name ("Tensor" or "TensorView").
        tensor: The tensor to describe.
        writer: The destination.
    """
    writer.write(kind, "[", T.element_dtype, "](shape=", tensor.shape())
    writer.write(", strides=", tensor.strides(), ", ", tensor.device())
    if tensor.is_read_only():
        writer.write(", read-only")
    if tensor.is_copied():
        writer.write(", copied")
    writer.write(")")
