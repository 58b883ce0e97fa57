/* device/exec_ops.h — the executor's attention and mixture-of-experts
 * tasks (exec_ops.c), private to device/: exec.c runs the other kinds and
 * dispatches these. */
#ifndef SLM_EXEC_OPS_H
#define SLM_EXEC_OPS_H

#include "common/common.h"
#include "device/kernels.h"
#include "program/task.h"

/* Rows of a task: valid input rows, or row 0 for one-row tasks. */
typedef struct rows {
    int begin, end;
} rows;

static inline float *row_f(void *base, const slm_ref *r, int row) {
    return (float *)base + (size_t)row * r->ld;
}

/* ATTENTION over rr (its row or key part); cpos: the program's cache positions
 * (the rows' with sinks, whose src4 holds the sinks). */
void slm_exec_attention(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks);
/* ATTN_MERGE: the key parts' partials of each row merged. */
void slm_exec_attn_merge(const slm_task *t, rows rr);
/* MOE_ROUTE: the routing table of the valid rows. */
slm_status slm_exec_moe_route(const slm_task *t, rows rr);
/* MOE_COMBINE: the experts' down rows, weighted, into the residual. */
slm_status slm_exec_moe_combine(const slm_task *t, rows rr);

/* The hybrid recurrent layers' tasks (exec_recur.c); cpos: the program's
 * cache positions (a row's sequence); SLM_ERR_ARG for a row outside them. */
void slm_exec_slice(const slm_task *t, rows rr);
void slm_exec_sigmoid_gate(const slm_task *t, rows rr);
slm_status slm_exec_ssm_conv(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks);
void slm_exec_delta_gate(const slm_task *t, rows rr);
slm_status slm_exec_delta_net(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks);

#endif
