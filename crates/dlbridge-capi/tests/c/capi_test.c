/*
 * End-to-end test of the dlbridge C ABI, built and run (plainly and under valgrind) by
 * scripts/test/capi.sh. It includes the official dlpack.h next to dlbridge.h (the header only
 * forward-declares the DLPack structs), plays producer and consumer with hand-built managed
 * tensors, and counts every deleter and release callback.
 *
 * Prints "N passed, M failed" last; exits nonzero on any failure.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlpack/dlpack.h>
#include "dlbridge.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* The last error message mentions `text`. */
#define CHECK_MESSAGE_HAS(text) CHECK(strstr(dlb_last_error(), (text)) != NULL)

static dlb_dtype dtype(uint8_t code, uint8_t bits, uint16_t lanes) {
    dlb_dtype d = {code, bits, lanes};
    return d;
}

static const dlb_device CPU = {DLB_DEVICE_TYPE_CPU, 0};

static bool same_dims(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; i++) {
        if (a[i] != b[i]) return false;
    }
    return true;
}

/* ---- layout compatibility of the header's POD types with dlpack.h ---------------------- */

_Static_assert(sizeof(dlb_dtype) == sizeof(DLDataType), "dlb_dtype mirrors DLDataType");
_Static_assert(offsetof(dlb_dtype, code) == offsetof(DLDataType, code), "code");
_Static_assert(offsetof(dlb_dtype, bits) == offsetof(DLDataType, bits), "bits");
_Static_assert(offsetof(dlb_dtype, lanes) == offsetof(DLDataType, lanes), "lanes");
_Static_assert(sizeof(dlb_device) == sizeof(DLDevice), "dlb_device mirrors DLDevice");
_Static_assert(offsetof(dlb_device, device_id) == offsetof(DLDevice, device_id), "device_id");
_Static_assert(DLB_FLAG_READ_ONLY == DLPACK_FLAG_BITMASK_READ_ONLY, "READ_ONLY");
_Static_assert(DLB_FLAG_IS_COPIED == DLPACK_FLAG_BITMASK_IS_COPIED, "IS_COPIED");
_Static_assert(DLB_FLAG_IS_SUBBYTE_TYPE_PADDED == DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
               "IS_SUBBYTE_TYPE_PADDED");
_Static_assert(DLB_DEVICE_TYPE_CPU == kDLCPU, "kDLCPU");
_Static_assert(sizeof(dlb_tensor_desc) == 72, "dlb_tensor_desc has no padding");

/* ---- caller memory with a counted release callback ------------------------------------- */

typedef struct {
    int releases;
    void *memory;
    pthread_t thread;
} Owner;

static void release_owner(void *ctx) {
    Owner *owner = ctx;
    owner->releases++;
    owner->thread = pthread_self();
    free(owner->memory);
    owner->memory = NULL;
}

/* ---- hand-built producers whose deleters count their calls ----------------------------- */

typedef struct {
    DLManagedTensorVersioned managed;
    int64_t shape[4];
    int64_t strides[4];
    float data[6];
    int *deletions;
} FakeVersioned;

static void delete_fake_versioned(DLManagedTensorVersioned *managed) {
    FakeVersioned *fake = managed->manager_ctx;
    (*fake->deletions)++;
    free(fake);
}

/* A valid 2x3 float32 C-order tensor holding 0..5, version 1.3; tests then break one field. */
static FakeVersioned *fake_versioned(int *deletions) {
    FakeVersioned *fake = calloc(1, sizeof *fake);
    fake->deletions = deletions;
    fake->shape[0] = 2;
    fake->shape[1] = 3;
    fake->strides[0] = 3;
    fake->strides[1] = 1;
    for (int i = 0; i < 6; i++) fake->data[i] = (float)i;
    DLManagedTensorVersioned *m = &fake->managed;
    m->version.major = DLPACK_MAJOR_VERSION;
    m->version.minor = DLPACK_MINOR_VERSION;
    m->manager_ctx = fake;
    m->deleter = delete_fake_versioned;
    m->flags = 0;
    m->dl_tensor.data = fake->data;
    m->dl_tensor.device.device_type = kDLCPU;
    m->dl_tensor.device.device_id = 0;
    m->dl_tensor.ndim = 2;
    m->dl_tensor.dtype.code = kDLFloat;
    m->dl_tensor.dtype.bits = 32;
    m->dl_tensor.dtype.lanes = 1;
    m->dl_tensor.shape = fake->shape;
    m->dl_tensor.strides = fake->strides;
    m->dl_tensor.byte_offset = 0;
    return fake;
}

typedef struct {
    DLManagedTensor managed;
    int64_t shape[2];
    int32_t data[4];
    int *deletions;
} FakeLegacy;

static void delete_fake_legacy(DLManagedTensor *managed) {
    FakeLegacy *fake = managed->manager_ctx;
    (*fake->deletions)++;
    free(fake);
}

