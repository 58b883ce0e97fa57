/* device/ — the executor that walks task lists, and the kernels it calls.
 * The CPU stands in for the NPU: the task walker is the management core,
 * matrix tasks are the DPU, vector tasks the SHAVE cores. */
#ifndef SLM_DEVICE_H
#define SLM_DEVICE_H

#include "compiler/compiler.h"

/* Resolve the static operand spaces (weights, constants, arena) once, and
 * build the per-I/O relocation index. Allocates (load time only). */
slm_status slm_program_prepare(slm_program *p, const void *weights, const void *consts, void *arena,
                               slm_err *err);
/* Bind I/O tensor `io` to `ptr`: patches every task operand that refers to
 * it (its relocations). Cheap enough to call per step for the few mutable
 * pointers (present.*). Allocates nothing. */
void slm_program_bind(slm_program *p, int io, void *ptr);
/* Walk the task list once. Rows to compute come from cache_position
 * (padding rows, cache_position < 0, are skipped). Allocates nothing. */
slm_status slm_program_run(const slm_program *p);

#endif
