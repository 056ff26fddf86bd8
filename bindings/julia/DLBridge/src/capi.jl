# The C ABI of libdlbridge (include/dlbridge.h): where the library is, its structs, one Julia
# function per C function used, and the one error path from status codes to exceptions.

"""
    DLBridge.library_path() -> String

The path of the libdlbridge shared library that `DLBridge` loads when it is loaded: the
environment variable `DLBRIDGE_LIB` if set, else `target/release/libdlbridge.so` in the
repository that holds this package (built by `cargo build --release -p dlbridge-capi`).
"""
function library_path()
    default = joinpath(@__DIR__, "..", "..", "..", "..", "target", "release",
                       "libdlbridge." * Libdl.dlext)
    return normpath(get(ENV, "DLBRIDGE_LIB", default))
end

# Function pointers of the C functions below, resolved by `load_library` (at `__init__`, so that
# a precompiled DLBridge follows DLBRIDGE_LIB of the running process).
const C_FUNCTIONS = Pair{Symbol,Base.RefValue{Ptr{Cvoid}}}[]

# `@cfunc name(arg::CType, ...)::CReturn` defines the Julia function `name(arg, ...)` calling the
# C function of that name through its resolved pointer (arguments converted as by `ccall`).
macro cfunc(signature)
    call, return_type = signature.args
    name, params = call.args[1], call.args[2:end]
    args = [esc(p.args[1]) for p in params]
    types = [esc(p.args[2]) for p in params]
    pointer = Symbol(name, :_pointer)
    quote
        const $(esc(pointer)) = Ref{Ptr{Cvoid}}(C_NULL)
        push!(C_FUNCTIONS, $(QuoteNode(name)) => $(esc(pointer)))
        @inline $(esc(name))($(args...)) =
            ccall($(esc(pointer))[], $(esc(return_type)), ($(types...),), $(args...))
    end
end

"""
    DLBridge.load_library(path = DLBridge.library_path())

Opens libdlbridge at `path` and resolves every C function DLBridge calls; throws an
`ErrorException` naming the path if it cannot be opened (build it with
`cargo build --release -p dlbridge-capi`, or point `DLBRIDGE_LIB` at it).
"""
function load_library(path::AbstractString = library_path())
    handle = Libdl.dlopen_e(path)
    handle == C_NULL && error("cannot load libdlbridge from $path (set DLBRIDGE_LIB, or build " *
                              "it with `cargo build --release -p dlbridge-capi`)")
    for (name, pointer) in C_FUNCTIONS
        pointer[] = Libdl.dlsym(handle, name)
    end
    return nothing
end

"""The C `dlb_dtype`: DLPack's DLDataType."""
struct CDtype
    code::UInt8
    bits::UInt8
    lanes::UInt16
end

"""The C `dlb_device`: DLPack's DLDevice."""
struct CDevice
    device_type::Int32
    device_id::Int32
end

"""The C `dlb_tensor_desc` filled by `dlb_tensor_info` (72 bytes, no padding)."""
struct CTensorDesc
    data::Ptr{Cvoid}
    shape::Ptr{Int64}
    strides::Ptr{Int64}
    ndim::Int32
    dtype::CDtype
    device::CDevice
    flags::UInt64
    size::Int64
    itemsize::Int64
    nbytes::Int64
end

const DLB_ORDER_C = Int32(0)
const DLB_ORDER_F = Int32(1)
const DLB_FLAG_READ_ONLY = UInt64(1) << 0
const DLB_FLAG_IS_COPIED = UInt64(1) << 1
const DLB_DEVICE_TYPE_CPU = Int32(1)
const CPU = CDevice(DLB_DEVICE_TYPE_CPU, 0)
const DLB_SHM_HANDLE_CAPACITY = 256