/* A valid 1-d int32 tensor [10, 20, 30, 40] with NULL strides (as pre-1.2 producers send). */
static FakeLegacy *fake_legacy(int *deletions) {
    FakeLegacy *fake = calloc(1, sizeof *fake);
    fake->deletions = deletions;
    fake->shape[0] = 4;
    for (int i = 0; i < 4; i++) fake->data[i] = 10 * (i + 1);
    DLManagedTensor *m = &fake->managed;
    m->manager_ctx = fake;
    m->deleter = delete_fake_legacy;
    m->dl_tensor.data = fake->data;
    m->dl_tensor.device.device_type = kDLCPU;
    m->dl_tensor.ndim = 1;
    m->dl_tensor.dtype.code = kDLInt;
    m->dl_tensor.dtype.bits = 32;
    m->dl_tensor.dtype.lanes = 1;
    m->dl_tensor.shape = fake->shape;
    m->dl_tensor.strides = NULL;
    return fake;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_version(void) {
    uint32_t major = 0, minor = 0;
    CHECK_OK(dlb_version(&major, &minor));
    CHECK(major == DLPACK_MAJOR_VERSION && minor == DLPACK_MINOR_VERSION);
    CHECK(major == 1 && minor == 3);
}

static void test_dtype_names(void) {
    struct {
        const char *name;
        uint8_t code, bits;
        uint16_t lanes;
    } cases[] = {
        {"float32", kDLFloat, 32, 1},   {"bool", kDLBool, 8, 1},
        {"bfloat16", kDLBfloat, 16, 1}, {"complex64", kDLComplex, 64, 1},
        {"int8", kDLInt, 8, 1},         {"uint64", kDLUInt, 64, 1},
        {"float16", kDLFloat, 16, 1},   {"float8_e4m3fn", kDLFloat8_e4m3fn, 8, 1},
        {"float4_e2m1fn", kDLFloat4_e2m1fn, 4, 1}, {"float32x4", kDLFloat, 32, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dlb_dtype d = {0, 0, 0};
        CHECK_OK(dlb_dtype_from_name(cases[i].name, &d));
        CHECK(d.code == cases[i].code && d.bits == cases[i].bits && d.lanes == cases[i].lanes);
        char buf[DLB_DTYPE_NAME_CAPACITY];
        CHECK_OK(dlb_dtype_name(d, buf, sizeof buf));
        CHECK(strcmp(buf, cases[i].name) == 0);
    }
    dlb_dtype d = {0, 0, 0};
    CHECK_OK(dlb_dtype_from_name("double", &d));
    CHECK(d.code == kDLFloat && d.bits == 64 && d.lanes == 1);

    CHECK_FAILS(dlb_dtype_from_name("float33", &d), DLB_ERR_UNKNOWN_NAME);
    CHECK_MESSAGE_HAS("\"float33\"");

    char small[8] = "xxxxxxx";
    CHECK_FAILS(dlb_dtype_name(dtype(kDLBfloat, 16, 1), small, sizeof small),
                DLB_ERR_BUFFER_TOO_SMALL);
    CHECK(strcmp(small, "xxxxxxx") == 0);
    char exact[9];
    CHECK_OK(dlb_dtype_name(dtype(kDLBfloat, 16, 1), exact, sizeof exact));
    CHECK(strcmp(exact, "bfloat16") == 0);

    char buf[DLB_DTYPE_NAME_CAPACITY];
    CHECK_FAILS(dlb_dtype_name(dtype(99, 32, 1), buf, sizeof buf), DLB_ERR_UNKNOWN_DTYPE_CODE);
    CHECK_MESSAGE_HAS("99");
    CHECK_FAILS(dlb_dtype_name(dtype(kDLFloat, 24, 1), buf, sizeof buf),
                DLB_ERR_INVALID_DTYPE_BITS);
    CHECK_MESSAGE_HAS("24");
    CHECK_FAILS(dlb_dtype_name(dtype(kDLBool, 8, 4), buf, sizeof buf), DLB_ERR_UNSUPPORTED_LANES);
}

static void test_empty_c_order(void) {
    int64_t shape[3] = {2, 3, 4};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_empty(3, shape, dtype(kDLFloat, 32, 1), &t));

    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));
    int64_t c_strides[3] = {12, 4, 1};
    CHECK(info.ndim == 3);
    CHECK(same_dims(info.shape, shape, 3));
    CHECK(info.strides != NULL && same_dims(info.strides, c_strides, 3));
    CHECK(info.dtype.code == kDLFloat && info.dtype.bits == 32 && info.dtype.lanes == 1);
    CHECK(info.device.device_type == kDLCPU && info.device.device_id == 0);
    CHECK(info.flags == 0);
    CHECK(info.size == 24 && info.itemsize == 4 && info.nbytes == 96);
    CHECK(info.data != NULL && (uintptr_t)info.data % 64 == 0);
    bool zeroed = true;
    for (int i = 0; i < 24; i++) zeroed = zeroed && ((float *)info.data)[i] == 0.0f;
    CHECK(zeroed);

    int32_t ndim = -1;
    void *data = NULL;
    int64_t got_shape[3] = {0}, got_strides[3] = {0};
    CHECK_OK(dlb_tensor_ndim(t, &ndim));
    CHECK_OK(dlb_tensor_data(t, &data));
    CHECK_OK(dlb_tensor_shape(t, got_shape, 3));
    CHECK_OK(dlb_tensor_strides(t, got_strides, 3));
    CHECK(ndim == 3 && data == info.data);
    CHECK(same_dims(got_shape, shape, 3) && same_dims(got_strides, c_strides, 3));

    int contiguous = -1;
    CHECK_OK(dlb_tensor_is_contiguous(t, DLB_ORDER_C, &contiguous));
    CHECK(contiguous == 1);
    CHECK_OK(dlb_tensor_is_contiguous(t, DLB_ORDER_F, &contiguous));
    CHECK(contiguous == 0);
    CHECK_FAILS(dlb_tensor_is_contiguous(t, 7, &contiguous), DLB_ERR_UNKNOWN_NAME);

    /* A clone shares memory and metadata. */
    dlb_tensor *clone = NULL;
    CHECK_OK(dlb_tensor_clone(t, &clone));
    dlb_tensor_desc clone_info;
    CHECK_OK(dlb_tensor_info(clone, &clone_info));
    CHECK(clone != t && clone_info.data == info.data && clone_info.size == 24);
    dlb_tensor_free(t);
    ((float *)clone_info.data)[23] = 1.5f; /* still alive through the clone */
    CHECK(((float *)clone_info.data)[23] == 1.5f);
    dlb_tensor_free(clone);

    /* Packed sub-byte elements: 5 fp4 values take 3 bytes. */
    int64_t five = 5;
    dlb_tensor *fp4 = NULL;
    CHECK_OK(dlb_tensor_empty(1, &five, dtype(kDLFloat4_e2m1fn, 4, 1), &fp4));
    CHECK_OK(dlb_tensor_info(fp4, &info));
    CHECK(info.size == 5 && info.itemsize == 1 && info.nbytes == 3);
    dlb_tensor_free(fp4);

    int64_t bad_shape[2] = {2, -3};
    dlb_tensor *bad = (dlb_tensor *)&contiguous; /* any non-NULL garbage: must become NULL */
    CHECK_FAILS(dlb_tensor_empty(2, bad_shape, dtype(kDLFloat, 32, 1), &bad),
                DLB_ERR_NEGATIVE_DIM);
    CHECK_MESSAGE_HAS("-3");
    CHECK(bad == NULL);
    CHECK_FAILS(dlb_tensor_empty(-1, shape, dtype(kDLFloat, 32, 1), &bad),
                DLB_ERR_NDIM_OUT_OF_RANGE);
    CHECK_FAILS(dlb_tensor_empty(2000, shape, dtype(kDLFloat, 32, 1), &bad),
                DLB_ERR_NDIM_OUT_OF_RANGE);
    CHECK_MESSAGE_HAS("2000");
    int64_t huge[2] = {INT64_MAX / 2, 4};
    CHECK_FAILS(dlb_tensor_empty(2, huge, dtype(kDLFloat, 32, 1), &bad), DLB_ERR_SHAPE_OVERFLOW);
    CHECK_FAILS(dlb_tensor_empty(1, shape, dtype(kDLFloat, 12, 1), &bad),
                DLB_ERR_INVALID_DTYPE_BITS);
    CHECK(bad == NULL);
}

static void test_arange(void) {
    dlb_tensor *t = NULL;
    dlb_tensor_desc info;

    CHECK_OK(dlb_tensor_arange(5, dtype(kDLInt, 64, 1), &t));
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.ndim == 1 && info.shape[0] == 5 && info.strides[0] == 1 && info.itemsize == 8);
    const int64_t *i64 = info.data;
    CHECK(i64[0] == 0 && i64[1] == 1 && i64[2] == 2 && i64[3] == 3 && i64[4] == 4);
    dlb_tensor_free(t);

    CHECK_OK(dlb_tensor_arange(4, dtype(kDLFloat, 64, 1), &t));
    CHECK_OK(dlb_tensor_info(t, &info));
    const double *f64 = info.data;
    CHECK(f64[0] == 0.0 && f64[1] == 1.0 && f64[2] == 2.0 && f64[3] == 3.0);
    dlb_tensor_free(t);

    CHECK_OK(dlb_tensor_arange(3, dtype(kDLBool, 8, 1), &t));
    CHECK_OK(dlb_tensor_info(t, &info));
    const uint8_t *b = info.data;
    CHECK(b[0] == 0 && b[1] == 1 && b[2] == 1);
    dlb_tensor_free(t);

    CHECK_OK(dlb_tensor_arange(3, dtype(kDLFloat, 16, 1), &t));
    CHECK_OK(dlb_tensor_info(t, &info));
    const uint16_t *f16 = info.data; /* IEEE half bit patterns of 0, 1, 2 */
    CHECK(f16[0] == 0x0000 && f16[1] == 0x3C00 && f16[2] == 0x4000);
    dlb_tensor_free(t);

    CHECK_FAILS(dlb_tensor_arange(3, dtype(kDLFloat8_e4m3fn, 8, 1), &t),
                DLB_ERR_UNSUPPORTED_LAYOUT);
    CHECK_FAILS(dlb_tensor_arange(-2, dtype(kDLInt, 32, 1), &t), DLB_ERR_NEGATIVE_DIM);
    CHECK(t == NULL);
}

