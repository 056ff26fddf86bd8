"""Element types: Mojo `DType`s and their DLPack 1.3 `DLDataType`s.

A DLPack dtype travels as the packed `dlb_dtype` integer `code | bits << 8 | lanes << 16`.
"""


def _packed(code: Int, bits: Int) -> UInt32:
    return UInt32(code | bits << 8 | 1 << 16)


def dlpack_dtype[dtype: DType]() -> UInt32:
    """The DLPack data type of a Mojo `DType`, packed as a `dlb_dtype`.

    Defined for bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64 and the
    one-byte float8 formats (e3m4, e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0fnu). Other DTypes
    (int128, float4/float6, index) have no unpadded DLPack equivalent and fail to compile.

    Parameters:
        dtype: The Mojo element type.

    Returns:
        `code | bits << 8 | lanes << 16` with one lane.
    """
    comptime if dtype == DType.bool:
        return _packed(6, 8)
    elif dtype == DType.int8:
        return _packed(0, 8)
    elif dtype == DType.int16:
        return _packed(0, 16)
    elif dtype == DType.int32:
        return _packed(0, 32)
    elif dtype == DType.int64:
        return _packed(0, 64)
    elif dtype == DType.uint8:
        return _packed(1, 8)
    elif dtype == DType.uint16:
        return _packed(1, 16)
    elif dtype == DType.uint32:
        return _packed(1, 32)
    elif dtype == DType.uint64:
        return _packed(1, 64)
    elif dtype == DType.float16:
        return _packed(2, 16)
    elif dtype == DType.float32:
        return _packed(2, 32)
    elif dtype == DType.float64:
        return _packed(2, 64)
    elif dtype == DType.bfloat16:
        return _packed(4, 16)
    elif dtype == DType.float8_e3m4:
        return _packed(7, 8)
    elif dtype == DType.float8_e4m3fn:
        return _packed(10, 8)
    elif dtype == DType.float8_e4m3fnuz:
        return _packed(11, 8)
    elif dtype == DType.float8_e5m2:
        return _packed(12, 8)
    elif dtype == DType.float8_e5m2fnuz:
        return _packed(13, 8)
    elif dtype == DType.float8_e8m0fnu:
        return _packed(14, 8)
    else:
        comptime assert False, "this DType has no DLPack 1.3 equivalent dlbridge can exchange"
