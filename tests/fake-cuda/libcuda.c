/* A stand-in for the CUDA driver (built as libcuda.so.1) for machines without a GPU: the entry
 * points dlbridge's stream order uses, keeping the state a real driver would check (retained
 * primary contexts, each thread's current-context stack, live events) and writing each call to a
 * log that tests read back. It runs no kernels: it proves which calls are made, in which context
 * and on which stream, and that every retain and event is given back. Real GPUs test the rest.
 *
 * Its "device memory" is host memory, so that shared device memory can be tested across
 * processes: an allocation made shareable (cuMemCreate) is a memory file named "fake-cuda-vmm",
 * its shareable handle a descriptor of that file, a mapping a shared mapping of it, and copies
 * are memcpy. Like the driver's, its memory lives while any process maps it or holds a
 * descriptor of it. Each device's UUID depends on FAKE_CUDA_MACHINE (a process with another value
 * stands for another machine); FAKE_CUDA_DEVICE_ORDER=reversed numbers the two devices the other
 * way round, as CUDA_VISIBLE_DEVICES may.
 *
 * Built by the tests that use it: cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so.1
 * Loaded with RTLD_GLOBAL before dlbridge first looks for the driver, it is the driver dlbridge
 * finds (dlbridge opens "libcuda.so.1" with RTLD_NOLOAD, which matches the soname).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
  SUCCESS = 0,
  ERROR_INVALID_VALUE = 1,
  ERROR_NOT_INITIALIZED = 3,
  ERROR_INVALID_DEVICE = 101,
  ERROR_INVALID_CONTEXT = 201,
  ERROR_INVALID_HANDLE = 400,
  ERROR_NOT_SUPPORTED = 801,
};

#define DEVICES 2
#define STACK 16

struct event {
  int id;
  void *context;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;
static int initialised;
static int retained[DEVICES];
static int contexts[DEVICES];      /* a primary context's handle is &contexts[device] */
static int user_contexts[DEVICES]; /* a producer's own context: &user_contexts[device] */
static int live_events;
static int next_event_id = 1;
static int pointer_device;
static char fail_call[64];
static int fail_code;
static __thread void *current[STACK];
static __thread int depth;

static void note(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(log_text + log_len, sizeof log_text - log_len, format, args);
  va_end(args);
  if (n > 0 && log_len + (size_t)n + 1 < sizeof log_text) {
    log_len += (size_t)n;
    log_text[log_len++] = '\n';
    log_text[log_len] = '\0';
  }
}

/* The injected failure for `call`, once. */
static int injected(const char *call) {
  if (fail_code != 0 && strcmp(call, fail_call) == 0) {
    int code = fail_code;
    fail_code = 0;
    return code;
  }
  return SUCCESS;
}

static int context_device(void *context) {
  for (int d = 0; d < DEVICES; d++) {
    if (context == &contexts[d] || context == &user_contexts[d]) return d;
  }
  return -1;
}

/* The current context, or NULL, and its device, or -1. */
static void *current_context(void) { return depth > 0 ? current[depth - 1] : NULL; }
static int current_device(void) { return depth > 0 ? context_device(current[depth - 1]) : -1; }

static const char *stream_name(void *stream, char *buf, size_t size) {
  uintptr_t s = (uintptr_t)stream;
  if (s == 1) return "legacy";
  if (s == 2) return "per-thread";
  snprintf(buf, size, "%#lx", (unsigned long)s);
  return buf;
}

/* ---- the test's side ---- */

const char *fake_cuda_log(void) { return log_text; }

void fake_cuda_clear_log(void) {
  pthread_mutex_lock(&lock);
  log_len = 0;
  log_text[0] = '\0';
  next_event_id = 1; /* ids name events within one log */
  pthread_mutex_unlock(&lock);
}

int fake_cuda_live_events(void) { return live_events; }

int fake_cuda_retained_contexts(void) {
  int total = 0;
  for (int d = 0; d < DEVICES; d++) total += retained[d];
  return total;
}

int fake_cuda_context_depth(void) { return depth; }

void fake_cuda_fail_next(const char *call, int code) {
  pthread_mutex_lock(&lock);
  snprintf(fail_call, sizeof fail_call, "%s", call);
  fail_code = code;
  pthread_mutex_unlock(&lock);
}

void fake_cuda_set_pointer_device(int device) { pointer_device = device; }

/* ---- the driver's side ---- */

int cuInit(unsigned int flags) {
  if (flags != 0) return ERROR_INVALID_VALUE;
  initialised = 1;
  return SUCCESS;
}