static void test_zero_d(void) {
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_empty(0, NULL, dtype(kDLFloat, 64, 1), &t));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.ndim == 0 && info.size == 1 && info.nbytes == 8);
    CHECK(info.shape == NULL && info.strides == NULL && info.data != NULL);
    CHECK_OK(dlb_tensor_shape(t, NULL, 0));
    CHECK_OK(dlb_tensor_strides(t, NULL, 0));
    *(double *)info.data = 2.5;

    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &m));
    CHECK(m->dl_tensor.ndim == 0 && m->dl_tensor.data == info.data);
    CHECK(*(double *)m->dl_tensor.data == 2.5);

    dlb_tensor *back = NULL;
    CHECK_OK(dlb_tensor_import_versioned(m, &back));
    dlb_tensor_desc back_info;
    CHECK_OK(dlb_tensor_info(back, &back_info));
    CHECK(back_info.ndim == 0 && back_info.size == 1 && back_info.data == info.data);

    dlb_tensor *copy = NULL;
    CHECK_OK(dlb_tensor_copy(back, DLB_ORDER_F, &copy));
    dlb_tensor_desc copy_info;
    CHECK_OK(dlb_tensor_info(copy, &copy_info));
    CHECK(copy_info.ndim == 0 && *(double *)copy_info.data == 2.5);
    CHECK(copy_info.flags == DLB_FLAG_IS_COPIED);
    dlb_tensor_free(copy);
    dlb_tensor_free(back);
    dlb_tensor_free(t);
}

static void test_empty_tensor(void) {
    int64_t shape[2] = {0, 3};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_empty(2, shape, dtype(kDLInt, 16, 1), &t));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.ndim == 2 && info.size == 0 && info.nbytes == 0 && info.data == NULL);
    CHECK(info.shape[0] == 0 && info.shape[1] == 3);
    int contiguous = 0;
    CHECK_OK(dlb_tensor_is_contiguous(t, DLB_ORDER_F, &contiguous));
    CHECK(contiguous == 1);

    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &m));
    CHECK(m->dl_tensor.data == NULL && m->dl_tensor.ndim == 2);
    CHECK(m->dl_tensor.shape[0] == 0 && m->dl_tensor.shape[1] == 3 && m->dl_tensor.strides);
    DLManagedTensor *legacy = NULL;
    CHECK_OK(dlb_tensor_export_legacy(t, 0, &legacy));
    CHECK(legacy->dl_tensor.data == NULL);

    dlb_tensor *back = NULL;
    CHECK_OK(dlb_tensor_import_versioned(m, &back));
    CHECK_OK(dlb_tensor_info(back, &info));
    CHECK(info.size == 0 && info.data == NULL);
    dlb_tensor *copy = NULL;
    CHECK_OK(dlb_tensor_copy(back, DLB_ORDER_C, &copy));
    CHECK_OK(dlb_tensor_info(copy, &info));
    CHECK(info.size == 0 && info.shape[0] == 0 && info.shape[1] == 3);
    dlb_tensor_free(copy);
    dlb_tensor_free(back);
    legacy->deleter(legacy);

    /* Caller memory may be NULL when there are no elements. */
    dlb_tensor *from_null = NULL;
    CHECK_OK(dlb_tensor_from_memory(NULL, 2, shape, NULL, dtype(kDLInt, 16, 1), CPU, 0, NULL, NULL,
                                    &from_null));
    dlb_tensor_free(from_null);
    dlb_tensor_free(t);
}

static void *free_on_thread(void *handle) {
    dlb_tensor_free(handle);
    return NULL;
}

static void test_from_memory_release(void) {
    Owner owner = {0, NULL, pthread_self()};
    double *values = malloc(6 * sizeof *values);
    for (int i = 0; i < 6; i++) values[i] = i * 0.5;
    owner.memory = values;
    int64_t shape[2] = {3, 2};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_from_memory(values, 2, shape, NULL, dtype(kDLFloat, 64, 1), CPU, 0, &owner,
                                    release_owner, &t));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.data == values); /* zero copy */
    CHECK(info.strides[0] == 2 && info.strides[1] == 1 && info.flags == 0);

    dlb_tensor *clone = NULL;
    DLManagedTensorVersioned *versioned = NULL;
    DLManagedTensor *legacy = NULL;
    CHECK_OK(dlb_tensor_clone(t, &clone));
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &versioned));
    CHECK_OK(dlb_tensor_export_legacy(t, 0, &legacy));
    CHECK(versioned->dl_tensor.data == values && legacy->dl_tensor.data == values);

    dlb_tensor_free(t);
    CHECK(owner.releases == 0);
    dlb_tensor_free(clone);
    CHECK(owner.releases == 0);
    legacy->deleter(legacy);
    CHECK(owner.releases == 0);
    CHECK(((double *)versioned->dl_tensor.data)[5] == 2.5); /* the export alone keeps it alive */
    versioned->deleter(versioned);
    CHECK(owner.releases == 1);
    CHECK(owner.memory == NULL);

    /* The last reference dropped on another thread releases there. */
    Owner remote = {0, malloc(16), pthread_self()};
    int64_t four = 4;
    CHECK_OK(dlb_tensor_from_memory(remote.memory, 1, &four, NULL, dtype(kDLInt, 32, 1), CPU,
                                    DLB_FLAG_READ_ONLY, &remote, release_owner, &t));
    pthread_t worker;
    CHECK(pthread_create(&worker, NULL, free_on_thread, t) == 0);
    CHECK(pthread_join(worker, NULL) == 0);
    CHECK(remote.releases == 1);
    CHECK(pthread_equal(remote.thread, worker));

    /* Without a callback the library never frees the memory. */
    float stack_values[4] = {1, 2, 3, 4};
    CHECK_OK(dlb_tensor_from_memory(stack_values, 1, &four, NULL, dtype(kDLFloat, 32, 1), CPU, 0,
                                    NULL, NULL, &t));
    dlb_tensor_free(t);
    CHECK(stack_values[3] == 4.0f);
}

/* On failure dlb_tensor_from_memory leaves ownership with the caller: no release call. */
static void test_from_memory_rejects_without_release(void) {
    Owner owner = {0, malloc(64), pthread_self()};
    int64_t shape[2] = {2, 4};
    int64_t negative[2] = {2, -4};
    dlb_tensor *t = (dlb_tensor *)&owner;
    dlb_dtype f32 = dtype(kDLFloat, 32, 1);

    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2, negative, NULL, f32, CPU, 0, &owner,
                                       release_owner, &t),
                DLB_ERR_NEGATIVE_DIM);
    CHECK(t == NULL);
    CHECK_FAILS(dlb_tensor_from_memory(NULL, 2, shape, NULL, f32, CPU, 0, &owner, release_owner,
                                       &t),
                DLB_ERR_NULL_DATA);
    CHECK_MESSAGE_HAS("8 elements");
    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2000, shape, NULL, f32, CPU, 0, &owner,
                                       release_owner, &t),
                DLB_ERR_NDIM_OUT_OF_RANGE);
    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2, NULL, NULL, f32, CPU, 0, &owner,
                                       release_owner, &t),
                DLB_ERR_NULL_SHAPE);
    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2, shape, NULL, dtype(42, 32, 1), CPU, 0,
                                       &owner, release_owner, &t),
                DLB_ERR_UNKNOWN_DTYPE_CODE);
    CHECK_MESSAGE_HAS("42");
    dlb_device tpu = {99, 0};
    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2, shape, NULL, f32, tpu, 0, &owner,
                                       release_owner, &t),
                DLB_ERR_UNKNOWN_DEVICE);
    int64_t wild[2] = {INT64_MAX, 1};
    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2, shape, wild, f32, CPU, 0, &owner,
                                       release_owner, &t),
                DLB_ERR_STRIDE_OVERFLOW);
    CHECK_FAILS(dlb_tensor_from_memory(owner.memory, 2, shape, NULL, f32, CPU, 0, &owner,
                                       release_owner, NULL),
                DLB_ERR_NULL_ARGUMENT);
    CHECK(owner.releases == 0);
    free(owner.memory); /* still ours */
}

