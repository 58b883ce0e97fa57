/* Task and barrier records for the trace (common/trace.h): what each task
 * read and wrote, from its record and the rows it ran over. Called by the
 * executor only while tracing is on. */
#include <stdio.h>

#include "common/dtype.h"
#include "common/trace.h"
#include "device/device.h"

/* Bytes a task moves: weights of its tile, activation rows, KV rows. */
static void task_bytes(const slm_task *t, int rb, int re, uint64_t *rd, uint64_t *wr) {
    const uint64_t rows = (uint64_t)(re > rb ? re - rb : 0), f = sizeof(float);
    const uint64_t tile = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : 0);
    uint64_t r = 0, w = 0;
    switch (t->op) {
    case SLM_T_COPY_ROW: r = w = (uint64_t)t->n * f; break;
    case SLM_T_EMBED:
        r = rows * slm_row_bytes(t->wtype, (uint64_t)t->n) + rows * sizeof(int32_t);
        w = rows * (uint64_t)t->n * f;
        break;
    case SLM_T_RMSNORM:
        r = rows * (uint64_t)t->n * f + (uint64_t)(t->c > 0 ? t->c : t->n) * f;
        w = rows * (uint64_t)t->n * f;
        break;
    case SLM_T_MATMUL:
        r = tile * slm_row_bytes(t->wtype, (uint64_t)t->k) + rows * (uint64_t)t->k * f;
        if (t->flags & SLM_TF_PRE_NORM) r += (uint64_t)t->k * f;
        if ((t->flags & SLM_TF_PRE_SWIGLU) && t->ref[SLM_REF_SRC2].space) r += rows * (uint64_t)t->k * f;
        w = rows * tile * f;
        if (t->flags & SLM_TF_POST_ADD) r += rows * tile * f;
        break;
    case SLM_T_ROPE: r = w = rows * tile * (uint64_t)t->c * f; break;
    case SLM_T_ATTENTION: {
        /* q and out rows of the tile's heads; K and V rows of its KV heads up to each query's position */
        const int group = t->b > 0 && t->a >= t->b ? t->a / t->b : 1;
        const uint64_t kvh = t->n1 > t->n0 ? (uint64_t)((t->n1 - 1) / group - t->n0 / group + 1) : 0;
        const int32_t *cp = t->p[SLM_REF_SRC4];
        uint64_t kv_rows = 0;
        for (int i = rb; i < re && cp; i++) {
            const int last = cp[i];
            int first = t->window > 0 && last + 1 > t->window ? last + 1 - t->window : 0;
            if (t->flags & SLM_TF_KEY_PARTS) { /* its run of the row's KV rows */
                int b, e;
                slm_attn_part_keys(first, last, t->tiles[0], t->tiles[1], &b, &e);
                if (e > b) kv_rows += (uint64_t)(e - b);
                continue;
            }
            if (last >= first) kv_rows += (uint64_t)(last - first + 1);
        }
        const uint64_t kv_head = t->wtype == SLM_F32 ? (uint64_t)t->c * f : slm_row_bytes(t->wtype, (uint64_t)t->c);
        r = rows * tile * (uint64_t)t->c * f + kv_rows * 2 * kvh * kv_head;
        w = rows * tile * (uint64_t)t->c * f;
        break;
    }
    case SLM_T_ATTN_MERGE: /* the heads' partials of every part, the merged outputs */
        r = rows * (uint64_t)t->tiles[1] * tile * (uint64_t)(t->c + 2) * 4;
        w = rows * tile * (uint64_t)t->c * f;
        break;
    case SLM_T_ADD:
    case SLM_T_SWIGLU:
        r = 2 * rows * (uint64_t)t->n * f;
        w = rows * (uint64_t)t->n * f;
        break;
    case SLM_T_PREFETCH: r = tile * slm_row_bytes(t->wtype, (uint64_t)t->k); break;
    case SLM_T_KV_STORE:
        r = rows * (uint64_t)t->n * f;
        w = rows * slm_row_bytes(t->wtype, (uint64_t)t->n);
        break;
    case SLM_T_BIAS:
        r = rows * (uint64_t)t->n * f + (uint64_t)t->n * f;
        w = rows * (uint64_t)t->n * f;
        break;
    default: break;
    }
    *rd = r;
    *wr = w;
}

uint64_t slm_exec_trace_start(int tid) {
    if (slm_trace_thread_named()) return slm_trace_ticks();
    char name[32];
    snprintf(name, sizeof name, tid ? "exec worker %d" : "exec %d (caller)", tid);
    slm_trace_name_thread(name);
    return slm_trace_ticks();
}

uint64_t slm_exec_trace_task(const slm_exec *x, int stage, int index, int row_begin, int row_end, uint64_t t0) {
    const uint64_t t1 = slm_trace_ticks();
    slm_trace_ev *e = slm_trace_next();
    if (!e) return t1;
    const slm_task *t = &x->tasks[index];
    const int one = (t->flags & SLM_TF_ONE_ROW) != 0;
    int rb = one ? 0 : row_begin, re = one ? 1 : row_end;
    if (t->op == SLM_T_ATTENTION && t->p[SLM_REF_SRC4]) slm_attn_part_rows(t, t->p[SLM_REF_SRC4], rb, re, &rb, &re);
    e->t0 = t0;
    e->t1 = t1;
    e->name = slm_task_op_name(t->op);
    e->cat = "task";
    e->u.task.prog = x->trace_name;
    e->u.task.stage = stage;
    e->u.task.index = index;
    e->u.task.layer = t->layer;
    e->u.task.n0 = t->n0;
    e->u.task.n1 = t->n1;
    e->u.task.rows = t->op == SLM_T_PREFETCH ? 0 : re - rb;
    e->u.task.lane = slm_lane_name(t->lane);
    task_bytes(t, rb, re, &e->u.task.bytes_read, &e->u.task.bytes_written);
    e->type = SLM_TRACE_TASK;
    return t1;
}

uint64_t slm_exec_trace_barrier(const slm_exec *x, int stage, uint64_t t0) {
    const uint64_t t1 = slm_trace_ticks();
    slm_trace_ev *e = slm_trace_next();
    if (!e) return t1;
    e->t0 = t0;
    e->t1 = t1;
    e->name = "barrier";
    e->cat = "barrier";
    e->u.task.prog = x->trace_name;
    e->u.task.stage = stage;
    e->u.task.index = x->stage_first[stage + 1] - 1;
    e->u.task.layer = -1;
    e->type = SLM_TRACE_BARRIER;
    return t1;
}
