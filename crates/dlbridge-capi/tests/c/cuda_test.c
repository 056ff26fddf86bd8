/*
 * The C ABI's CUDA paths against the stand-in CUDA driver (tests/fake-cuda/libcuda.c), built and
 * run by scripts/test/capi.sh: the stand-in is loaded first, so it is the driver libdlbridge
 * finds.
 * - Stream order: a producer marks a tensor ready on its stream through one handle, a consumer
 *   orders its own stream through a clone, and the last handle gives the event and the context
 *   back.
 * - Shared device memory: a CUDA tensor exported with dlb_shm_export is opened by a forked
 *   process with dlb_shm_open, which maps the same device memory (the stand-in's is host memory,
 *   so both sides can read and write it here).
 *
 * Prints "N passed, M failed" last; exits nonzero on any failure.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlpack/dlpack.h>
#include "dlbridge.h"

#include <dlfcn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The stand-in driver's test entry points. */
static const char *(*driver_log)(void);
static void (*clear_log)(void);
static int (*live_events)(void);
static int (*retained_contexts)(void);
static void (*fail_next)(const char *, int);
static int (*live_allocations)(void);

static void load_driver(const char *path) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (handle == NULL) {
        fprintf(stderr, "cannot load the stand-in driver %s: %s\n", path, dlerror());
        exit(2);
    }
    /* POSIX: a function pointer's bytes are those of the address dlsym returns. */
    void *symbol;
#define LOOK_UP(var, name)                                                             \
    symbol = dlsym(handle, name);                                                      \
    if (symbol == NULL) exit(2);                                                       \
    memcpy(&var, &symbol, sizeof symbol)
    LOOK_UP(driver_log, "fake_cuda_log");
    LOOK_UP(clear_log, "fake_cuda_clear_log");
    LOOK_UP(live_events, "fake_cuda_live_events");
    LOOK_UP(retained_contexts, "fake_cuda_retained_contexts");
    LOOK_UP(fail_next, "fake_cuda_fail_next");
    LOOK_UP(live_allocations, "fake_cuda_live_allocations");
#undef LOOK_UP
}

static int released;

static void count_release(void *ctx) {
    (void)ctx;
    released++;
}

/* The first `n` floats of a tensor's memory (the stand-in's device memory is the host's). */
static float *floats_of(const dlb_tensor *t) {
    void *data = NULL;
    return dlb_tensor_data(t, &data) == DLB_OK ? data : NULL;
}

/* A forked consumer opens the handle, checks the values and writes one; exits 0 if all held. */
static int consume(const char *handle) {
    dlb_tensor *opened = NULL;
    if (dlb_shm_open(handle, 1, &opened) != DLB_OK) {
        fprintf(stderr, "consumer: %s\n", dlb_last_error());
        return 1;
    }
    dlb_tensor_desc desc;
    int ok = dlb_tensor_info(opened, &desc) == DLB_OK && desc.device.device_type == kDLCUDA &&
             desc.device.device_id == 0 && desc.ndim == 2 && desc.shape[0] == 2 &&
             desc.shape[1] == 3;
    float *data = floats_of(opened);
    for (int i = 0; ok && i < 6; i++) ok = data[i] == (float)i;
    if (ok) data[1] = -1.0f;
    dlb_tensor_free(opened);
    return ok && live_allocations() == 0 ? 0 : 1;
}

static void shared_device_memory(void) {
    float values[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[2] = {2, 3};
    const dlb_dtype f32 = {kDLFloat, 32, 1};
    const dlb_device cuda0 = {kDLCUDA, 0};
    dlb_tensor *t = NULL, *mine = NULL, *none = NULL;
    char handle[DLB_SHM_HANDLE_CAPACITY];
    CHECK_OK(dlb_tensor_from_memory(values, 2, shape, NULL, f32, cuda0, 0, NULL, NULL, &t));
    CHECK_OK(dlb_shm_export(t, handle, sizeof handle, &mine));
    CHECK(floats_of(mine) != values && floats_of(mine)[5] == 5.0f);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) _exit(consume(handle));
    int status = -1;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(floats_of(mine)[1] == -1.0f); /* the consumer wrote the same device memory */
    CHECK_FAILS(dlb_shm_open(handle, 0, &none), DLB_ERR_SHM_NOT_FOUND); /* opens once */
    CHECK(none == NULL);
    dlb_tensor_free(mine);
    dlb_tensor_free(t);
    CHECK(live_allocations() == 0 && retained_contexts() == 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/libcuda.so.1\n", argv[0]);
        return 2;
    }
    load_driver(argv[1]);

    int64_t four = 4;
    const dlb_dtype f32 = {kDLFloat, 32, 1};
    const dlb_device cuda1 = {kDLCUDA, 1};
    dlb_tensor *t = NULL, *clone = NULL;
    /* Device memory is never read on the host: any address stands for it. */
    CHECK_OK(dlb_tensor_from_memory((void *)0x10000, 1, &four, NULL, f32, cuda1, 0, NULL,
                                    count_release, &t));
    CHECK_OK(dlb_tensor_clone(t, &clone));

    clear_log();
    CHECK_OK(dlb_tensor_mark_ready(t, 0x1235));
    CHECK_OK(dlb_tensor_order_stream(clone, 2));
    const char *expected =
        "cuDevicePrimaryCtxRetain device=1\n"
        "cuEventCreate event=1 device=1 flags=0x2\n"
        "cuEventRecord event=1 stream=0x1235 device=1\n"
        "cuStreamWaitEvent stream=per-thread event=1 device=1\n";
    CHECK(strcmp(driver_log(), expected) == 0);
    CHECK(live_events() == 1 && retained_contexts() == 1);
    clear_log();

    /* A bare managed tensor's consumer reads on the legacy stream: exports order it first. */
    DLManagedTensorVersioned *exported = NULL;
    CHECK_OK(dlb_tensor_export_versioned(clone, 0, &exported));
    CHECK(strcmp(driver_log(), "cuStreamWaitEvent stream=legacy event=1 device=1\n") == 0);
    exported->deleter(exported);
    clear_log();

    fail_next("cuStreamWaitEvent", 400);
    CHECK_FAILS(dlb_tensor_order_stream(clone, 1), DLB_ERR_CUDA_DRIVER);
    CHECK(strstr(dlb_last_error(), "cuStreamWaitEvent") != NULL);
    CHECK(strstr(dlb_last_error(), "CUDA_ERROR_INVALID_HANDLE (400)") != NULL);

    dlb_tensor_free(t);
    CHECK(live_events() == 1 && released == 0); /* the clone keeps tensor and mark */
    dlb_tensor_free(clone);
    CHECK(live_events() == 0 && retained_contexts() == 0 && released == 1);

    shared_device_memory();

    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