static void test_versioned_round_trip(void) {
    int64_t shape[2] = {2, 3};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_empty(2, shape, dtype(kDLFloat, 32, 1), &t));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));
    float *data = info.data;
    for (int i = 0; i < 6; i++) data[i] = (float)(i + 1);

    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &m));
    CHECK(m->version.major == 1 && m->version.minor == 3);
    CHECK(m->flags == 0 && m->deleter != NULL);
    CHECK(m->dl_tensor.data == data && m->dl_tensor.byte_offset == 0);
    CHECK(m->dl_tensor.ndim == 2 && m->dl_tensor.shape[0] == 2 && m->dl_tensor.shape[1] == 3);
    CHECK(m->dl_tensor.strides[0] == 3 && m->dl_tensor.strides[1] == 1);
    CHECK(m->dl_tensor.dtype.code == kDLFloat && m->dl_tensor.dtype.bits == 32);
    CHECK(m->dl_tensor.device.device_type == kDLCPU);

    dlb_tensor *back = NULL;
    CHECK_OK(dlb_tensor_import_versioned(m, &back));
    dlb_tensor_desc back_info;
    CHECK_OK(dlb_tensor_info(back, &back_info));
    CHECK(back_info.data == data); /* zero copy */
    CHECK(same_dims(back_info.shape, info.shape, 2) && same_dims(back_info.strides, info.strides, 2));
    CHECK(back_info.flags == 0);
    ((float *)back_info.data)[4] = 42.0f; /* a write through one is seen through the other */
    CHECK(data[4] == 42.0f);
    data[0] = -1.0f;
    CHECK(((float *)back_info.data)[0] == -1.0f);

    /* Extra flags travel: a read-only export imports read-only. */
    DLManagedTensorVersioned *ro = NULL;
    CHECK_OK(dlb_tensor_export_versioned(back, DLB_FLAG_READ_ONLY, &ro));
    CHECK(ro->flags == DLPACK_FLAG_BITMASK_READ_ONLY && ro->dl_tensor.data == data);
    dlb_tensor *ro_back = NULL;
    CHECK_OK(dlb_tensor_import_versioned(ro, &ro_back));
    CHECK_OK(dlb_tensor_info(ro_back, &back_info));
    CHECK(back_info.flags == DLB_FLAG_READ_ONLY && back_info.data == data);

    dlb_tensor_free(t); /* the imports still hold the memory */
    CHECK(((float *)back_info.data)[4] == 42.0f);
    dlb_tensor_free(ro_back);
    dlb_tensor_free(back);

    /* A producer's tensor (NULL strides) imported, re-exported and released exactly once. */
    int deletions = 0;
    FakeVersioned *fake = fake_versioned(&deletions);
    fake->managed.dl_tensor.strides = NULL;
    fake->managed.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    CHECK_OK(dlb_tensor_import_versioned(&fake->managed, &t));
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.data == fake->data && info.strides[0] == 3 && info.strides[1] == 1);
    CHECK(info.flags == DLB_FLAG_IS_COPIED);
    CHECK(((float *)info.data)[5] == 5.0f);
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &m));
    dlb_tensor_free(t);
    CHECK(deletions == 0);
    m->deleter(m);
    CHECK(deletions == 1);
}

static void test_legacy_round_trip(void) {
    int64_t shape[1] = {4};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_arange(4, dtype(kDLUInt, 8, 1), &t));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));

    DLManagedTensor *m = NULL;
    CHECK_OK(dlb_tensor_export_legacy(t, 0, &m));
    CHECK(m->dl_tensor.data == info.data && m->dl_tensor.ndim == 1);
    CHECK(m->dl_tensor.shape[0] == shape[0] && m->dl_tensor.strides[0] == 1);
    CHECK(m->dl_tensor.dtype.code == kDLUInt && m->dl_tensor.dtype.bits == 8);

    dlb_tensor *back = NULL;
    CHECK_OK(dlb_tensor_import_legacy(m, DLB_FLAG_READ_ONLY, &back));
    dlb_tensor_desc back_info;
    CHECK_OK(dlb_tensor_info(back, &back_info));
    CHECK(back_info.data == info.data && back_info.size == 4);
    CHECK(back_info.flags == DLB_FLAG_READ_ONLY); /* the importer's promise is kept */
    ((uint8_t *)info.data)[3] = 200;
    CHECK(((uint8_t *)back_info.data)[3] == 200);
    dlb_tensor_free(back);
    dlb_tensor_free(t);

    /* A legacy producer with NULL strides. */
    int deletions = 0;
    FakeLegacy *fake = fake_legacy(&deletions);
    CHECK_OK(dlb_tensor_import_legacy(&fake->managed, 0, &t));
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.data == fake->data && info.strides[0] == 1 && info.flags == 0);
    CHECK(((int32_t *)info.data)[3] == 40);
    CHECK(deletions == 0);
    dlb_tensor_free(t);
    CHECK(deletions == 1);
}

static void test_read_only(void) {
    float values[3] = {1, 2, 3};
    int64_t three = 3;
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_from_memory(values, 1, &three, NULL, dtype(kDLFloat, 32, 1), CPU,
                                    DLB_FLAG_READ_ONLY, NULL, NULL, &t));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(t, &info));
    CHECK(info.flags == DLB_FLAG_READ_ONLY);

    DLManagedTensor *legacy = (DLManagedTensor *)values;
    CHECK_FAILS(dlb_tensor_export_legacy(t, 0, &legacy), DLB_ERR_READ_ONLY);
    CHECK(legacy == NULL);
    CHECK_OK(dlb_tensor_export_legacy(t, 1, &legacy));
    CHECK(legacy->dl_tensor.data == values);
    legacy->deleter(legacy);

    DLManagedTensorVersioned *versioned = NULL;
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &versioned));
    CHECK(versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    dlb_tensor *back = NULL;
    CHECK_OK(dlb_tensor_import_versioned(versioned, &back));
    CHECK_OK(dlb_tensor_info(back, &info));
    CHECK(info.flags == DLB_FLAG_READ_ONLY);
    CHECK_FAILS(dlb_tensor_export_legacy(back, 0, &legacy), DLB_ERR_READ_ONLY);

    /* A copy is ours: writable, flagged IS_COPIED only. */
    dlb_tensor *copy = NULL;
    CHECK_OK(dlb_tensor_copy(back, DLB_ORDER_C, &copy));
    CHECK_OK(dlb_tensor_info(copy, &info));
    CHECK(info.flags == DLB_FLAG_IS_COPIED && info.data != values);
    CHECK(((float *)info.data)[2] == 3.0f);
    CHECK_OK(dlb_tensor_export_legacy(copy, 0, &legacy));
    legacy->deleter(legacy);
    dlb_tensor_free(copy);
    dlb_tensor_free(back);
    dlb_tensor_free(t);
}