int cuGetErrorName(int code, const char **name) {
  switch (code) {
    case SUCCESS: *name = "CUDA_SUCCESS"; return SUCCESS;
    case ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return SUCCESS;
    case ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return SUCCESS;
    case ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return SUCCESS;
    case ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return SUCCESS;
    case ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; return SUCCESS;
    case ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; return SUCCESS;
    default: *name = NULL; return ERROR_INVALID_VALUE;
  }
}

int cuDeviceGet(int *device, int ordinal) {
  if (!initialised) return ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= DEVICES) return ERROR_INVALID_DEVICE;
  *device = ordinal;
  return SUCCESS;
}

int cuDevicePrimaryCtxRetain(void **context, int device) {
  if (device < 0 || device >= DEVICES) return ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&lock);
  retained[device]++;
  note("cuDevicePrimaryCtxRetain device=%d", device);
  pthread_mutex_unlock(&lock);
  *context = &contexts[device];
  return SUCCESS;
}

int cuDevicePrimaryCtxRelease_v2(int device) {
  if (device < 0 || device >= DEVICES) return ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&lock);
  int code = retained[device] > 0 ? SUCCESS : ERROR_INVALID_CONTEXT;
  if (code == SUCCESS) retained[device]--;
  note("cuDevicePrimaryCtxRelease device=%d", device);
  pthread_mutex_unlock(&lock);
  return code;
}

int cuCtxPushCurrent_v2(void *context) {
  int device = context_device(context);
  if (device < 0) return ERROR_INVALID_CONTEXT;
  if (context == &contexts[device] && retained[device] == 0) return ERROR_INVALID_CONTEXT;
  if (depth == STACK) return ERROR_INVALID_VALUE;
  current[depth++] = context;
  return SUCCESS;
}

int cuCtxPopCurrent_v2(void **context) {
  if (depth == 0) return ERROR_INVALID_CONTEXT;
  void *top = current[--depth];
  if (context) *context = top;
  return SUCCESS;
}

int cuCtxSynchronize(void) {
  int device = current_device();
  if (device < 0) return ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  int code = injected("cuCtxSynchronize");
  note("cuCtxSynchronize device=%d", device);
  pthread_mutex_unlock(&lock);
  return code;
}

int cuEventCreate(void **event, unsigned int flags) {
  int device = current_device();
  if (device < 0) return ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  int code = injected("cuEventCreate");
  if (code == SUCCESS) {
    struct event *e = malloc(sizeof *e);
    e->id = next_event_id++;
    e->context = current_context();
    live_events++;
    *event = e;
    note("cuEventCreate event=%d device=%d flags=%#x", e->id, device, flags);
  }
  pthread_mutex_unlock(&lock);
  return code;
}

int cuEventRecord(void *event, void *stream) {
  struct event *e = event;
  int device = current_device();
  if (device < 0) return ERROR_INVALID_CONTEXT;
  if (e == NULL || e->context != current_context()) return ERROR_INVALID_HANDLE;
  char buf[32];
  pthread_mutex_lock(&lock);
  int code = injected("cuEventRecord");
  note("cuEventRecord event=%d stream=%s device=%d", e->id, stream_name(stream, buf, sizeof buf), device);
  pthread_mutex_unlock(&lock);
  return code;
}

int cuStreamWaitEvent(void *stream, void *event, unsigned int flags) {
  struct event *e = event;
  int device = current_device();
  if (device < 0) return ERROR_INVALID_CONTEXT;
  if (e == NULL || flags != 0) return ERROR_INVALID_VALUE;
  char buf[32];
  pthread_mutex_lock(&lock);
  int code = injected("cuStreamWaitEvent");
  note("cuStreamWaitEvent stream=%s event=%d device=%d", stream_name(stream, buf, sizeof buf), e->id, device);
  pthread_mutex_unlock(&lock);
  return code;
}

int cuStreamSynchronize(void *stream) {
  int device = current_device();
  if (device < 0 && ((uintptr_t)stream <= 2)) return ERROR_INVALID_CONTEXT;
  char buf[32];
  pthread_mutex_lock(&lock);
  int code = injected("cuStreamSynchronize");
  note("cuStreamSynchronize stream=%s device=%d", stream_name(stream, buf, sizeof buf), device);
  pthread_mutex_unlock(&lock);
  return code;
}

int cuEventSynchronize(void *event) {
  struct event *e = event;
  if (e == NULL) return ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  note("cuEventSynchronize event=%d", e->id);
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}