@cfunc dlb_last_error()::Cstring
@cfunc dlb_tensor_empty(ndim::Int32, shape::Ptr{Int64}, dtype::CDtype,
                        out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_arange(n::Int64, dtype::CDtype, out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_release_queue_new(out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_release_queue_drain(queue::Ptr{Cvoid}, tokens::Ptr{UInt64}, cap::Csize_t,
                               n::Ptr{Csize_t})::Cint
@cfunc dlb_tensor_from_memory_queued(data::Ptr{Cvoid}, ndim::Int32, shape::Ptr{Int64},
                                     strides::Ptr{Int64}, dtype::CDtype, device::CDevice,
                                     flags::UInt64, queue::Ptr{Cvoid}, token::UInt64,
                                     out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_import_versioned(managed::Ptr{Cvoid}, out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_import_legacy(managed::Ptr{Cvoid}, flags::UInt64, out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_export_versioned(t::Ptr{Cvoid}, extra_flags::UInt64,
                                   out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_export_legacy(t::Ptr{Cvoid}, allow_read_only::Cint,
                                out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_clone(t::Ptr{Cvoid}, out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_tensor_free(t::Ptr{Cvoid})::Cvoid
@cfunc dlb_tensor_info(t::Ptr{Cvoid}, out::Ptr{CTensorDesc})::Cint
@cfunc dlb_tensor_check_values(t::Ptr{Cvoid})::Cint
@cfunc dlb_tensor_is_contiguous(t::Ptr{Cvoid}, order::Int32, out::Ptr{Cint})::Cint
@cfunc dlb_tensor_copy(t::Ptr{Cvoid}, order::Int32, out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_dtype_name(dtype::CDtype, buf::Ptr{UInt8}, len::Csize_t)::Cint
@cfunc dlb_shm_empty(ndim::Int32, shape::Ptr{Int64}, dtype::CDtype, handle::Ptr{UInt8},
                     handle_len::Csize_t, out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_shm_export(t::Ptr{Cvoid}, handle::Ptr{UInt8}, handle_len::Csize_t,
                      out::Ptr{Ptr{Cvoid}})::Cint
@cfunc dlb_shm_open(handle::Cstring, writable::Cint, out::Ptr{Ptr{Cvoid}})::Cint

# Status codes of include/dlbridge.h, by the exception each one raises. ArgumentError is the
# default: the offending value came from the caller or the producer.
const STATUS_NAMES = Dict{Cint,String}(
    1 => "DLB_ERR_NULL_ARGUMENT", 2 => "DLB_ERR_PANIC", 3 => "DLB_ERR_OTHER",
    10 => "DLB_ERR_NULL_TENSOR", 11 => "DLB_ERR_UNSUPPORTED_VERSION",
    12 => "DLB_ERR_NDIM_OUT_OF_RANGE", 13 => "DLB_ERR_NULL_SHAPE", 14 => "DLB_ERR_NEGATIVE_DIM",
    15 => "DLB_ERR_SHAPE_OVERFLOW", 16 => "DLB_ERR_NULL_DATA", 17 => "DLB_ERR_UNKNOWN_DTYPE_CODE",
    18 => "DLB_ERR_INVALID_DTYPE_BITS", 19 => "DLB_ERR_UNSUPPORTED_LANES",
    20 => "DLB_ERR_UNKNOWN_DEVICE", 21 => "DLB_ERR_STRIDE_OVERFLOW",
    22 => "DLB_ERR_UNSUPPORTED_LAYOUT", 23 => "DLB_ERR_STRIDES_MISMATCH",
    24 => "DLB_ERR_BUFFER_TOO_SMALL", 25 => "DLB_ERR_DTYPE_MISMATCH", 26 => "DLB_ERR_NOT_ON_CPU",
    27 => "DLB_ERR_READ_ONLY", 28 => "DLB_ERR_UNKNOWN_NAME", 29 => "DLB_ERR_ALLOCATION_FAILED",
    30 => "DLB_ERR_SHM_IO", 31 => "DLB_ERR_SHM_NOT_FOUND", 32 => "DLB_ERR_SHM_INVALID",
    33 => "DLB_ERR_INVALID_BOOL", 34 => "DLB_ERR_STREAMS_UNSUPPORTED",
    35 => "DLB_ERR_CUDA_DRIVER_NOT_LOADED", 36 => "DLB_ERR_CUDA_DRIVER",
)
const DIMENSION_MISMATCH_STATUSES = (Cint(23), Cint(24))
const ERROR_EXCEPTION_STATUSES = (Cint(2), Cint(3), Cint(29), Cint(30), Cint(35), Cint(36))

"""
    DLBridge.status_exception(status, message) -> Exception

The exception for a C ABI failure: `DimensionMismatch` for shape/stride/buffer-size mismatches,
`ErrorException` for library and system faults (panic, allocation failure, unclassified errors,
a failed shared-memory system call, a missing or failing CUDA driver), and `ArgumentError` for
every other (invalid value) status, among them a shared-memory handle that names no segment or an
invalid one. The text is `message`
(the C library's `dlb_last_error()`, which names the offending value) followed by the status
name.
"""
function status_exception(status::Integer, message::AbstractString)
    code = Cint(status)
    text = string(message, " (", get(STATUS_NAMES, code, "dlbridge status $code"), ")")
    code in DIMENSION_MISMATCH_STATUSES && return DimensionMismatch(text)
    code in ERROR_EXCEPTION_STATUSES && return ErrorException(text)
    return ArgumentError(text)
end

# Throws the exception of a nonzero status (kept out of line: the success path stays small).
@noinline throw_status(status::Cint) = throw(status_exception(status, unsafe_string(dlb_last_error())))

# The one error path of the C ABI: every status-returning call goes through `check`. With a
# `handle`, for calls about a shared-memory segment: the message names the handle (the C library
# names it itself for segment errors, not for a header field that fails validation).
@inline check(status::Cint) = (status == 0 || throw_status(status); nothing)
@inline check(status::Cint, handle::String) = (status == 0 || throw_status(status, handle); nothing)

@noinline function throw_status(status::Cint, handle::String)
    message = unsafe_string(dlb_last_error())
    quoted = repr(handle)  # as the C library quotes it
    occursin(quoted, message) || (message = "shared memory segment $quoted: $message")
    throw(status_exception(status, message))
end
