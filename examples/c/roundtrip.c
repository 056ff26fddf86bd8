/* A Rust-made tensor travels through the C ABI and back, and C memory travels into dlbridge.
 * Prints, at each hop, the runtime, the address, whether the data was copied, and a checksum;
 * then how many times each owner was released. Build and run it from the repository root with the
 * lines in docs/c.md (the header needs the official dlpack/dlpack.h: scripts/dlpack-include.sh
 * prints a folder that holds it); scripts/test/capi.sh and the documentation test run it. */
#include <stdio.h>
#include <stdlib.h>

#include <dlpack/dlpack.h>
#include "dlbridge.h"

#define CHECK(call)                                                               \
  do {                                                                            \
    if ((call) != DLB_OK) {                                                       \
      fprintf(stderr, "%s failed: %s\n", #call, dlb_last_error());                \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

/* Sum of the elements in logical row-major order, weighted by position (detects reordering). */
static double checksum(const dlb_tensor *t) {
  dlb_tensor *c = NULL;
  CHECK(dlb_tensor_copy(t, DLB_ORDER_C, &c));
  dlb_tensor_desc d;
  CHECK(dlb_tensor_info(c, &d));
  double sum = 0;
  for (int64_t i = 0; i < d.size; i++) {
    double v = d.dtype.bits == 64 ? ((double *)d.data)[i] : ((float *)d.data)[i];
    sum += v * (double)(i + 1);
  }
  dlb_tensor_free(c);
  return sum;
}

static void hop(const char *who, const dlb_tensor *t) {
  dlb_tensor_desc d;
  CHECK(dlb_tensor_info(t, &d));
  char name[DLB_DTYPE_NAME_CAPACITY];
  CHECK(dlb_dtype_name(d.dtype, name, sizeof name));
  printf("  %-28s %-8s shape=(", who, name);
  for (int i = 0; i < d.ndim; i++) printf(i ? ", %lld" : "%lld", (long long)d.shape[i]);
  printf(") strides=(");
  for (int i = 0; i < d.ndim; i++) printf(i ? ", %lld" : "%lld", (long long)d.strides[i]);
  printf(") data=%p copied=%-3s checksum=%.1f\n", d.data, (d.flags & DLB_FLAG_IS_COPIED) ? "yes" : "no",
         checksum(t));
}

static int c_releases = 0;
static void release_c_buffer(void *owner) {
  c_releases++;
  free(owner);
}

int main(void) {
  uint32_t major, minor;
  CHECK(dlb_version(&major, &minor));
  printf("dlbridge C ABI, DLPack %u.%u\n\n", major, minor);

  printf("1. A Rust-made tensor goes out as a DLManagedTensorVersioned and comes back\n");
  dlb_dtype f32;
  CHECK(dlb_dtype_from_name("float32", &f32));
  dlb_tensor *rust = NULL;
  CHECK(dlb_tensor_arange(12, f32, &rust));
  hop("Rust (arange)", rust);
  DLManagedTensorVersioned *wire = NULL;
  CHECK(dlb_tensor_export_versioned(rust, 0, &wire));
  printf("  %-28s version=%u.%u ndim=%d data=%p deleter=%s\n", "C sees the DLPack struct", wire->version.major,
         wire->version.minor, wire->dl_tensor.ndim, wire->dl_tensor.data, wire->deleter ? "set" : "NULL");
  dlb_tensor *back = NULL;
  CHECK(dlb_tensor_import_versioned(wire, &back));
  hop("Rust again (imported)", back);
  dlb_tensor_desc a, b;
  CHECK(dlb_tensor_info(rust, &a));
  CHECK(dlb_tensor_info(back, &b));
  ((float *)b.data)[0] = 100.0f;
  printf("  zero-copy: same address %s; a write through the import is seen by the original: %s\n\n",
         a.data == b.data ? "yes" : "NO", ((float *)a.data)[0] == 100.0f ? "yes" : "NO");

  printf("2. C memory (a 3x4 float64 matrix, viewed transposed) goes into dlbridge\n");
  double *buf = malloc(12 * sizeof(double));
  for (int i = 0; i < 12; i++) buf[i] = i;
  dlb_dtype f64;
  CHECK(dlb_dtype_from_name("float64", &f64));
  int64_t shape[2] = {4, 3}, strides[2] = {1, 4};
  dlb_device cpu = {DLB_DEVICE_TYPE_CPU, 0};
  dlb_tensor *view = NULL;
  CHECK(dlb_tensor_from_memory(buf, 2, shape, strides, f64, cpu, 0, buf, release_c_buffer, &view));
  hop("C buffer (transposed view)", view);
  int contiguous = 0;
  CHECK(dlb_tensor_is_contiguous(view, DLB_ORDER_C, &contiguous));
  dlb_tensor *compact = NULL;
  CHECK(dlb_tensor_copy(view, DLB_ORDER_C, &compact));
  hop("C-contiguous copy", compact);
  printf("  the view is C-contiguous: %s; the copy says copied=yes and keeps the checksum\n\n",
         contiguous ? "yes" : "no");

  dlb_tensor_free(compact);
  dlb_tensor_free(view);
  dlb_tensor_free(back);
  dlb_tensor_free(rust);
  printf("3. Every handle freed: the C buffer was released %d time(s) (expected 1)\n", c_releases);
  return c_releases == 1 ? 0 : 1;
}