/* Destroying an event needs its context current, as a real driver may require. */
int cuEventDestroy_v2(void *event) {
  struct event *e = event;
  if (e == NULL) return ERROR_INVALID_HANDLE;
  if (e->context != current_context()) return ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  live_events--;
  note("cuEventDestroy event=%d", e->id);
  pthread_mutex_unlock(&lock);
  free(e);
  return SUCCESS;
}

int cuStreamGetCtx(void *stream, void **context) {
  uintptr_t s = (uintptr_t)stream;
  if (s <= 2 || context == NULL) return ERROR_INVALID_HANDLE;
  int device = (int)(s & 1);
  *context = (s & 0x100) ? (void *)&user_contexts[device] : (void *)&contexts[device];
  return SUCCESS;
}

int cuPointerGetAttribute(void *data, unsigned int attribute, unsigned long long address) {
  if (attribute != 9) return ERROR_INVALID_VALUE;
  if (address == 0) return ERROR_INVALID_VALUE;
  *(int *)data = pointer_device;
  return SUCCESS;
}

/* ---- shareable device memory (host memory standing in for it) ---- */

#define GRANULARITY ((size_t)2 << 20)
/* An allocation handle is its memory file's descriptor plus this (never 0). */
#define HANDLE_BASE (1ull << 32)

struct location { int type; int id; };
struct allocation_prop {
  int type;
  unsigned requested_handle_types;
  struct location location;
  void *win32;
  unsigned char flags[8];
};
struct access_desc { struct location location; int flags; };
struct memcpy2d {
  size_t src_x, src_y;
  unsigned src_memory_type;
  const void *src_host;
  unsigned long long src_device;
  void *src_array;
  size_t src_pitch;
  size_t dst_x, dst_y;
  unsigned dst_memory_type;
  void *dst_host;
  unsigned long long dst_device;
  void *dst_array;
  size_t dst_pitch;
  size_t width, height;
};

static int live_allocations;

int fake_cuda_live_allocations(void) { return live_allocations; }

/* The device a process numbers `ordinal` is, physically. */
static int physical_device(int ordinal) {
  const char *order = getenv("FAKE_CUDA_DEVICE_ORDER");
  return order && strcmp(order, "reversed") == 0 ? DEVICES - 1 - ordinal : ordinal;
}

static int valid_prop(const struct allocation_prop *prop) {
  return prop && prop->type == 1 && prop->location.type == 1 && prop->location.id >= 0 &&
         prop->location.id < DEVICES;
}

/* Whether `fd` is a descriptor of one of this stand-in's memory files. */
static int is_allocation_file(int fd) {
  char path[64], target[256];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  return strstr(target, "fake-cuda-vmm") != NULL;
}

int cuDeviceGetCount(int *count) {
  if (!initialised) return ERROR_NOT_INITIALIZED;
  *count = DEVICES;
  return SUCCESS;
}

int cuDeviceGetUuid_v2(unsigned char *uuid, int device) {
  if (device < 0 || device >= DEVICES) return ERROR_INVALID_DEVICE;
  const char *machine = getenv("FAKE_CUDA_MACHINE");
  memset(uuid, 0, 16);
  snprintf((char *)uuid, 16, "fake-%s-gpu%d", machine ? machine : "a", physical_device(device));
  return SUCCESS;
}

int cuMemGetAllocationGranularity(size_t *granularity, const struct allocation_prop *prop, int option) {
  if (!valid_prop(prop) || option < 0 || option > 1) return ERROR_INVALID_VALUE;
  *granularity = GRANULARITY;
  return SUCCESS;
}

int cuMemCreate(unsigned long long *handle, size_t size, const struct allocation_prop *prop,
                unsigned long long flags) {
  if (!valid_prop(prop) || flags != 0 || size == 0 || size % GRANULARITY != 0) return ERROR_INVALID_VALUE;
  if (prop->requested_handle_types != 1) return ERROR_NOT_SUPPORTED;
  pthread_mutex_lock(&lock);
  int code = injected("cuMemCreate");
  if (code == SUCCESS) {
    int fd = memfd_create("fake-cuda-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
      code = ERROR_INVALID_VALUE;
    } else {
      live_allocations++;
      *handle = HANDLE_BASE + (unsigned long long)fd;
      note("cuMemCreate device=%d size=%zu", prop->location.id, size);
    }
  }
  pthread_mutex_unlock(&lock);
  return code;
}

