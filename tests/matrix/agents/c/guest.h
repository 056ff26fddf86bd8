/*
 * The guest ABI of the cross-language matrix's in-process mode (tests/matrix/PROTOCOL.md,
 * "In-process pairs"): the C functions a guest library exports so that another runtime's agent
 * (the host) can exchange a case tensor with it inside one process. The C guest (guest.c) and
 * the Rust guest (tests/matrix/agents/rust/src/guest.rs) implement it.
 *
 * Every `int` result is 0 (`ok`), 1 (`fail`) or 2 (`unsupported`); matrix_guest_message() then
 * returns the whole reply line (`ok ...`, `fail REASON`, `unsupported REASON`), valid until the
 * next call. A guest holds at most one produced case and one import at a time, and is called
 * from one thread.
 */
#ifndef DLBRIDGE_MATRIX_GUEST_H
#define DLBRIDGE_MATRIX_GUEST_H

#include <dlpack/dlpack.h>

/* The guest library exports only these functions (it is built with -fvisibility=hidden). */
#define MATRIX_GUEST_API __attribute__((visibility("default")))

/* The guest produces: builds the case tensor in its own memory and exports it. */
MATRIX_GUEST_API int matrix_guest_produce(const char *dtype, const char *layout);
/* The export of the last produce (ownership passes to the caller), or NULL once taken. */
MATRIX_GUEST_API DLManagedTensorVersioned *matrix_guest_produced(void);
/* The producer's address of logical element 0 of the last produce. */
MATRIX_GUEST_API void *matrix_guest_produced_element0(void);
/* After the host imported and wrote: the sentinel is in element 0 (unless read-only or empty)
 * and the memory was not released. */
MATRIX_GUEST_API int matrix_guest_check_written(void);
/* After the host dropped its import: the memory was released exactly once. */
MATRIX_GUEST_API int matrix_guest_check_released(void);

/* The guest consumes: imports `managed` (taken in every case), checks shape, dtype, flags,
 * every element, that element 0 is at `producer0`, writes the sentinel (unless read-only or
 * empty) and keeps the import. The reply is `ok N zero-copy`. */
MATRIX_GUEST_API int matrix_guest_consume(const char *dtype, const char *layout,
                         DLManagedTensorVersioned *managed, const void *producer0);
/* Drops the import of the last consume. */
MATRIX_GUEST_API int matrix_guest_drop(void);

/* The reply line of the last call. */
MATRIX_GUEST_API const char *matrix_guest_message(void);

#endif
