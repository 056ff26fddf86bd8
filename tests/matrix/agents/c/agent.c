/*
 * The C agent of the cross-language matrix (tests/matrix/PROTOCOL.md), built by build.sh beside
 * it into target/matrix/c-agent.
 *
 * Reads one request per line on stdin and answers one line on stdout (flushed). It uses only
 * the C ABI (dlbridge.h), the official dlpack.h and libc (the case set is in cases.c):
 *
 * - producer memory is malloc'ed and wrapped with dlb_tensor_from_memory, whose release
 *   callback counts its calls and frees the memory;
 * - `self` exports with dlb_tensor_export_versioned, imports with dlb_tensor_import_versioned
 *   and checks the import with dlb_tensor_info and pointer arithmetic;
 * - `produce` hands the tensor over with dlb_shm_export(t, buf, len, NULL), `consume` opens the
 *   segment with dlb_shm_open;
 * - `host GUEST DIRECTION` loads a guest library (host.c) and exchanges in this process.
 *
 * Every failed check or library error becomes a `fail REASON` line; diagnostics go to stderr.
 */
#define _POSIX_C_SOURCE 200809L

#include "cases.h"
#include "host.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- requests ---------------------------------------------------------------------------- */
/* `self DTYPE LAYOUT`: export, import, prove zero-copy, write the sentinel, check the release. */
static bool do_self(const dtype_case *dt, const layout_case *lay) {
    produced p;
    DLManagedTensorVersioned *managed;
    if (!produce_export(dt, lay, &p, &managed)) return false;
    dlb_tensor *imported;
    if (!consume_import(dt, lay, managed, p.element0, &imported)) {
        char reason[REPLY_CAPACITY];
        memcpy(reason, reply, sizeof reason);
        producer_check_released(&p);
        return fail("%s", reason + strlen("fail "));
    }
    char answer[REPLY_CAPACITY];
    memcpy(answer, reply, sizeof answer);
    bool good = producer_check_written(&p);
    dlb_tensor_free(imported);
    good = producer_check_released(&p) && good;
    if (!good) return false;
    memcpy(reply, answer, sizeof answer);
    return true;
}

/* `produce DTYPE LAYOUT`: hand the case tensor over in a new segment, check our release. */
static bool do_produce(const dtype_case *dt, const layout_case *lay) {
    owner *o;
    char *producer0;
    dlb_tensor *t;
    if (!build(dt, lay, &o, &producer0, &t)) return false;
    char handle[DLB_SHM_HANDLE_CAPACITY];
    int status = dlb_shm_export(t, handle, sizeof handle, NULL);
    dlb_tensor_free(t);
    int releases = o->releases;
    finish_owner(o);
    if (status != DLB_OK) {
        return fail("dlb_shm_export(%s %s) returned %d: %s", dt->name, lay->name, status,
                    dlb_last_error());
    }
    if (releases != 1) {
        /* Nobody opens a segment we fail on: take the hand-over back so that it goes away. */
        dlb_tensor *back = NULL;
        if (dlb_shm_open(handle, 0, &back) == DLB_OK) dlb_tensor_free(back);
        return fail("producer memory released %d times after dlb_shm_export, expected 1",
                    releases);
    }
    return ok("%s", handle);
}

/* `consume DTYPE LAYOUT HANDLE`: open the segment and check it against the case. */
static bool do_consume(const dtype_case *dt, const layout_case *lay, const char *handle) {
    bool read_only = (lay->flags & DLB_FLAG_READ_ONLY) != 0;
    dlb_tensor *t = NULL;
    int status = dlb_shm_open(handle, !read_only, &t);
    if (status != DLB_OK) {
        return fail("dlb_shm_open(\"%s\", writable=%d) returned %d: %s", handle, !read_only,
                    status, dlb_last_error());
    }
    dlb_tensor_desc d;
    int64_t n = 0;
    bool good = true;
    status = dlb_tensor_info(t, &d);
    if (status != DLB_OK) {
        good = fail("dlb_tensor_info returned %d: %s", status, dlb_last_error());
    }
    good = good && check_case(dt, lay, &d, &n);
    good = good && check_flag(&d, "IS_COPIED", DLB_FLAG_IS_COPIED, true);
    good = good && check_flag(&d, "READ_ONLY", DLB_FLAG_READ_ONLY, read_only);
    dlb_tensor_free(t);
    return good && ok("%" PRId64, n);
}

/* ---- the request loop -------------------------------------------------------------------- */
#define MAX_WORDS 8

/* Answers one request line (the reply is left in `reply`); returns false for `quit`. */
static bool answer(char *line) {
    char *words[MAX_WORDS];
    int n = 0;
    for (char *w = line;;) {
        char *space = strchr(w, ' ');
        if (n < MAX_WORDS) words[n] = w;
        n++;
        if (space == NULL) break;
        *space = '\0';
        w = space + 1;
    }
    const dtype_case *dt;
    const layout_case *lay;
    const char *verb = words[0];
    if (strcmp(verb, "quit") == 0 && n == 1) return false;
    if (strcmp(verb, "hello") == 0 && n == 1) {
        ok("c");
    } else if (strcmp(verb, "produce") == 0 && n == 3) {
        if (parse_case(words[1], words[2], &dt, &lay)) do_produce(dt, lay);
    } else if (strcmp(verb, "self") == 0 && n == 3) {
        if (parse_case(words[1], words[2], &dt, &lay)) do_self(dt, lay);
    } else if (strcmp(verb, "host") == 0 && n == 5) {
        if (parse_case(words[3], words[4], &dt, &lay)) do_host(words[1], words[2], dt, lay);
    } else if (strcmp(verb, "consume") == 0 && n == 4) {
        if (parse_case(words[1], words[2], &dt, &lay)) do_consume(dt, lay, words[3]);
    } else if (strcmp(verb, "hello") == 0 || strcmp(verb, "quit") == 0 ||
               strcmp(verb, "produce") == 0 || strcmp(verb, "self") == 0 ||
               strcmp(verb, "consume") == 0 || strcmp(verb, "host") == 0) {
        fail("request \"%s\" has %d words, expected hello, quit, produce DTYPE LAYOUT, "
             "self DTYPE LAYOUT, consume DTYPE LAYOUT HANDLE or host GUEST DIRECTION DTYPE "
             "LAYOUT",
             verb, n);
    } else {
        fail("unknown request \"%s\" (expected hello, produce, consume, self, host or quit)", verb);
    }
    return true;
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) != -1) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (!answer(line)) break;
        if (printf("%s\n", reply) < 0 || fflush(stdout) != 0) {
            fprintf(stderr, "c agent: cannot write stdout\n");
            free(line);
            return 1;
        }
    }
    free(line);
    return 0;
}