int cuMemRelease(unsigned long long handle) {
  if (handle < HANDLE_BASE) return ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  live_allocations--;
  note("cuMemRelease");
  pthread_mutex_unlock(&lock);
  close((int)(handle - HANDLE_BASE));
  return SUCCESS;
}

int cuMemExportToShareableHandle(void *shareable, unsigned long long handle, int type,
                                 unsigned long long flags) {
  if (handle < HANDLE_BASE || type != 1 || flags != 0) return ERROR_INVALID_VALUE;
  int fd = fcntl((int)(handle - HANDLE_BASE), F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return ERROR_INVALID_HANDLE;
  *(int *)shareable = fd;
  pthread_mutex_lock(&lock);
  note("cuMemExportToShareableHandle");
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}

int cuMemImportFromShareableHandle(unsigned long long *handle, void *os_handle, int type) {
  int fd = (int)(intptr_t)os_handle;
  if (type != 1) return ERROR_INVALID_VALUE;
  if (!is_allocation_file(fd)) return ERROR_INVALID_HANDLE;
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (own < 0) return ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  live_allocations++;
  note("cuMemImportFromShareableHandle");
  pthread_mutex_unlock(&lock);
  *handle = HANDLE_BASE + (unsigned long long)own;
  return SUCCESS;
}

int cuMemAddressReserve(unsigned long long *address, size_t size, size_t alignment,
                        unsigned long long fixed, unsigned long long flags) {
  if (size == 0 || size % GRANULARITY != 0 || fixed != 0 || flags != 0) return ERROR_INVALID_VALUE;
  (void)alignment;
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return ERROR_INVALID_VALUE;
  *address = (unsigned long long)(uintptr_t)p;
  return SUCCESS;
}

int cuMemAddressFree(unsigned long long address, size_t size) {
  return munmap((void *)(uintptr_t)address, size) == 0 ? SUCCESS : ERROR_INVALID_VALUE;
}

int cuMemMap(unsigned long long address, size_t size, size_t offset, unsigned long long handle,
             unsigned long long flags) {
  if (handle < HANDLE_BASE || flags != 0) return ERROR_INVALID_HANDLE;
  void *p = mmap((void *)(uintptr_t)address, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 (int)(handle - HANDLE_BASE), (off_t)offset);
  return p == MAP_FAILED ? ERROR_INVALID_VALUE : SUCCESS;
}

int cuMemUnmap(unsigned long long address, size_t size) {
  void *p = mmap((void *)(uintptr_t)address, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? ERROR_INVALID_VALUE : SUCCESS;
}

int cuMemSetAccess(unsigned long long address, size_t size, const struct access_desc *desc, size_t count) {
  if (count != 1 || desc->location.type != 1) return ERROR_INVALID_VALUE;
  int prot = desc->flags == 3 ? PROT_READ | PROT_WRITE : desc->flags == 1 ? PROT_READ : PROT_NONE;
  pthread_mutex_lock(&lock);
  note("cuMemSetAccess device=%d flags=%d", desc->location.id, desc->flags);
  pthread_mutex_unlock(&lock);
  return mprotect((void *)(uintptr_t)address, size, prot) == 0 ? SUCCESS : ERROR_INVALID_VALUE;
}

int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t bytes, void *stream) {
  int device = current_device();
  if (device < 0) return ERROR_INVALID_CONTEXT;
  char buf[32];
  memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
  pthread_mutex_lock(&lock);
  note("cuMemcpyDtoDAsync bytes=%zu stream=%s device=%d", bytes, stream_name(stream, buf, sizeof buf), device);
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}

int cuMemcpy2DAsync_v2(const struct memcpy2d *copy, void *stream) {
  int device = current_device();
  if (device < 0) return ERROR_INVALID_CONTEXT;
  if (copy->src_memory_type != 2 || copy->dst_memory_type != 2 || copy->src_pitch < copy->width ||
      copy->dst_pitch < copy->width)
    return ERROR_INVALID_VALUE;
  for (size_t row = 0; row < copy->height; row++) {
    memcpy((char *)(uintptr_t)copy->dst_device + row * copy->dst_pitch,
           (const char *)(uintptr_t)copy->src_device + row * copy->src_pitch, copy->width);
  }
  char buf[32];
  pthread_mutex_lock(&lock);
  note("cuMemcpy2DAsync width=%zu height=%zu stream=%s device=%d", copy->width, copy->height,
       stream_name(stream, buf, sizeof buf), device);
  pthread_mutex_unlock(&lock);
  return SUCCESS;
}
