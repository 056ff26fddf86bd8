/* A stand-in for the CUDA driver (built as libcuda.so.1) for machines without a GPU: the entry
 * points dlbridge's stream order uses, keeping the state a real driver would check (retained
 * primary contexts, each thread's current-context stack, live events) and writing each call to a
 * log that tests read back. It runs no work: it proves which calls are made, in which context and
 * on which stream, and that every retain and event is given back. Real GPUs test the rest.
 *
 * Built by the tests that use it: cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so.1
 * Loaded with RTLD_GLOBAL before dlbridge first looks for the driver, it is the driver dlbridge
 * finds (dlbridge opens "libcuda.so.1" with RTLD_NOLOAD, which matches the soname).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  SUCCESS = 0,
  ERROR_INVALID_VALUE = 1,
  ERROR_NOT_INITIALIZED = 3,
  ERROR_INVALID_DEVICE = 101,
  ERROR_INVALID_CONTEXT = 201,
  ERROR_INVALID_HANDLE = 400,
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
