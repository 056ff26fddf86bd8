/*
 * The case set of tests/matrix/PROTOCOL.md for the C agent and the C guest library: see
 * cases.h. Uses only the C ABI (dlbridge.h), the official dlpack.h and libc.
 */
#define _POSIX_C_SOURCE 200809L

#include "cases.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(DLB_FLAG_READ_ONLY == DLPACK_FLAG_BITMASK_READ_ONLY, "READ_ONLY");
_Static_assert(DLB_FLAG_IS_COPIED == DLPACK_FLAG_BITMASK_IS_COPIED, "IS_COPIED");

/* ---- the case set ------------------------------------------------------------------------ */

static const dtype_case DTYPES[] = {
    {"bool", KIND_BOOL, kDLBool, 8, 1},
    {"int8", KIND_INT, kDLInt, 8, 1},
    {"int16", KIND_INT, kDLInt, 16, 2},
    {"int32", KIND_INT, kDLInt, 32, 4},
    {"int64", KIND_INT, kDLInt, 64, 8},
    {"uint8", KIND_UINT, kDLUInt, 8, 1},
    {"uint16", KIND_UINT, kDLUInt, 16, 2},
    {"uint32", KIND_UINT, kDLUInt, 32, 4},
    {"uint64", KIND_UINT, kDLUInt, 64, 8},
    {"float16", KIND_FLOAT, kDLFloat, 16, 2},
    {"bfloat16", KIND_BFLOAT, kDLBfloat, 16, 2},
    {"float32", KIND_FLOAT, kDLFloat, 32, 4},
    {"float64", KIND_FLOAT, kDLFloat, 64, 8},
    {"complex64", KIND_COMPLEX, kDLComplex, 64, 8},
    {"complex128", KIND_COMPLEX, kDLComplex, 128, 16},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

static const layout_case LAYOUTS[] = {
    {"c", 2, {3, 4}, {4, 1}, 12, 0, 0},
    {"f", 2, {3, 4}, {1, 3}, 12, 0, 0},
    {"strided", 2, {3, 4}, {16, 2}, 48, 0, 0},
    {"negative", 2, {3, 4}, {4, -1}, 12, 3, 0},
    {"zero_d", 0, {0, 0}, {0, 0}, 1, 0, 0},
    {"empty", 2, {0, 3}, {3, 1}, 0, 0, 0},
    {"readonly", 2, {3, 4}, {4, 1}, 12, 0, DLB_FLAG_READ_ONLY},
};
#define N_LAYOUTS (sizeof LAYOUTS / sizeof LAYOUTS[0])

int64_t layout_size(const layout_case *lay) {
    int64_t n = 1;
    for (int32_t k = 0; k < lay->ndim; k++) n *= lay->shape[k];
    return n;
}

/* The formula's value for row-major logical index `idx`. */
value case_value(int64_t idx) {
    int64_t v = (7 * idx + 3) % 61;
    value x;
    x.b = v % 2 == 1;
    x.i = v - 30;
    x.u = (uint64_t)v;
    x.re = (double)(v - 30) * 0.5;
    x.im = (double)(30 - v) * 0.25;
    return x;
}

/* What `self` writes over element 0 holding `first`. */
value sentinel(value first) {
    value x;
    x.b = !first.b;
    x.i = 42;
    x.u = 42;
    x.re = 42.0;
    x.im = 0.0;
    return x;
}

/* ---- float16 / bfloat16 bit patterns ----------------------------------------------------- */

/* x * 2^e, by exact doubling or halving (no libm). */
static double scale2(double x, int e) {
    for (; e > 0; e--) x *= 2.0;
    for (; e < 0; e++) x /= 2.0;
    return x;
}

/* The float16 bits of `x`: exact for 0 and normal float16 values (every formula value is one). */
static uint16_t f16_bits(double x) {
    uint16_t sign = 0;
    if (x < 0) {
        sign = 0x8000;
        x = -x;
    }
    if (x == 0) return sign;
    int e = 0;
    while (x >= 2.0) {
        x /= 2.0;
        e++;
    }
    while (x < 1.0) {
        x *= 2.0;
        e--;
    }
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((x - 1.0) * 1024.0));
}