/* A reversed-rows, every-other-column view of a 4x6 int32 grid, copied to F and C order. */
static void test_copy_of_negative_strided_view(void) {
    int32_t grid[24];
    for (int i = 0; i < 24; i++) grid[i] = 100 + i;
    /* view[i][j] = grid[19 - 6 i + 2 j]: rows 3, 2, 1; columns 1, 3, 5. */
    int64_t shape[2] = {3, 3};
    int64_t strides[2] = {-6, 2};
    dlb_tensor *view = NULL;
    CHECK_OK(dlb_tensor_from_memory(&grid[19], 2, shape, strides, dtype(kDLInt, 32, 1), CPU, 0,
                                    NULL, NULL, &view));
    dlb_tensor_desc info;
    CHECK_OK(dlb_tensor_info(view, &info));
    CHECK(info.data == &grid[19] && info.strides[0] == -6 && info.strides[1] == 2);
    int contiguous = -1;
    CHECK_OK(dlb_tensor_is_contiguous(view, DLB_ORDER_C, &contiguous));
    CHECK(contiguous == 0);
    CHECK_OK(dlb_tensor_is_contiguous(view, DLB_ORDER_F, &contiguous));
    CHECK(contiguous == 0);

    /* The export carries the negative strides unchanged. */
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(dlb_tensor_export_versioned(view, 0, &m));
    CHECK(m->dl_tensor.data == &grid[19] && m->dl_tensor.strides[0] == -6);
    m->deleter(m);

    dlb_tensor *f = NULL;
    CHECK_OK(dlb_tensor_copy(view, DLB_ORDER_F, &f));
    dlb_tensor_desc fi;
    CHECK_OK(dlb_tensor_info(f, &fi));
    CHECK(fi.flags == DLB_FLAG_IS_COPIED);
    CHECK(fi.ndim == 2 && fi.shape[0] == 3 && fi.shape[1] == 3);
    CHECK(fi.strides[0] == 1 && fi.strides[1] == 3);
    CHECK_OK(dlb_tensor_is_contiguous(f, DLB_ORDER_F, &contiguous));
    CHECK(contiguous == 1);
    const int32_t *fd = fi.data;
    int mismatches = 0;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            if (fd[i + 3 * j] != grid[19 - 6 * i + 2 * j]) mismatches++;
        }
    }
    CHECK(mismatches == 0);
    CHECK(fd[0] == 119 && fd[1] == 113 && fd[2] == 107 && fd[3] == 121 && fd[8] == 111);

    dlb_tensor *c = NULL;
    CHECK_OK(dlb_tensor_copy(view, DLB_ORDER_C, &c));
    dlb_tensor_desc ci;
    CHECK_OK(dlb_tensor_info(c, &ci));
    CHECK(ci.strides[0] == 3 && ci.strides[1] == 1 && ci.flags == DLB_FLAG_IS_COPIED);
    const int32_t *cd = ci.data;
    mismatches = 0;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            if (cd[3 * i + j] != grid[19 - 6 * i + 2 * j]) mismatches++;
        }
    }
    CHECK(mismatches == 0);

    /* A broadcast (zero-stride) view. */
    int64_t bshape[2] = {2, 3};
    int64_t bstrides[2] = {0, 1};
    dlb_tensor *broadcast = NULL;
    CHECK_OK(dlb_tensor_from_memory(grid, 2, bshape, bstrides, dtype(kDLInt, 32, 1), CPU, 0, NULL,
                                    NULL, &broadcast));
    dlb_tensor *bc = NULL;
    CHECK_OK(dlb_tensor_copy(broadcast, DLB_ORDER_C, &bc));
    CHECK_OK(dlb_tensor_info(bc, &ci));
    cd = ci.data;
    CHECK(cd[0] == 100 && cd[2] == 102 && cd[3] == 100 && cd[5] == 102);
    dlb_tensor_free(bc);

    CHECK_FAILS(dlb_tensor_copy(view, 2, &bc), DLB_ERR_UNKNOWN_NAME);
    CHECK(bc == NULL);

    /* Device memory cannot be copied by the host. */
    dlb_device cuda = {kDLCUDA, 0};
    dlb_tensor *on_gpu = NULL;
    CHECK_OK(dlb_tensor_from_memory((void *)(uintptr_t)0x10000, 2, bshape, NULL,
                                    dtype(kDLInt, 32, 1), cuda, 0, NULL, NULL, &on_gpu));
    CHECK_OK(dlb_tensor_info(on_gpu, &info));
    CHECK(info.device.device_type == kDLCUDA && info.device.device_id == 0);
    CHECK_FAILS(dlb_tensor_copy(on_gpu, DLB_ORDER_C, &bc), DLB_ERR_NOT_ON_CPU);
    CHECK_MESSAGE_HAS("cuda");

    dlb_tensor_free(on_gpu);
    dlb_tensor_free(broadcast);
    dlb_tensor_free(c);
    dlb_tensor_free(f);
    dlb_tensor_free(view);
}

