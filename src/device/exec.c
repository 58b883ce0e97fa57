/* The task-list executor: a plain loop over fixed-size records, like
 * SQLite's VDBE. Nothing here allocates or looks at the graph. */
#include "common/dtype.h"
#include "device/device.h"
#include "device/kernels.h"

const char *slm_task_op_name(int op) {
    switch (op) {
    case SLM_T_NOP: return "nop";
    case SLM_T_BARRIER: return "barrier";
    case SLM_T_COPY_ROW: return "copy_row";
    case SLM_T_EMBED: return "embed";
    case SLM_T_RMSNORM: return "rmsnorm";
    case SLM_T_MATMUL: return "matmul";
    case SLM_T_ROPE: return "rope";
    case SLM_T_ATTENTION: return "attention";
    case SLM_T_ADD: return "add";
    case SLM_T_SWIGLU: return "swiglu";
    default: return "?";
    }
}

slm_status slm_program_prepare(slm_program *p, const void *weights, const void *consts, void *arena,
                               slm_err *err) {
    slm_xfree(p->io_ptr);
    slm_xfree(p->io_reloc);
    p->io_ptr = slm_calloc((size_t)p->n_io + 1, sizeof(void *));
    p->io_reloc = slm_calloc((size_t)p->n_io + 1, sizeof(int32_t));
    if (!p->io_ptr || !p->io_reloc) return slm_errf(err, SLM_ERR_NOMEM, "out of memory binding %s", p->name);
    for (int i = 0, r = 0; i <= p->n_io; i++) {
        while (r < p->n_relocs && p->relocs[r].io < i) r++;
        p->io_reloc[i] = r;
    }
    p->io_cache_pos = (int32_t)slm_program_find_io(p, SLM_IO_CACHE_POSITION, -1);
    if (p->io_cache_pos < 0) return slm_errf(err, SLM_ERR_INTERNAL, "%s: no cache_position input", p->name);
    for (int i = 0; i < p->n_tasks; i++) {
        slm_task *t = &p->tasks[i];
        for (int k = 0; k < SLM_TASK_NREF; k++) {
            const slm_ref *r = &t->ref[k];
            switch (r->space) {
            case SLM_SPACE_WEIGHTS: t->p[k] = (uint8_t *)(uintptr_t)weights + r->off; break;
            case SLM_SPACE_CONST: t->p[k] = (uint8_t *)(uintptr_t)consts + r->off; break;
            case SLM_SPACE_ARENA: t->p[k] = (uint8_t *)arena + r->off; break;
            default: t->p[k] = NULL; break; /* I/O: bound later */
            }
        }
    }
    return SLM_OK;
}

void slm_program_bind(slm_program *p, int io, void *ptr) {
    p->io_ptr[io] = ptr;
    for (int r = p->io_reloc[io]; r < p->io_reloc[io + 1]; r++) {
        const slm_reloc *rl = &p->relocs[r];
        slm_task *t = &p->tasks[rl->task];
        t->p[rl->field] = (uint8_t *)ptr + t->ref[rl->field].off;
    }
}

/* Rows of a task: valid input rows, or row 0 for one-row tasks. */
typedef struct rows {
    int begin, end;
} rows;

static inline float *row_f(void *base, const slm_ref *r, int row) {
    return (float *)base + (size_t)row * r->ld;
}

static void run_matmul(const slm_task *t, rows rr, slm_dot_fn dot) {
    const uint64_t wrow = slm_row_bytes(t->wtype, (uint64_t)t->k);
    const uint8_t *W = t->p[SLM_REF_SRC1];
    for (int r = rr.begin; r < rr.end; r++) {
        int sr = (t->flags & SLM_TF_ONE_ROW) ? 0 : r;
        int dr = (t->flags & SLM_TF_DST_COMPACT) ? r - rr.begin : sr;
        const float *x = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], sr);
        float *y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], dr);
        for (int j = t->n0; j < t->n1; j++) y[j] = dot(W + (size_t)j * wrow, x, t->k);
    }
}

