/*
 * The C guest library of the matrix's in-process mode: the guest ABI of guest.h over the C
 * case set (cases.c). build.sh builds it into target/matrix/libmatrix-guest-c.so.
 */
#include "guest.h"
#include "cases.h"

#include <stddef.h>
#include <string.h>

/* The produced case between produce and check_released, and its export until taken. */
static produced producer_case;
static bool producing;
static DLManagedTensorVersioned *export_pending;
/* The import between consume and drop. */
static dlb_tensor *import_held;

/* 0, 1 or 2 from the reply's first word. */
static int status_of_reply(void) {
    if (strncmp(reply, "ok", 2) == 0) return 0;
    if (strncmp(reply, "unsupported", 11) == 0) return 2;
    return 1;
}

int matrix_guest_produce(const char *dtype, const char *layout) {
    const dtype_case *dt;
    const layout_case *lay;
    if (producing || export_pending != NULL) {
        fail("produce while the last produced case is still open");
        return 1;
    }
    if (!parse_case(dtype, layout, &dt, &lay)) return 1;
    producing = produce_export(dt, lay, &producer_case, &export_pending);
    return status_of_reply();
}

DLManagedTensorVersioned *matrix_guest_produced(void) {
    DLManagedTensorVersioned *taken = export_pending;
    export_pending = NULL;
    return taken;
}

void *matrix_guest_produced_element0(void) {
    return producing ? producer_case.element0 : NULL;
}

int matrix_guest_check_written(void) {
    if (!producing) {
        fail("check_written without a produced case");
        return 1;
    }
    producer_check_written(&producer_case);
    return status_of_reply();
}

int matrix_guest_check_released(void) {
    if (!producing) {
        fail("check_released without a produced case");
        return 1;
    }
    producing = false;
    producer_check_released(&producer_case);
    return status_of_reply();
}

int matrix_guest_consume(const char *dtype, const char *layout,
                         DLManagedTensorVersioned *managed, const void *producer0) {
    const dtype_case *dt;
    const layout_case *lay;
    if (import_held != NULL) {
        if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
        fail("consume while the last import is still held");
        return 1;
    }
    if (!parse_case(dtype, layout, &dt, &lay)) {
        if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
        return 1;
    }
    consume_import(dt, lay, managed, producer0, &import_held);
    return status_of_reply();
}

int matrix_guest_drop(void) {
    if (import_held == NULL) {
        fail("drop without an import");
        return 1;
    }
    dlb_tensor_free(import_held);
    import_held = NULL;
    ok("dropped");
    return 0;
}

const char *matrix_guest_message(void) { return reply; }
