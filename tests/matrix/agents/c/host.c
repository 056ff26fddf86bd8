/*
 * The C agent as the host of an in-process pair: see host.h. The guest library is opened once
 * with dlopen and stays loaded.
 */
#define _POSIX_C_SOURCE 200809L

#include "host.h"
#include "guest.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A loaded guest library: the functions of guest.h. */
typedef struct {
    char name[32];
    int (*produce)(const char *, const char *);
    DLManagedTensorVersioned *(*produced)(void);
    void *(*produced_element0)(void);
    int (*check_written)(void);
    int (*check_released)(void);
    int (*consume)(const char *, const char *, DLManagedTensorVersioned *, const void *);
    int (*drop)(void);
    const char *(*message)(void);
} guest_library;

static guest_library loaded;

/* Resolves `symbol` into `*slot`; false (with a reply) if it is missing. */
static bool resolve(void *handle, const char *path, const char *symbol, void *slot) {
    void *found = dlsym(handle, symbol);
    if (found == NULL) return fail("guest library %s has no %s", path, symbol);
    memcpy(slot, &found, sizeof found); /* object pointer to function pointer (POSIX dlsym) */
    return true;
}

/* The guest library of runtime `name`, loaded on first use. */
static const guest_library *open_guest(const char *name) {
    if (strcmp(loaded.name, name) == 0) return &loaded;
    char variable[64] = "DLBRIDGE_MATRIX_GUEST_";
    size_t at = strlen(variable);
    for (const char *c = name; *c && at + 1 < sizeof variable; c++) {
        variable[at++] = (char)toupper((unsigned char)*c);
    }
    variable[at] = '\0';
    const char *path = getenv(variable);
    if (path == NULL || strlen(name) >= sizeof loaded.name) {
        unsupported("no guest library for %s ($%s is not set)", name, variable);
        return NULL;
    }
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fail("dlopen(%s) failed: %s", path, dlerror());
        return NULL;
    }
    guest_library g;
    memset(&g, 0, sizeof g);
    bool good = resolve(handle, path, "matrix_guest_produce", &g.produce) &&
                resolve(handle, path, "matrix_guest_produced", &g.produced) &&
                resolve(handle, path, "matrix_guest_produced_element0", &g.produced_element0) &&
                resolve(handle, path, "matrix_guest_check_written", &g.check_written) &&
                resolve(handle, path, "matrix_guest_check_released", &g.check_released) &&
                resolve(handle, path, "matrix_guest_consume", &g.consume) &&
                resolve(handle, path, "matrix_guest_drop", &g.drop) &&
                resolve(handle, path, "matrix_guest_message", &g.message);
    if (!good) return NULL; /* the handle stays open: a broken library is not retried */
    strcpy(g.name, name);
    loaded = g;
    return &loaded;
}

/* Sets the reply from a guest call's status: `fail GUEST: REASON` / `unsupported GUEST: ...`. */
static bool guest_reply(const guest_library *g, int status) {
    if (status == 0) return true;
    const char *message = g->message();
    const char *reason = strchr(message, ' ');
    reason = reason ? reason + 1 : message;
    if (status == 2) return unsupported("%s: %s", g->name, reason);
    return fail("%s: %s", g->name, reason);
}

/* This agent produces, the guest consumes. */
static bool host_out(const guest_library *g, const dtype_case *dt, const layout_case *lay) {
    produced p;
    DLManagedTensorVersioned *managed;
    if (!produce_export(dt, lay, &p, &managed)) return false;
    int status = g->consume(dt->name, lay->name, managed, p.element0);
    if (status != 0) {
        char reason[REPLY_CAPACITY];
        guest_reply(g, status);
        memcpy(reason, reply, sizeof reason);
        producer_check_released(&p); /* the guest freed its import */
        memcpy(reply, reason, sizeof reason);
        return false;
    }
    char answer[REPLY_CAPACITY];
    snprintf(answer, sizeof answer, "%s", g->message());
    bool good = producer_check_written(&p);
    char reason[REPLY_CAPACITY];
    memcpy(reason, reply, sizeof reason);
    status = g->drop();
    if (good && status != 0) good = guest_reply(g, status);
    if (!good) memcpy(reason, reply, sizeof reason);
    bool released = producer_check_released(&p);
    if (!good) {
        memcpy(reply, reason, sizeof reason);
        return false;
    }
    if (!released) return false;
    snprintf(reply, sizeof reply, "%s", answer);
    return true;
}

/* The guest produces, this agent consumes. */
static bool host_in(const guest_library *g, const dtype_case *dt, const layout_case *lay) {
    int status = g->produce(dt->name, lay->name);
    if (status != 0) return guest_reply(g, status);
    DLManagedTensorVersioned *managed = g->produced();
    void *producer0 = g->produced_element0();
    dlb_tensor *imported;
    if (!consume_import(dt, lay, managed, producer0, &imported)) {
        char reason[REPLY_CAPACITY];
        memcpy(reason, reply, sizeof reason);
        g->check_released(); /* ends the guest's case; our failure is the one reported */
        memcpy(reply, reason, sizeof reason);
        return false;
    }
    char answer[REPLY_CAPACITY];
    memcpy(answer, reply, sizeof answer);
    status = g->check_written();
    bool good = guest_reply(g, status);
    char reason[REPLY_CAPACITY];
    memcpy(reason, reply, sizeof reason);
    dlb_tensor_free(imported);
    status = g->check_released();
    if (!good) {
        memcpy(reply, reason, sizeof reason);
        return false;
    }
    if (!guest_reply(g, status)) return false;
    memcpy(reply, answer, sizeof answer);
    return true;
}

bool do_host(const char *guest, const char *direction, const dtype_case *dt,
             const layout_case *lay) {
    bool out = strcmp(direction, "out") == 0;
    if (!out && strcmp(direction, "in") != 0) {
        return fail("unknown direction \"%s\" (expected out or in)", direction);
    }
    const guest_library *g = open_guest(guest);
    if (g == NULL) return false;
    return out ? host_out(g, dt, lay) : host_in(g, dt, lay);
}