/* The value of float16 bits `h` (subnormals, infinities and NaN included). */
static double f16_value(uint16_t h) {
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    int e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e == 31) return f ? (double)NAN : sign * (double)INFINITY;
    if (e == 0) return sign * scale2(f / 1024.0, -14);
    return sign * scale2(1.0 + f / 1024.0, e - 15);
}

/* The bfloat16 bits of `x`: the top half of its float32 bits (exact for the formula values). */
static uint16_t bf16_bits(double x) {
    float f = (float)x;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)(bits >> 16);
}

static double bf16_value(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---- reading, writing and printing elements ---------------------------------------------- */

/* Writes the low `bits` bits of `u` at `p` (any alignment): two's complement narrowing through
 * the exact-width type, so little- and big-endian hosts alike. */
static void store_uint(void *p, uint64_t u, int bits) {
    if (bits == 8) {
        uint8_t w = (uint8_t)u;
        memcpy(p, &w, 1);
    } else if (bits == 16) {
        uint16_t w = (uint16_t)u;
        memcpy(p, &w, 2);
    } else if (bits == 32) {
        uint32_t w = (uint32_t)u;
        memcpy(p, &w, 4);
    } else {
        memcpy(p, &u, 8);
    }
}

/* Reads the `bits`-bit unsigned integer at `p` (any alignment). */
static uint64_t load_uint(const void *p, int bits) {
    if (bits == 8) {
        uint8_t w;
        memcpy(&w, p, 1);
        return w;
    } else if (bits == 16) {
        uint16_t w;
        memcpy(&w, p, 2);
        return w;
    } else if (bits == 32) {
        uint32_t w;
        memcpy(&w, p, 4);
        return w;
    }
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* The value of the `bits`-bit two's complement integer held in the low bits of `u`. */
static int64_t sign_extend(uint64_t u, int bits) {
    uint64_t sign = UINT64_C(1) << (bits - 1);
    return (int64_t)((u ^ sign) - sign);
}

/* Writes `x` as one element of `dt` at `p` (any alignment). */
void encode(const dtype_case *dt, void *p, value x) {
    switch (dt->kind) {
    case KIND_BOOL: {
        uint8_t b = x.b ? 1 : 0;
        memcpy(p, &b, 1);
        break;
    }
    case KIND_INT:
    case KIND_UINT:
        store_uint(p, dt->kind == KIND_INT ? (uint64_t)x.i : x.u, dt->bits);
        break;
    case KIND_FLOAT:
        if (dt->bits == 16) {
            uint16_t h = f16_bits(x.re);
            memcpy(p, &h, 2);
        } else if (dt->bits == 32) {
            float f = (float)x.re;
            memcpy(p, &f, 4);
        } else {
            memcpy(p, &x.re, 8);
        }
        break;
    case KIND_BFLOAT: {
        uint16_t h = bf16_bits(x.re);
        memcpy(p, &h, 2);
        break;
    }
    case KIND_COMPLEX:
        if (dt->bits == 64) {
            float parts[2] = {(float)x.re, (float)x.im};
            memcpy(p, parts, 8);
        } else {
            double parts[2] = {x.re, x.im};
            memcpy(p, parts, 16);
        }
        break;
    }
}

/* Reads one element of `dt` at `p` (any alignment). */
value decode(const dtype_case *dt, const void *p) {
    value x = {false, 0, 0, 0.0, 0.0};
    switch (dt->kind) {
    case KIND_BOOL: {
        uint8_t b;
        memcpy(&b, p, 1);
        x.b = b != 0;
        x.u = b;
        break;
    }
    case KIND_INT:
        x.i = sign_extend(load_uint(p, dt->bits), dt->bits);
        break;
    case KIND_UINT:
        x.u = load_uint(p, dt->bits);
        break;
    case KIND_FLOAT:
        if (dt->bits == 16) {
            uint16_t h;
            memcpy(&h, p, 2);
            x.re = f16_value(h);
        } else if (dt->bits == 32) {
            float f;
            memcpy(&f, p, 4);
            x.re = f;
        } else {
            memcpy(&x.re, p, 8);
        }
        break;
    case KIND_BFLOAT: {
        uint16_t h;
        memcpy(&h, p, 2);
        x.re = bf16_value(h);
        break;
    }
    case KIND_COMPLEX:
        if (dt->bits == 64) {
            float parts[2];
            memcpy(parts, p, 8);
            x.re = parts[0];
            x.im = parts[1];
        } else {
            double parts[2];
            memcpy(parts, p, 16);
            x.re = parts[0];
            x.im = parts[1];
        }
        break;
    }
    return x;
}

/* Whether `a` and `b` are the same element of `dt` (floats compared as numbers: -0 == 0). */
bool same_value(const dtype_case *dt, value a, value b) {
    switch (dt->kind) {
    case KIND_BOOL:
        return a.b == b.b && a.u <= 1; /* a byte other than 0 or 1 is not a bool */
    case KIND_INT:
        return a.i == b.i;
    case KIND_UINT:
        return a.u == b.u;
    case KIND_FLOAT:
    case KIND_BFLOAT:
        return a.re == b.re;
    case KIND_COMPLEX:
        return a.re == b.re && a.im == b.im;
    }
    return false;
}

/* Prints `x` as an element of `dt` into `buf`. */
const char *show(const dtype_case *dt, value x, char *buf, size_t len) {
    switch (dt->kind) {
    case KIND_BOOL:
        if (x.u > 1)
            snprintf(buf, len, "byte %" PRIu64 " (not a bool)", x.u);
        else
            snprintf(buf, len, "%s", x.b ? "true" : "false");
        break;
    case KIND_INT:
        snprintf(buf, len, "%" PRId64, x.i);
        break;
    case KIND_UINT:
        snprintf(buf, len, "%" PRIu64, x.u);
        break;
    case KIND_FLOAT:
    case KIND_BFLOAT:
        snprintf(buf, len, "%g", x.re);
        break;
    case KIND_COMPLEX:
        snprintf(buf, len, "%g%+gi", x.re, x.im);
        break;
    }
    return buf;
}

/* Address of the element with row-major logical index `idx`, given element 0's address. */
char *element_at(char *data, int32_t ndim, const int64_t *shape, const int64_t *strides,
                        int64_t idx, size_t itemsize) {
    int64_t offset = 0;
    for (int32_t k = ndim - 1; k >= 0; k--) {
        offset += (idx % shape[k]) * strides[k];
        idx /= shape[k];
    }
    return data + offset * (int64_t)itemsize;
}

/* ---- the response line ------------------------------------------------------------------- */

char reply[REPLY_CAPACITY];

static void set_reply(const char *word, const char *fmt, va_list args) {
    int n = snprintf(reply, sizeof reply, "%s ", word);
    vsnprintf(reply + n, sizeof reply - (size_t)n, fmt, args);
    for (char *c = reply; *c; c++) {
        if (*c == '\n' || *c == '\r') *c = ' ';
    }
}

/* Sets an `ok` reply; returns true. */
bool ok(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    set_reply("ok", fmt, args);
    va_end(args);
    return true;
}

/* Sets a `fail` reply; returns false. */
bool fail(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    set_reply("fail", fmt, args);
    va_end(args);
    return false;
}

bool unsupported(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    set_reply("unsupported", fmt, args);
    va_end(args);
    return false;
}

/* ---- producer memory --------------------------------------------------------------------- */

void release_owner(void *ctx) {
    owner *o = ctx;
    o->releases++;
    free(o->memory);
    o->memory = NULL;
}

/* Frees the owner record once the memory was released; otherwise the library may still call
 * back into it, so it is left allocated. */
void finish_owner(owner *o) {
    if (o->releases > 0) free(o);
}

/* Builds the case tensor of `dt` in `lay` over malloc'ed memory. On success `*element0` is the
 * producer's address of logical element 0. */
bool build(const dtype_case *dt, const layout_case *lay, owner **out_owner,
                  char **element0, dlb_tensor **out) {
    *out = NULL;
    owner *o = calloc(1, sizeof *o);
    size_t bytes = lay->buffer_len * dt->itemsize;
    if (o == NULL || (o->memory = calloc(bytes ? bytes : 1, 1)) == NULL) {
        free(o);
        return fail("cannot allocate %zu bytes for the %s %s case", bytes, dt->name, lay->name);
    }
    char *data = (char *)o->memory + lay->offset * dt->itemsize;
    int64_t n = layout_size(lay);
    for (int64_t i = 0; i < n; i++) {
        encode(dt, element_at(data, lay->ndim, lay->shape, lay->strides, i, dt->itemsize),
               case_value(i));
    }
    dlb_dtype dtype = {dt->code, dt->bits, 1};
    dlb_device cpu = {DLB_DEVICE_TYPE_CPU, 0};
    int status = dlb_tensor_from_memory(data, lay->ndim, lay->ndim ? lay->shape : NULL,
                                        lay->ndim ? lay->strides : NULL, dtype, cpu, lay->flags,
                                        o, release_owner, out);
    if (status != DLB_OK) {
        /* On failure the release is not called: the memory is still ours. */
        free(o->memory);
        free(o);
        return fail("dlb_tensor_from_memory(%s %s) returned %d: %s", dt->name, lay->name, status,
                    dlb_last_error());
    }
    *out_owner = o;
    *element0 = data;
    return true;
}

/* ---- checks of a received tensor --------------------------------------------------------- */

bool check_flag(const dlb_tensor_desc *d, const char *name, uint64_t flag, bool expected) {
    bool set = (d->flags & flag) != 0;
    if (set == expected) return true;
    return fail("%s flag is %s, expected %s (flags 0x%" PRIx64 ")", name, set ? "set" : "clear",
                expected ? "set" : "clear", d->flags);
}

static void format_dims(char *buf, size_t len, int32_t ndim, const int64_t *dims) {
    int n = snprintf(buf, len, "(");
    for (int32_t k = 0; k < ndim && (size_t)n < len; k++) {
        n += snprintf(buf + n, len - (size_t)n, k ? ", %" PRId64 : "%" PRId64, dims[k]);
    }
    if ((size_t)n < len) snprintf(buf + n, len - (size_t)n, ndim == 1 ? ",)" : ")");
}

/* Shape, dtype, device and every element; `*checked` is the number of elements checked. */
bool check_case(const dtype_case *dt, const layout_case *lay, const dlb_tensor_desc *d,
                       int64_t *checked) {
    bool same_shape = d->ndim == lay->ndim;
    for (int32_t k = 0; same_shape && k < d->ndim; k++) same_shape = d->shape[k] == lay->shape[k];
    if (!same_shape) {
        char got[256], want[64];
        if (d->ndim >= 0 && d->ndim <= DLB_MAX_NDIM)
            format_dims(got, sizeof got, d->ndim, d->shape);
        else
            snprintf(got, sizeof got, "of ndim %d", (int)d->ndim);
        format_dims(want, sizeof want, lay->ndim, lay->shape);
        return fail("shape is %s, expected %s", got, want);
    }
    if (d->dtype.code != dt->code || d->dtype.bits != dt->bits || d->dtype.lanes != 1) {
        char name[DLB_DTYPE_NAME_CAPACITY];
        if (dlb_dtype_name(d->dtype, name, sizeof name) != DLB_OK) {
            snprintf(name, sizeof name, "code %u bits %u lanes %u", d->dtype.code,
                     d->dtype.bits, d->dtype.lanes);
        }
        return fail("dtype is %s, expected %s", name, dt->name);
    }
    if (d->device.device_type != DLB_DEVICE_TYPE_CPU) {
        return fail("device type is %d, expected %d (CPU)", (int)d->device.device_type,
                    DLB_DEVICE_TYPE_CPU);
    }
    if (d->size != layout_size(lay)) {
        return fail("size is %" PRId64 ", expected %" PRId64, d->size, layout_size(lay));
    }
    for (int64_t i = 0; i < d->size; i++) {
        const char *p = element_at(d->data, d->ndim, d->shape, d->strides, i, dt->itemsize);
        value got = decode(dt, p), want = case_value(i);
        if (!same_value(dt, got, want)) {
            char g[96], w[96];
            return fail("element %" PRId64 " is %s, expected %s", i, show(dt, got, g, sizeof g),
                        show(dt, want, w, sizeof w));
        }
    }
    *checked = d->size;
    return true;
}

const dtype_case *find_dtype(const char *name) {
    for (size_t k = 0; k < N_DTYPES; k++) {
        if (strcmp(DTYPES[k].name, name) == 0) return &DTYPES[k];
    }
    return NULL;
}

const layout_case *find_layout(const char *name) {
    for (size_t k = 0; k < N_LAYOUTS; k++) {
        if (strcmp(LAYOUTS[k].name, name) == 0) return &LAYOUTS[k];
    }
    return NULL;
}

/* Parses DTYPE and LAYOUT words; sets a `fail` reply if either is unknown. */
bool parse_case(const char *dtype_word, const char *layout_word, const dtype_case **dt,
                       const layout_case **lay) {
    *dt = find_dtype(dtype_word);
    *lay = find_layout(layout_word);
    if (*dt == NULL) {
        return fail("unknown dtype \"%s\" (expected one of: bool int8 int16 int32 int64 uint8 "
                    "uint16 uint32 uint64 float16 bfloat16 float32 float64 complex64 complex128)",
                    dtype_word);
    }
    if (*lay == NULL) {
        return fail("unknown layout \"%s\" (expected one of: c f strided negative zero_d empty "
                    "readonly)",
                    layout_word);
    }
    return true;
}

/* ---- the two halves of an in-process exchange -------------------------------------------- */

bool produce_export(const dtype_case *dt, const layout_case *lay, produced *p,
                    DLManagedTensorVersioned **managed) {
    dlb_tensor *t;
    *managed = NULL;
    p->dt = dt;
    p->lay = lay;
    if (!build(dt, lay, &p->o, &p->element0, &t)) return false;
    int status = dlb_tensor_export_versioned(t, 0, managed);
    dlb_tensor_free(t); /* from here on the export alone keeps the memory alive */
    if (status != DLB_OK) {
        finish_owner(p->o);
        return fail("dlb_tensor_export_versioned returned %d: %s", status, dlb_last_error());
    }
    if (p->o->releases != 0) {
        int early = p->o->releases;
        if ((*managed)->deleter != NULL) (*managed)->deleter(*managed);
        *managed = NULL;
        finish_owner(p->o);
        return fail("producer memory released %d times while its export was alive", early);
    }
    return ok("%p", (void *)p->element0);
}

bool producer_check_written(const produced *p) {
    if (p->o->releases != 0) {
        return fail("producer memory released %d times while the import was alive",
                    p->o->releases);
    }
    if (layout_size(p->lay) > 0 && !(p->lay->flags & DLB_FLAG_READ_ONLY)) {
        value want = sentinel(case_value(0)), seen = decode(p->dt, p->element0);
        if (!same_value(p->dt, seen, want)) {
            char a[96], b[96];
            return fail("the sentinel %s was written to element 0 through the import, the "
                        "producer reads %s",
                        show(p->dt, want, a, sizeof a), show(p->dt, seen, b, sizeof b));
        }
    }
    return ok("written");
}

bool producer_check_released(produced *p) {
    int releases = p->o->releases;
    finish_owner(p->o);
    p->o = NULL;
    if (releases != 1) {
        return fail("producer memory released %d times after the import was freed, expected 1",
                    releases);
    }
    return ok("released");
}

bool consume_import(const dtype_case *dt, const layout_case *lay,
                    DLManagedTensorVersioned *managed, const void *producer0,
                    dlb_tensor **imported) {
    *imported = NULL;
    int status = dlb_tensor_import_versioned(managed, imported); /* takes `managed` always */
    if (status != DLB_OK) {
        return fail("dlb_tensor_import_versioned returned %d: %s", status, dlb_last_error());
    }
    dlb_tensor_desc d;
    int64_t n = 0;
    bool good = true;
    bool writable = !(lay->flags & DLB_FLAG_READ_ONLY);
    status = dlb_tensor_info(*imported, &d);
    if (status != DLB_OK) {
        good = fail("dlb_tensor_info returned %d: %s", status, dlb_last_error());
    }
    good = good && check_case(dt, lay, &d, &n);
    good = good && check_flag(&d, "READ_ONLY", DLB_FLAG_READ_ONLY, !writable);
    good = good && check_flag(&d, "IS_COPIED", DLB_FLAG_IS_COPIED, false);
    if (good && n > 0) {
        for (int32_t k = 0; good && k < d.ndim; k++) {
            if (d.strides[k] != lay->strides[k]) {
                good = fail("stride %d is %" PRId64 ", expected the producer's %" PRId64, (int)k,
                            d.strides[k], lay->strides[k]);
            }
        }
        if (good && d.data != producer0) {
            good = fail("imported element 0 is at %p, the producer's at %p: not zero-copy", d.data,
                        producer0);
        }
    }
    if (good && n > 0 && writable) {
        encode(dt, d.data, sentinel(decode(dt, d.data)));
    }
    if (!good) {
        dlb_tensor_free(*imported);
        *imported = NULL;
        return false;
    }
    return ok("%" PRId64 " zero-copy", n);
}
