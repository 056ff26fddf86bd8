/*
 * The C agent as the host of an in-process pair (tests/matrix/PROTOCOL.md, "In-process
 * pairs"): loads a guest library (guest.h) and exchanges one case with it in this process.
 */
#ifndef DLBRIDGE_MATRIX_C_HOST_H
#define DLBRIDGE_MATRIX_C_HOST_H

#include "cases.h"

/* `host GUEST DIRECTION DTYPE LAYOUT`: GUEST names the runtime whose guest library is at
 * $DLBRIDGE_MATRIX_GUEST_<GUEST>; DIRECTION `out` (this agent produces, the guest consumes)
 * or `in` (the guest produces, this agent consumes). Sets the reply. */
bool do_host(const char *guest, const char *direction, const dtype_case *dt,
             const layout_case *lay);

#endif