/* Imports take ownership even on failure: every rejected tensor's deleter ran exactly once. */
static void test_bad_imports(void) {
    int deletions = 0;
    dlb_tensor *t = NULL;
    FakeVersioned *fake;

#define REJECTED(setup, expected)                                                      \
    do {                                                                               \
        deletions = 0;                                                                 \
        t = (dlb_tensor *)&deletions;                                                  \
        fake = fake_versioned(&deletions);                                             \
        setup;                                                                         \
        CHECK_FAILS(dlb_tensor_import_versioned(&fake->managed, &t), expected);        \
        CHECK(deletions == 1);                                                         \
        CHECK(t == NULL);                                                              \
    } while (0)

    REJECTED(fake->managed.version.major = 2, DLB_ERR_UNSUPPORTED_VERSION);
    CHECK_MESSAGE_HAS("2.");
    /* A major-2 producer may have garbage where 1.x keeps its fields: none of it is read. */
    REJECTED((fake->managed.version.major = 2, fake->managed.dl_tensor.ndim = -5,
              fake->managed.dl_tensor.shape = NULL),
             DLB_ERR_UNSUPPORTED_VERSION);
    REJECTED(fake->shape[1] = -3, DLB_ERR_NEGATIVE_DIM);
    CHECK_MESSAGE_HAS("-3");
    REJECTED(fake->managed.dl_tensor.dtype.code = 42, DLB_ERR_UNKNOWN_DTYPE_CODE);
    CHECK_MESSAGE_HAS("42");
    REJECTED(fake->managed.dl_tensor.dtype.bits = 7, DLB_ERR_INVALID_DTYPE_BITS);
    REJECTED(fake->managed.dl_tensor.data = NULL, DLB_ERR_NULL_DATA);
    CHECK_MESSAGE_HAS("6 elements");
    REJECTED(fake->managed.dl_tensor.ndim = 2000, DLB_ERR_NDIM_OUT_OF_RANGE);
    CHECK_MESSAGE_HAS("2000");
    REJECTED(fake->managed.dl_tensor.ndim = -1, DLB_ERR_NDIM_OUT_OF_RANGE);
    REJECTED(fake->managed.dl_tensor.shape = NULL, DLB_ERR_NULL_SHAPE);
    REJECTED(fake->managed.dl_tensor.device.device_type = 99, DLB_ERR_UNKNOWN_DEVICE);
    REJECTED((fake->shape[0] = INT64_MAX, fake->shape[1] = 4), DLB_ERR_SHAPE_OVERFLOW);
    REJECTED(fake->strides[0] = INT64_MAX / 2, DLB_ERR_STRIDE_OVERFLOW);
#undef REJECTED

    /* A valid tensor with a NULL out-parameter is still consumed. */
    deletions = 0;
    fake = fake_versioned(&deletions);
    CHECK_FAILS(dlb_tensor_import_versioned(&fake->managed, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK(deletions == 1);

    CHECK_FAILS(dlb_tensor_import_versioned(NULL, &t), DLB_ERR_NULL_TENSOR);
    CHECK_FAILS(dlb_tensor_import_legacy(NULL, 0, &t), DLB_ERR_NULL_TENSOR);

    deletions = 0;
    FakeLegacy *legacy = fake_legacy(&deletions);
    legacy->shape[0] = -1;
    CHECK_FAILS(dlb_tensor_import_legacy(&legacy->managed, 0, &t), DLB_ERR_NEGATIVE_DIM);
    CHECK(deletions == 1 && t == NULL);
    deletions = 0;
    legacy = fake_legacy(&deletions);
    CHECK_FAILS(dlb_tensor_import_legacy(&legacy->managed, 0, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK(deletions == 1);
}

static void test_null_arguments(void) {
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_arange(3, dtype(kDLInt, 32, 1), &t));
    uint32_t u32;
    int32_t i32;
    int flag;
    void *ptr;
    dlb_tensor_desc info;
    dlb_dtype d;
    dlb_tensor *handle = t;
    DLManagedTensorVersioned *versioned = (DLManagedTensorVersioned *)&flag;
    DLManagedTensor *legacy = (DLManagedTensor *)&flag;

    CHECK_FAILS(dlb_version(NULL, &u32), DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("`major`");
    CHECK_FAILS(dlb_version(&u32, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("`minor`");
    CHECK_FAILS(dlb_tensor_empty(1, NULL, dtype(kDLInt, 32, 1), &handle), DLB_ERR_NULL_SHAPE);
    CHECK(handle == NULL);
    CHECK_FAILS(dlb_tensor_empty(0, NULL, dtype(kDLInt, 32, 1), NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("`out`");
    CHECK_FAILS(dlb_tensor_arange(3, dtype(kDLInt, 32, 1), NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_info(NULL, &info), DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("`t`");
    CHECK_FAILS(dlb_tensor_info(t, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_ndim(NULL, &i32), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_ndim(t, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_data(NULL, &ptr), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_data(t, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_shape(NULL, NULL, 0), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_shape(t, NULL, 8), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_strides(t, NULL, 8), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_is_contiguous(NULL, DLB_ORDER_C, &flag), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_is_contiguous(t, DLB_ORDER_C, NULL), DLB_ERR_NULL_ARGUMENT);
    handle = t;
    CHECK_FAILS(dlb_tensor_copy(NULL, DLB_ORDER_C, &handle), DLB_ERR_NULL_ARGUMENT);
    CHECK(handle == NULL);
    CHECK_FAILS(dlb_tensor_copy(t, DLB_ORDER_C, NULL), DLB_ERR_NULL_ARGUMENT);
    handle = t;
    CHECK_FAILS(dlb_tensor_clone(NULL, &handle), DLB_ERR_NULL_ARGUMENT);
    CHECK(handle == NULL);
    CHECK_FAILS(dlb_tensor_clone(t, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_export_versioned(NULL, 0, &versioned), DLB_ERR_NULL_ARGUMENT);
    CHECK(versioned == NULL);
    CHECK_FAILS(dlb_tensor_export_versioned(t, 0, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_tensor_export_legacy(NULL, 0, &legacy), DLB_ERR_NULL_ARGUMENT);
    CHECK(legacy == NULL);
    CHECK_FAILS(dlb_tensor_export_legacy(t, 0, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_dtype_from_name(NULL, &d), DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("`name`");
    CHECK_FAILS(dlb_dtype_from_name("int32", NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_dtype_name(dtype(kDLInt, 32, 1), NULL, 16), DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("`buf`");
    dlb_tensor_free(NULL);
    passed++; /* dlb_tensor_free(NULL) returned */
    dlb_tensor_free(t);
}

static void *fail_on_thread(void *message_copy) {
    dlb_tensor *t = NULL;
    int status = dlb_tensor_arange(-7, dtype(kDLInt, 32, 1), &t);
    snprintf(message_copy, 128, "%d %s", status, dlb_last_error());
    return NULL;
}

static void test_last_error_is_per_thread_and_sticky(void) {
    dlb_dtype d;
    CHECK_FAILS(dlb_dtype_from_name("no-such-type", &d), DLB_ERR_UNKNOWN_NAME);
    char before[128];
    snprintf(before, sizeof before, "%s", dlb_last_error());

    char worker_message[128] = "";
    pthread_t worker;
    CHECK(pthread_create(&worker, NULL, fail_on_thread, worker_message) == 0);
    CHECK(pthread_join(worker, NULL) == 0);
    CHECK(strstr(worker_message, "-7") != NULL);
    CHECK(atoi(worker_message) == DLB_ERR_NEGATIVE_DIM);
    CHECK(strcmp(dlb_last_error(), before) == 0); /* the worker's failure is its own */

    CHECK_OK(dlb_dtype_from_name("int32", &d)); /* success leaves the message alone */
    CHECK(strcmp(dlb_last_error(), before) == 0);
}

/* ---- deferred release through a release queue ------------------------------------------ */

static void *delete_versioned_on_thread(void *managed) {
    DLManagedTensorVersioned *m = managed;
    m->deleter(m);
    return NULL;
}

/* Drains `q` into `tokens` (capacity `cap`); returns the count, or -1 if the call failed. */
static long drain_queue(dlb_release_queue *q, uint64_t *tokens, size_t cap) {
    size_t n = cap + 1;
    if (dlb_release_queue_drain(q, tokens, cap, &n) != DLB_OK) return -1;
    return (long)n;
}

/* A consumer drops the last reference on a worker thread: the release runs no caller code
 * there, only records the token, which the owner drains later on its own thread. */
static void test_release_queue(void) {
    dlb_release_queue *q = NULL;
    CHECK_OK(dlb_release_queue_new(&q));
    uint64_t tokens[4] = {0};
    CHECK(drain_queue(q, tokens, 4) == 0);

    int32_t *memory = malloc(6 * sizeof *memory);
    for (int i = 0; i < 6; i++) memory[i] = i;
    int64_t shape[2] = {2, 3};
    int64_t strides[2] = {1, 2}; /* column-major, as a Julia array is */
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_from_memory_queued(memory, 2, shape, strides, dtype(kDLInt, 32, 1), CPU,
                                           0, q, 41, &t));
    dlb_tensor *second = NULL;
    CHECK_OK(dlb_tensor_from_memory_queued(memory, 1, shape, NULL, dtype(kDLInt, 32, 1), CPU,
                                           DLB_FLAG_READ_ONLY, q, 42, &second));
    DLManagedTensorVersioned *exported = NULL;
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &exported));
    CHECK(exported->dl_tensor.data == memory && exported->dl_tensor.strides[1] == 2);

    dlb_tensor_free(t);
    CHECK(drain_queue(q, tokens, 4) == 0); /* the export still holds the memory */
    pthread_t worker;
    CHECK(pthread_create(&worker, NULL, delete_versioned_on_thread, exported) == 0);
    CHECK(pthread_join(worker, NULL) == 0);
    dlb_tensor_free(second);
    CHECK(drain_queue(q, tokens, 1) == 1 && tokens[0] == 41); /* release order, capped */
    CHECK(drain_queue(q, tokens, 4) == 1 && tokens[0] == 42);
    CHECK(drain_queue(q, tokens, 4) == 0);                    /* each token comes out once */

    /* A rejected tensor queues nothing and leaves the memory with the caller. */
    int64_t negative[1] = {-2};
    t = (dlb_tensor *)q;
    CHECK_FAILS(dlb_tensor_from_memory_queued(memory, 1, negative, NULL, dtype(kDLInt, 32, 1),
                                              CPU, 0, q, 43, &t),
                DLB_ERR_NEGATIVE_DIM);
    CHECK(t == NULL);
    free(memory); /* ours again: drained, or never taken */
    CHECK_FAILS(dlb_tensor_from_memory_queued(NULL, 1, shape, NULL, dtype(kDLInt, 32, 1), CPU, 0,
                                              NULL, 44, &t),
                DLB_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE_HAS("queue");
    size_t n = 0;
    CHECK_FAILS(dlb_release_queue_drain(q, NULL, 4, &n), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_release_queue_drain(q, tokens, 4, NULL), DLB_ERR_NULL_ARGUMENT);
    CHECK(drain_queue(q, tokens, 4) == 0);

    /* An export may outlive the queue handle: its release is then simply dropped. */
    float values[2] = {1, 2};
    int64_t two = 2;
    CHECK_OK(dlb_tensor_from_memory_queued(values, 1, &two, NULL, dtype(kDLFloat, 32, 1), CPU, 0,
                                           q, 45, &t));
    CHECK_OK(dlb_tensor_export_versioned(t, 0, &exported));
    dlb_tensor_free(t);
    dlb_release_queue_free(q);
    dlb_release_queue_free(NULL);
    CHECK(((float *)exported->dl_tensor.data)[1] == 2.0f);
    exported->deleter(exported);
}

/* ---- shared memory ------------------------------------------------------------------------ */

/* Whether the process a handle names ("dlbridge-PID-FD-TOKEN") still holds that descriptor. */
static bool shm_held(const char *handle) {
    unsigned pid = 0;
    int fd = -1;
    char token[17] = {0}, path[64], target[256] = {0}, expected[64];
    if (sscanf(handle, "dlbridge-%u-%d-%16s", &pid, &fd, token) != 3) return false;
    snprintf(path, sizeof path, "/proc/%u/fd/%d", pid, fd);
    if (readlink(path, target, sizeof target - 1) < 0) return false;
    snprintf(expected, sizeof expected, "/memfd:dlbridge-%s", token);
    return strncmp(target, expected, strlen(expected)) == 0;
}

static void test_shared_memory(void) {
    /* a tensor allocated in shared memory, opened through a second mapping: no copy */
    int64_t shape[2] = {2, 3};
    char handle[DLB_SHM_HANDLE_CAPACITY];
    dlb_tensor *made = NULL, *opened = NULL, *readonly = NULL;
    CHECK_OK(dlb_shm_empty(2, shape, dtype(kDLInt, 32, 1), handle, sizeof handle, &made));
    dlb_tensor_desc m, o, r;
    CHECK_OK(dlb_tensor_info(made, &m));
    for (int i = 0; i < 6; i++) ((int32_t *)m.data)[i] = i * 10;
    CHECK_OK(dlb_shm_open(handle, 1, &opened));
    CHECK_OK(dlb_tensor_info(opened, &o));
    CHECK(o.data != m.data && o.ndim == 2 && same_dims(o.shape, shape, 2));
    CHECK((o.flags & DLB_FLAG_IS_COPIED) == 0);
    CHECK(((int32_t *)o.data)[5] == 50);
    ((int32_t *)o.data)[0] = -7;
    CHECK(((int32_t *)m.data)[0] == -7);
    CHECK_OK(dlb_shm_open(handle, 0, &readonly));
    CHECK_OK(dlb_tensor_info(readonly, &r));
    CHECK((r.flags & DLB_FLAG_READ_ONLY) != 0 && ((int32_t *)r.data)[0] == -7);
    CHECK(shm_held(handle));
    dlb_tensor_free(made);
    dlb_tensor_free(opened);
    CHECK(!shm_held(handle)); /* the creator's tensors are gone: so is its descriptor */
    CHECK(((int32_t *)r.data)[0] == -7); /* the reader's mapping keeps the memory */
    dlb_tensor_free(readonly);
    CHECK_FAILS(dlb_shm_open(handle, 0, &opened), DLB_ERR_SHM_NOT_FOUND);
    CHECK(opened == NULL);

    /* an export copies a strided view once; with `out` NULL the producer hands the segment over */
    dlb_tensor *src = NULL, *view = NULL;
    CHECK_OK(dlb_tensor_arange(12, dtype(kDLFloat, 64, 1), &src));
    dlb_tensor_desc s;
    CHECK_OK(dlb_tensor_info(src, &s));
    int64_t vshape[2] = {4, 3}, vstrides[2] = {1, 4};
    CHECK_OK(dlb_tensor_from_memory(s.data, 2, vshape, vstrides, s.dtype, CPU, 0, NULL, NULL, &view));
    CHECK_OK(dlb_shm_export(view, handle, sizeof handle, NULL));
    CHECK(shm_held(handle));
    dlb_tensor *back = NULL;
    CHECK_OK(dlb_shm_open(handle, 0, &back));
    dlb_tensor_desc b;
    CHECK_OK(dlb_tensor_info(back, &b));
    CHECK((b.flags & DLB_FLAG_IS_COPIED) != 0 && b.strides[0] == 3 && b.strides[1] == 1);
    bool same = true;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) same = same && ((double *)b.data)[i * 3 + j] == (double)(i + 4 * j);
    CHECK(same);
    dlb_tensor_free(back);
    CHECK_FAILS(dlb_shm_open(handle, 0, &back), DLB_ERR_SHM_NOT_FOUND);
    CHECK(!shm_held(handle));

    /* reserve keeps a segment for a later opener */
    CHECK_OK(dlb_shm_empty(0, NULL, dtype(kDLUInt, 8, 1), handle, sizeof handle, &made));
    CHECK_OK(dlb_shm_reserve(handle));
    dlb_tensor_free(made);
    CHECK(shm_held(handle));
    CHECK_OK(dlb_shm_open(handle, 1, &opened));
    dlb_tensor_free(opened);
    CHECK_FAILS(dlb_shm_open(handle, 1, &opened), DLB_ERR_SHM_NOT_FOUND);
    CHECK(!shm_held(handle));

    /* bad handles and buffers */
    char tiny[4];
    CHECK_FAILS(dlb_shm_empty(1, shape, dtype(kDLInt, 32, 1), tiny, sizeof tiny, &made), DLB_ERR_BUFFER_TOO_SMALL);
    CHECK(made == NULL);
    CHECK_FAILS(dlb_shm_open("../../etc/passwd", 0, &opened), DLB_ERR_UNKNOWN_NAME);
    CHECK_FAILS(dlb_shm_open(NULL, 0, &opened), DLB_ERR_NULL_ARGUMENT);
    CHECK_FAILS(dlb_shm_open(".", 0, &opened), DLB_ERR_UNKNOWN_NAME);
    CHECK_FAILS(dlb_shm_open("..", 0, &opened), DLB_ERR_UNKNOWN_NAME);
    CHECK_FAILS(dlb_shm_reserve("dlbridge-no-such-segment"), DLB_ERR_UNKNOWN_NAME);
    CHECK_FAILS(dlb_shm_reserve("dlbridge-999999999-3-00000000000000aa"), DLB_ERR_SHM_NOT_FOUND);
    /* a plain file behind the descriptor a handle names is no segment */
    FILE *plain = fopen("/proc/self/stat", "rb");
    char plain_handle[64];
    snprintf(plain_handle, sizeof plain_handle, "dlbridge-%d-%d-00000000000000aa", (int)getpid(), fileno(plain));
    CHECK_FAILS(dlb_shm_open(plain_handle, 0, &opened), DLB_ERR_SHM_NOT_FOUND);
    fclose(plain);
    dlb_tensor_free(view);
    dlb_tensor_free(src);
}

/* A copy the machine cannot back is refused before anything is allocated: a stride-0 view of
 * one float repeated 2^40 times (4 TiB) gives DLB_ERR_ALLOCATION_FAILED, not the OOM killer. */
static void test_copy_beyond_memory(void) {
    float one = 1.0f;
    int64_t shape[1] = {(int64_t)1 << 40}, strides[1] = {0};
    dlb_tensor *t = NULL, *copy = NULL;
    CHECK_OK(dlb_tensor_from_memory(&one, 1, shape, strides, dtype(kDLFloat, 32, 1), CPU, 0, NULL,
                                    NULL, &t));
    CHECK_FAILS(dlb_tensor_copy(t, DLB_ORDER_C, &copy), DLB_ERR_ALLOCATION_FAILED);
    CHECK_MESSAGE_HAS("4398046511104 bytes");
    CHECK(copy == NULL);
    dlb_tensor_free(t);
}

/* The one bool rule: a bool element is the byte 0 or 1. Bytes [0, 1, 2, 255] give
 * DLB_ERR_INVALID_BOOL naming element 2 and its byte; a strided view that skips the bad bytes
 * passes, and so does any byte pattern of another dtype. */
static void test_bool_bytes(void) {
    uint8_t bytes[4] = {0, 1, 2, 255};
    int64_t shape[1] = {4};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_from_memory(bytes, 1, shape, NULL, dtype(kDLBool, 8, 1), CPU, 0, NULL,
                                    NULL, &t));
    CHECK_FAILS(dlb_tensor_check_values(t), DLB_ERR_INVALID_BOOL);
    CHECK_MESSAGE_HAS("index [2]");
    CHECK_MESSAGE_HAS("0x02");
    dlb_tensor_free(t);

    int64_t two[1] = {2}, step3[1] = {3};
    CHECK_OK(dlb_tensor_from_memory(bytes, 1, two, step3, dtype(kDLBool, 8, 1), CPU, 0, NULL,
                                    NULL, &t));
    CHECK_FAILS(dlb_tensor_check_values(t), DLB_ERR_INVALID_BOOL); /* elements 0 and 255 */
    CHECK_MESSAGE_HAS("index [1]");
    CHECK_MESSAGE_HAS("0xff");
    dlb_tensor_free(t);
    CHECK_OK(dlb_tensor_from_memory(bytes, 1, two, NULL, dtype(kDLBool, 8, 1), CPU, 0, NULL, NULL,
                                    &t));
    CHECK_OK(dlb_tensor_check_values(t));
    dlb_tensor_free(t);
    CHECK_OK(dlb_tensor_from_memory(bytes, 1, shape, NULL, dtype(kDLUInt, 8, 1), CPU, 0, NULL,
                                    NULL, &t));
    CHECK_OK(dlb_tensor_check_values(t));
    dlb_tensor_free(t);
    CHECK_FAILS(dlb_tensor_check_values(NULL), DLB_ERR_NULL_ARGUMENT);
}

/* Shape and strides go into a buffer of the caller's stated capacity: a 9-d tensor and an
 * 8-slot buffer give DLB_ERR_BUFFER_TOO_SMALL, and not one slot (nor the guard after it) is
 * written; 9 slots receive all nine values. */
static void test_dims_buffer_capacity(void) {
    int64_t shape[9] = {1, 2, 1, 2, 1, 2, 1, 2, 3};
    dlb_tensor *t = NULL;
    CHECK_OK(dlb_tensor_empty(9, shape, dtype(kDLUInt, 8, 1), &t));
    int64_t buffer[10];
    for (int i = 0; i < 10; i++) buffer[i] = -7;
    CHECK_FAILS(dlb_tensor_shape(t, buffer, 8), DLB_ERR_BUFFER_TOO_SMALL);
    CHECK_MESSAGE_HAS("8 entries");
    CHECK_FAILS(dlb_tensor_strides(t, buffer, 8), DLB_ERR_BUFFER_TOO_SMALL);
    CHECK_MESSAGE_HAS("9-dimensional");
    CHECK_FAILS(dlb_tensor_shape(t, buffer, 0), DLB_ERR_BUFFER_TOO_SMALL);
    bool untouched = true;
    for (int i = 0; i < 10; i++) untouched = untouched && buffer[i] == -7;
    CHECK(untouched);

    CHECK_OK(dlb_tensor_shape(t, buffer, 9));
    CHECK(same_dims(buffer, shape, 9) && buffer[9] == -7);
    CHECK_OK(dlb_tensor_strides(t, buffer, 10));
    CHECK(buffer[8] == 1 && buffer[7] == 3 && buffer[0] == 48 && buffer[9] == -7);
    dlb_tensor_free(t);
}

/* Stream order in a process without the CUDA driver: nothing is loaded, a CUDA tensor says the
 * driver is missing, an unmarked one has nothing to wait for, other devices are refused by name.
 * tests/c/stream_order_test.c runs the same calls against a stand-in driver. */
static void test_stream_order_without_driver(void) {
    Owner owner = {0, malloc(16), pthread_self()};
    int64_t four = 4;
    const dlb_device cuda = {kDLCUDA, 0};
    dlb_tensor *t = NULL, *cpu = NULL;
    /* CUDA memory is never read on the host: the owner's block only stands for it. */
    CHECK_OK(dlb_tensor_from_memory(owner.memory, 1, &four, NULL, dtype(kDLFloat, 32, 1), cuda, 0,
                                    &owner, release_owner, &t));
    CHECK_FAILS(dlb_tensor_mark_ready(t, 1), DLB_ERR_CUDA_DRIVER_NOT_LOADED);
    CHECK_OK(dlb_tensor_order_stream(t, 1));
    CHECK_FAILS(dlb_tensor_wait_for_host(t), DLB_ERR_NOT_ON_CPU);
    CHECK_FAILS(dlb_tensor_mark_ready(NULL, 1), DLB_ERR_NULL_ARGUMENT);
    CHECK_OK(dlb_tensor_empty(1, &four, dtype(kDLFloat, 32, 1), &cpu));
    CHECK_FAILS(dlb_tensor_order_stream(cpu, 1), DLB_ERR_STREAMS_UNSUPPORTED);
    CHECK_OK(dlb_tensor_wait_for_host(cpu));
    dlb_tensor_free(cpu);
    dlb_tensor_free(t);
    CHECK(owner.releases == 1);
}

int main(void) {
    test_version();
    test_dtype_names();
    test_empty_c_order();
    test_arange();
    test_zero_d();
    test_empty_tensor();
    test_from_memory_release();
    test_from_memory_rejects_without_release();
    test_versioned_round_trip();
    test_legacy_round_trip();
    test_read_only();
    test_copy_of_negative_strided_view();
    test_bad_imports();
    test_null_arguments();
    test_dims_buffer_capacity();
    test_bool_bytes();
    test_copy_beyond_memory();
    test_last_error_is_per_thread_and_sticky();
    test_release_queue();
    test_shared_memory();
    test_stream_order_without_driver();

    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
