/*
 * The case set of tests/matrix/PROTOCOL.md for the C agent (agent.c, host.c) and the C guest
 * library (guest.c): dtypes, layouts, the value formula, element codecs, the producer's counted
 * memory, the checks of a received tensor, and the two halves of an in-process exchange.
 *
 * Results follow one convention: a function returning bool sets the reply (`ok ...` or
 * `fail REASON`) in `reply` and returns whether it succeeded.
 */
#ifndef DLBRIDGE_MATRIX_C_CASES_H
#define DLBRIDGE_MATRIX_C_CASES_H

#include <dlpack/dlpack.h>
#include "dlbridge.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a dtype's bytes are read and written. */
typedef enum { KIND_BOOL, KIND_INT, KIND_UINT, KIND_FLOAT, KIND_BFLOAT, KIND_COMPLEX } kind_t;

/* A DTYPE of the case set. */
typedef struct {
    const char *name;
    kind_t kind;
    uint8_t code; /* DLDataTypeCode */
    uint8_t bits;
    size_t itemsize;
} dtype_case;

/* A layout: the case's shape and where the producer puts the elements (strides in elements,
 * element 0 at buffer index `offset`). */
typedef struct {
    const char *name;
    int32_t ndim;
    int64_t shape[2];
    int64_t strides[2];
    size_t buffer_len; /* elements in the producer's buffer */
    size_t offset;     /* buffer index of logical element 0 */
    uint64_t flags;
} layout_case;

/* An element's value; only the fields of its dtype's kind are meaningful. */
typedef struct {
    bool b;
    int64_t i;
    uint64_t u;
    double re, im;
} value;

/* The producer's buffer and how many times dlbridge released it. */
typedef struct {
    int releases;
    void *memory;
} owner;

/* The producer's side of an in-process exchange, between export and release. */
typedef struct {
    const dtype_case *dt;
    const layout_case *lay;
    owner *o;
    char *element0; /* the producer's address of logical element 0 */
} produced;

#define REPLY_CAPACITY 4096
/* The reply of the last request or guest call, without its newline. */
extern char reply[REPLY_CAPACITY];

int64_t layout_size(const layout_case *lay);
value case_value(int64_t idx);
value sentinel(value first);
void encode(const dtype_case *dt, void *p, value x);
value decode(const dtype_case *dt, const void *p);
bool same_value(const dtype_case *dt, value a, value b);
const char *show(const dtype_case *dt, value x, char *buf, size_t len);
char *element_at(char *data, int32_t ndim, const int64_t *shape, const int64_t *strides,
                 int64_t idx, size_t itemsize);

bool ok(const char *fmt, ...);
bool fail(const char *fmt, ...);
/* Sets an `unsupported REASON` reply; returns false. */
bool unsupported(const char *fmt, ...);

void release_owner(void *ctx);
void finish_owner(owner *o);
bool build(const dtype_case *dt, const layout_case *lay, owner **out_owner, char **element0,
           dlb_tensor **out);

bool check_flag(const dlb_tensor_desc *d, const char *name, uint64_t flag, bool expected);
bool check_case(const dtype_case *dt, const layout_case *lay, const dlb_tensor_desc *d,
                int64_t *checked);

const dtype_case *find_dtype(const char *name);
const layout_case *find_layout(const char *name);
bool parse_case(const char *dtype_word, const char *layout_word, const dtype_case **dt,
                const layout_case **lay);

/* In-process exchange, producer side: builds the case tensor and exports it as a versioned
 * managed tensor (`*managed`, owned by the caller from here on); checks nothing was released. */
bool produce_export(const dtype_case *dt, const layout_case *lay, produced *p,
                    DLManagedTensorVersioned **managed);
/* After the consumer imported and wrote: element 0 holds the sentinel (unless read-only or
 * empty) and the memory was not released yet. */
bool producer_check_written(const produced *p);
/* After the consumer dropped the import: the memory was released exactly once. Ends `p`. */
bool producer_check_released(produced *p);

/* In-process exchange, consumer side: imports `managed` (taken in every case), checks shape,
 * dtype, strides, flags, every element, that element 0 is at `producer0` (the producer's
 * address), and writes the sentinel through the import (unless read-only or empty). On success
 * `*imported` holds the import and the reply is `ok N zero-copy`; on failure the import is
 * already freed. */
bool consume_import(const dtype_case *dt, const layout_case *lay,
                    DLManagedTensorVersioned *managed, const void *producer0,
                    dlb_tensor **imported);

#endif