slm_status slm_program_run(const slm_program *p) {
    const int32_t *cpos = p->io_ptr[p->io_cache_pos];
    rows valid = {0, p->rows};
    while (valid.begin < p->rows && cpos[valid.begin] < 0) valid.begin++;
    if (valid.begin == p->rows) return SLM_ERR_ARG;
    const slm_kernel_set *ks = slm_kernels_active();

    for (const slm_task *t = p->tasks, *end = p->tasks + p->n_tasks; t < end; t++) {
        rows rr = (t->flags & SLM_TF_ONE_ROW) ? (rows){0, 1} : valid;
        switch (t->op) {
        case SLM_T_NOP:
        case SLM_T_BARRIER: /* single worker: every earlier task is done */
            break;
        case SLM_T_COPY_ROW:
            memcpy(t->p[SLM_REF_DST], row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], t->m - 1),
                   (size_t)t->n * sizeof(float));
            break;
        case SLM_T_EMBED: {
            const int32_t *ids = t->p[SLM_REF_SRC0];
            const uint64_t wrow = slm_row_bytes(t->wtype, (uint64_t)t->n);
            for (int r = rr.begin; r < rr.end; r++) {
                int id = ids[r];
                if (id < 0 || id >= t->k) return SLM_ERR_ARG;
                slm_dequantize_row(t->wtype, (const uint8_t *)t->p[SLM_REF_SRC1] + (size_t)id * wrow,
                                   row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r), t->n);
            }
            break;
        }
        case SLM_T_RMSNORM:
            for (int r = rr.begin; r < rr.end; r++)
                slm_k_rmsnorm(row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r), t->p[SLM_REF_SRC1],
                              row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r), t->n, t->f0);
            break;
        case SLM_T_MATMUL:
            run_matmul(t, rr, slm_dot_for(ks, t->wtype));
            break;
        case SLM_T_ROPE: {
            const int32_t *pos = t->p[SLM_REF_SRC1];
            const float *table = t->p[SLM_REF_SRC2];
            const int pairs = t->c / 2;
            for (int r = rr.begin; r < rr.end; r++) {
                int dr = (t->flags & SLM_TF_DST_COMPACT) ? r - rr.begin : r;
                float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], dr);
                slm_k_rope(x + (size_t)t->n0 * t->c, t->n1 - t->n0, t->c, table + (size_t)pos[r] * pairs * 2);
            }
            break;
        }
        case SLM_T_ATTENTION: {
            const int32_t *mask = t->p[SLM_REF_SRC3], *cp = t->p[SLM_REF_SRC4];
            const int group = t->a / t->b;
            for (int r = rr.begin; r < rr.end; r++) {
                const float *q = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r);
                float *o = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
                for (int h = t->n0; h < t->n1; h++) {
                    int kvh = h / group;
                    slm_k_attention_head(q + (size_t)h * t->c, (const float *)t->p[SLM_REF_SRC1] + (size_t)kvh * t->c,
                                         (const float *)t->p[SLM_REF_SRC2] + (size_t)kvh * t->c,
                                         (int)t->ref[SLM_REF_SRC1].ld, mask, cp[r], t->c, o + (size_t)h * t->c);
                }
            }
            break;
        }
        case SLM_T_ADD:
            for (int r = rr.begin; r < rr.end; r++)
                slm_k_add(row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r),
                          row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r), t->n);
            break;
        case SLM_T_SWIGLU:
            for (int r = rr.begin; r < rr.end; r++)
                slm_k_swiglu(row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r),
                             row_f(t->p[SLM_REF_SRC1], &t->ref[SLM_REF_SRC1], r),
                             row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r), t->n);
            break;
        default:
            return SLM_ERR_INTERNAL;
        }
    }
    return SLM_OK;
}
