/* The task-list executor: a plain loop over fixed-size records, like
 * SQLite's VDBE, run by a pool of threads that claim the tasks of each
 * stage and either meet at its barrier (rendezvous) or wait only for its
 * producers, pulling the next weights meanwhile (counted). Nothing here
 * allocates or looks at the graph. */
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/dtype.h"
#include "common/trace.h"
#include "device/attention.h"
#include "device/device.h"
#include "device/exec_ops.h"
#include "device/kernels.h"


slm_status slm_exec_init(slm_exec *x, const slm_program *p, const void *weights, const void *consts, void *arena,
                         slm_err *err) {
    memset(x, 0, sizeof *x);
    x->prog = p;
    int n_stages = 0;
    for (int i = 0; i < p->n_tasks; i++) n_stages += p->tasks[i].op == SLM_T_BARRIER;
    if (p->n_tasks == 0 || p->tasks[p->n_tasks - 1].op != SLM_T_BARRIER)
        return slm_errf(err, SLM_ERR_INTERNAL, "%s: task list does not end with a barrier", p->name);
    x->tasks = slm_calloc((size_t)p->n_tasks, sizeof *x->tasks);
    x->io_ptr = slm_calloc((size_t)p->n_io + 1, sizeof(void *));
    x->io_reloc = slm_calloc((size_t)p->n_io + 1, sizeof(int32_t));
    x->stage_first = slm_calloc((size_t)n_stages + 1, sizeof(int32_t));
    x->stage_next = slm_calloc((size_t)n_stages + 1, sizeof *x->stage_next);
    x->stage_prod = slm_calloc((size_t)n_stages + 1, sizeof *x->stage_prod);
    x->stage_done = slm_calloc((size_t)n_stages + 1, sizeof *x->stage_done);
    x->stage_xfer = slm_calloc((size_t)n_stages + 1, sizeof *x->stage_xfer);
    if (!x->tasks || !x->io_ptr || !x->io_reloc || !x->stage_first || !x->stage_next || !x->stage_prod ||
        !x->stage_done || !x->stage_xfer) {
        slm_exec_free(x);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory binding %s", p->name);
    }
    memcpy(x->tasks, p->tasks, (size_t)p->n_tasks * sizeof *x->tasks);
    x->trace_name = slm_trace_intern(p->name);
    for (int i = 0, r = 0; i <= p->n_io; i++) {
        while (r < p->n_relocs && p->relocs[r].io < i) r++;
        x->io_reloc[i] = r;
    }
    x->io_cache_pos = (int32_t)slm_program_find_io(p, SLM_IO_CACHE_POSITION, -1);
    /* stage table: each stage ends with its barrier */
    x->n_stages = n_stages;
    for (int i = 0, s = 0; i < p->n_tasks; i++)
        if (p->tasks[i].op == SLM_T_BARRIER) {
            uint32_t n = (uint32_t)(i - x->stage_first[s]);
            if (p->tasks[i].count != n) {
                slm_exec_free(x);
                return slm_errf(err, SLM_ERR_INTERNAL, "%s: barrier %d counts %u tasks, stage has %u", p->name, i,
                                p->tasks[i].count, n);
            }
            x->stage_prod[s] = p->tasks[i].a;
            x->stage_first[++s] = i + 1;
        }
    char why[160];
    if (slm_program_check_schedule(p, why, sizeof why)) {
        slm_exec_free(x);
        return slm_errf(err, SLM_ERR_INTERNAL, "%s: %s", p->name, why);
    }
    for (int i = 0; i < p->n_tasks; i++) {
        uint64_t b = slm_task_scratch_bytes(&p->tasks[i]);
        if (b > x->scratch_bytes) x->scratch_bytes = b;
    }
    if (x->io_cache_pos < 0) {
        slm_exec_free(x);
        return slm_errf(err, SLM_ERR_INTERNAL, "%s: no cache_position input", p->name);
    }
    for (int i = 0; i < p->n_tasks; i++) {
        slm_task *t = &x->tasks[i];
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

void slm_exec_free(slm_exec *x) {
    slm_xfree(x->tasks);
    slm_xfree(x->io_ptr);
    slm_xfree(x->io_reloc);
    slm_xfree(x->stage_first);
    slm_xfree((void *)x->stage_next);
    slm_xfree(x->stage_prod);
    slm_xfree((void *)x->stage_done);
    slm_xfree((void *)x->stage_xfer);
    memset(x, 0, sizeof *x);
}

void slm_exec_bind(slm_exec *x, int io, void *ptr) {
    const slm_program *p = x->prog;
    x->io_ptr[io] = ptr;
    for (int r = x->io_reloc[io]; r < x->io_reloc[io + 1]; r++) {
        const slm_reloc *rl = &p->relocs[r];
        slm_task *t = &x->tasks[rl->task];
        t->p[rl->field] = (uint8_t *)ptr + t->ref[rl->field].off;
    }
}


/* What the thread's scratch holds: activations quantized for a matrix
 * task. Within a stage no task writes what another reads, so the matrix
 * tasks of a stage that read the same rows (the column tiles of one matmul;
 * Q, K and V; gate and up) quantize them once per thread. Reset at every
 * barrier. */
typedef struct xmemo {
    const float *x;
    size_t ldx;
    int k, rows, cls, pre, ex;
} xmemo;

/* The scratch's activation format: 0 none (float weights), 1 the int8
 * kernels', 2 the repacked kernels' (signed codes and half-block sums). */
static int quant_class(uint32_t wtype) {
    if (wtype == SLM_F16_R16) return 0;
    if (slm_is_r16(wtype)) return 2;
    return slm_qtype_kind(wtype) >= 0 ? 1 : 0;
}

/* y[0..n) = gelu_tanh(x) (y may be x): the set's GeGLU times ones. */
static void gelu_row(const slm_kernel_set *ks, const float *x, float *y, int n) {
    float ones[256];
    for (int j = 0; j < 256; j++) ones[j] = 1.0f;
    for (int j = 0; j < n; j += 256) ks->geglu(x + j, ones, y + j, n - j < 256 ? n - j : 256);
}

/* GeGLU: gelu_tanh(gate) * up (gemma), in plain C. */
/* gpt-oss's clamped SwiGLU: min(g, L) * sigmoid(alpha * min(g, L)) * (clamp(u, -L, L) + 1). */
static void swiglu_oai(const float *g, const float *u, float *y, int n, float alpha, float limit) {
    for (int i = 0; i < n; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float v = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        y[i] = x / (1.0f + expf(-alpha * x)) * (v + 1.0f);
    }
}

/* Soft-capping: cap * tanh(x / cap). */
static void softcap(float *x, int n, float cap) {
    for (int i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

static void rope_epilogue(const slm_task *t, rows rr, float *y, size_t ldy);

/* A matrix task: output columns [n0, n1) for every row of rr, as one
 * slm_mm call (the kernel set quantizes/packs into the thread's scratch).
 * A fused input prologue (RMSNorm or SwiGLU) first writes the rows it
 * makes into the front of the scratch; the kernel's scratch follows. */
static slm_status run_matmul(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks, void *scratch,
                             xmemo *memo) {
    const int32_t *gather = NULL; /* EXPERT_GATHER: the expert's input rows */
    if (t->flags & SLM_TF_EXPERT) { /* the expert's places in the sorted (row, slot) pairs */
        const int32_t *tab = t->p[SLM_REF_SRC3];
        const size_t at = SLM_MOE_EXPERT(t->m, t->c, t->b);
        const int32_t first = tab[at], cnt = tab[at + 1];
        if (cnt == 0) return SLM_OK; /* no row picked it */
        if (first < 0 || cnt < 0 || cnt > t->m || (int64_t)first + cnt > (int64_t)t->m * t->c) return SLM_ERR_INTERNAL;
        rr = (rows){first, first + cnt};
        if (t->flags & SLM_TF_EXPERT_GATHER) {
            gather = tab + SLM_MOE_ROWLIST(t->m, t->c) + first;
            for (int i = 0; i < cnt; i++)
                if (gather[i] < 0 || gather[i] >= t->m) return SLM_ERR_INTERNAL;
        }
    }
    const int one = (t->flags & SLM_TF_ONE_ROW) != 0;
    const int sr0 = one || (t->flags & SLM_TF_SRC_COMPACT) ? 0 : rr.begin;
    const int cp_dst = (t->flags & SLM_TF_DST_CPOS) != 0;
    const int dr0 = (t->flags & SLM_TF_DST_COMPACT) || cp_dst ? 0 : (one ? 0 : rr.begin);
    slm_mm mm = {
        .w = t->p[SLM_REF_SRC1],
        .wrow = slm_row_bytes(t->wtype, (uint64_t)t->k),
        .wtype = t->wtype,
        .k = t->k,
        .n0 = t->n0,
        .n1 = t->n1,
        .rows = rr.end - rr.begin,
        .x = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], gather ? 0 : sr0),
        .ldx = t->ref[SLM_REF_SRC0].ld,
        .y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], dr0),
        .ldy = t->ref[SLM_REF_DST].ld,
        .scratch = scratch,
        .pf = t->a,
        .tiles = {t->tiles[0], t->tiles[1], t->tiles[2]},
    };
    if (mm.rows <= 0) return SLM_OK;
    const int pre = t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU | SLM_TF_EXPERT_GATHER),
              add = (t->flags & SLM_TF_POST_ADD) != 0;
    /* the pool sizes scratch for them; a row-scattered product goes through it like an added one */
    if ((pre || add || cp_dst) && !scratch) return SLM_ERR_INTERNAL;
    float *acc_y = mm.y; /* POST_ADD: the residual rows the product is added into */
    const size_t acc_ld = mm.ldy;
    const int cls = quant_class(t->wtype);
    const float *x0 = mm.x;
    int hit = 0;
    if (memo && scratch && (cls || pre)) {
        const int ex = gather ? t->b : -1; /* gathered rows: the expert's own */
        hit = memo->x == x0 && memo->ldx == mm.ldx && memo->k == mm.k && memo->rows == mm.rows && memo->cls == cls &&
              memo->pre == pre && memo->ex == ex;
        *memo = (xmemo){x0, mm.ldx, mm.k, mm.rows, cls, pre, ex};
    }
    const slm_mm_scratch lay = pre || add || cp_dst ? slm_task_scratch_layout(t, mm.rows) : (slm_mm_scratch){0, 0, 0};
    if (pre) {
        float *px = scratch;
        if (!hit)
            for (int i = 0; i < mm.rows; i++) {
                const float *xi = x0 + (size_t)i * mm.ldx;
                if (gather) memcpy(px + (size_t)i * mm.k, x0 + (size_t)gather[i] * mm.ldx, (size_t)mm.k * sizeof(float));
                else if (pre == SLM_TF_PRE_NORM) ks->rmsnorm(xi, t->p[SLM_REF_SRC2], px + (size_t)i * mm.k, mm.k, t->f0);
                else if ((t->flags & SLM_TF_GELU) && !t->p[SLM_REF_SRC2]) /* an ungated expert's gelu_tanh(up) */
                    gelu_row(ks, xi, px + (size_t)i * mm.k, mm.k);
                else if (t->flags & SLM_TF_GELU)
                    ks->geglu(xi, row_f(t->p[SLM_REF_SRC2], &t->ref[SLM_REF_SRC2], sr0 + i), px + (size_t)i * mm.k, mm.k);
                else if (t->f1 > 0.0f) /* the clamped SwiGLU (gpt-oss's experts) */
                    swiglu_oai(xi, row_f(t->p[SLM_REF_SRC2], &t->ref[SLM_REF_SRC2], sr0 + i), px + (size_t)i * mm.k, mm.k,
                               t->f0, t->f1);
                else ks->swiglu(xi, row_f(t->p[SLM_REF_SRC2], &t->ref[SLM_REF_SRC2], sr0 + i), px + (size_t)i * mm.k, mm.k);
            }
        mm.x = px;
        mm.ldx = (size_t)mm.k;
        mm.scratch = (uint8_t *)scratch + lay.pre;
    }
    if (add || cp_dst) { /* the product of columns [n0, n1) into the block after the kernel's scratch */
        mm.w = (const uint8_t *)mm.w + (size_t)t->n0 * mm.wrow; /* n0 % 16 == 0: whole groups */
        mm.n0 = 0;
        mm.n1 = t->n1 - t->n0;
        mm.y = (float *)((uint8_t *)scratch + lay.pre + lay.kernel);
        mm.ldy = (size_t)mm.n1;
    }
    if (!scratch && slm_matmul_scratch_bytes(t->wtype, t->k, mm.rows) > 0) {
        /* no scratch (a pool-less run): float dot products */
        if (slm_is_r16(t->wtype)) {
            slm_kernels_ref()->matmul(&mm);
        } else {
            slm_dot_fn dot = slm_dot_for(ks, t->wtype);
            for (int i = 0; i < mm.rows; i++)
                for (int j = mm.n0; j < mm.n1; j++)
                    mm.y[(size_t)i * mm.ldy + j] =
                        dot((const uint8_t *)mm.w + (size_t)j * mm.wrow, mm.x + (size_t)i * mm.ldx, mm.k);
        }
    } else {
        mm.xq_ready = hit && cls;
        ks->matmul(&mm);
    }
    if ((t->flags & SLM_TF_EXPERT) && t->p[SLM_REF_SRC4]) { /* the expert's bias (gpt-oss) */
        const float *bias = t->p[SLM_REF_SRC4];
        for (int i = 0; i < mm.rows; i++) {
            float *yi = mm.y + (size_t)i * mm.ldy;
            for (int j = mm.n0; j < mm.n1; j++) yi[j] += bias[j];
        }
    }
    if (t->flags & SLM_TF_POST_SCALE) /* granite: the branch's residual scale, the logits' divisor */
        for (int i = 0; i < mm.rows; i++) {
            float *yi = mm.y + (size_t)i * mm.ldy;
            for (int j = mm.n0; j < mm.n1; j++) yi[j] *= t->f2;
        }
    if (cp_dst) { /* each row to its own KV row (batch programs), rotated there */
        float *dst = t->p[SLM_REF_DST];
        const size_t ld = t->ref[SLM_REF_DST].ld;
        for (int i = 0; i < mm.rows; i++) {
            const int r = rr.begin + i;
            float *d = dst + (size_t)cpos[r] * ld;
            memcpy(d + t->n0, mm.y + (size_t)i * mm.ldy, (size_t)mm.n1 * sizeof(float));
            if (t->flags & SLM_TF_POST_ROPE) rope_epilogue(t, (rows){r, r + 1}, d, ld);
        }
        return SLM_OK;
    }
    if (t->flags & SLM_TF_POST_ROPE) rope_epilogue(t, rr, mm.y, mm.ldy);
    if (t->flags & SLM_TF_POST_SOFTCAP)
        for (int i = 0; i < mm.rows; i++) softcap(mm.y + (size_t)i * mm.ldy + mm.n0, mm.n1 - mm.n0, t->f1);
    if (add)
        for (int i = 0; i < mm.rows; i++)
            slm_k_add(acc_y + (size_t)i * acc_ld + t->n0, mm.y + (size_t)i * mm.ldy, mm.n1);
    return SLM_OK;
}

static void rope_neox_rows(float *x, int heads, int head_dim, int rot, const float *cs);


/* A fused RoPE on the columns [n0, n1) a matrix task just wrote (rows of
 * y as the matmul wrote them): whole heads for neox, pairs otherwise. */
static void rope_epilogue(const slm_task *t, rows rr, float *y, size_t ldy) {
    const int32_t *pos = t->p[SLM_REF_SRC3];
    const float *table = t->p[SLM_REF_SRC4];
    const int hd = t->c, rot = t->b > 0 ? t->b : hd, pairs = rot / 2;
    for (int r = rr.begin; r < rr.end; r++) {
        float *x = y + (size_t)(r - rr.begin) * ldy;
        const float *cs = table + (size_t)pos[r] * pairs * 2;
        if (t->flags & SLM_TF_NEOX) {
            rope_neox_rows(x + t->n0, (t->n1 - t->n0) / hd, hd, rot, cs);
            continue;
        }
        for (int j = t->n0; j + 1 < t->n1; j += 2) {
            const int i = (j % hd) / 2;
            const float c = cs[2 * i], s = cs[2 * i + 1], v0 = x[j], v1 = x[j + 1];
            x[j] = v0 * c - v1 * s;
            x[j + 1] = v0 * s + v1 * c;
        }
    }
}

/* RoPE in the "neox" layout (Qwen2, GPT-NeoX): pair i is (i, i + rot/2)
 * over the first rot dimensions of each head (rot < head_dim: partial
 * rotary, the rest pass through). */
static void rope_neox_rows(float *x, int heads, int head_dim, int rot, const float *cs) {
    const int half = rot / 2;
    for (int h = 0; h < heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float c = cs[2 * i], s = cs[2 * i + 1];
            float v0 = v[i], v1 = v[i + half];
            v[i] = v0 * c - v1 * s;
            v[i + half] = v0 * s + v1 * c;
        }
    }
}

/* RMSNorm without a gain, in llama.cpp's order (sum of squares in f32, then 1/sqrt(mean + eps)). */
static void rmsnorm_plain(const float *x, float *y, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv;
}

/* LayerNorm (encoders), in llama.cpp's order: the mean, then the variance
 * of the centred values, both in f32; times the gain, plus the bias. */
static void layernorm_plain(const float *x, const float *g, const float *b, float *y, int n, float eps) {
    float mean = 0.0f, var = 0.0f;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= (float)n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    const float inv = 1.0f / sqrtf(var / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * g[i] + (b ? b[i] : 0.0f); /* no bias: modern-bert */
}

/* EMBED with a != 0 (encoders): dst[r] += the table's row ids[r] (a = 1) or
 * row 0 (a = 3), dequantized into the scratch. */
static slm_status exec_embed_add(const slm_task *t, rows rr, void *scratch) {
    const int32_t *ids = t->p[SLM_REF_SRC0];
    float *row = scratch;
    if (!row || (t->a != 1 && t->a != 3) || (t->a == 1 && !ids)) return SLM_ERR_INTERNAL;
    int have = -1;
    for (int r = rr.begin; r < rr.end; r++) {
        const int id = t->a == 1 ? ids[r] : 0;
        if (id < 0 || id >= t->k) return SLM_ERR_ARG;
        if (id != have && !slm_dequantize_matrix_row(t->wtype, t->p[SLM_REF_SRC1], t->n, t->k, id, row))
            return SLM_ERR_INTERNAL;
        have = id;
        slm_k_add(row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r), row, t->n);
    }
    return SLM_OK;
}

/* Execute one task. Returns SLM_OK or an error (bad data). */
static slm_status exec_task(const slm_task *t, rows valid, const int32_t *cpos, const slm_kernel_set *ks, void *scratch,
                            xmemo *memo) {
    rows rr = (t->flags & SLM_TF_ONE_ROW) ? (rows){0, 1} : valid;
    switch (t->op) {
    case SLM_T_NOP:
    case SLM_T_BARRIER:
        return SLM_OK;
    case SLM_T_COPY_ROW: /* memmove: a compiled program never overlaps them, a hostile blob may */
        memmove(t->p[SLM_REF_DST], row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], t->m - 1),
               (size_t)t->n * sizeof(float));
        return SLM_OK;
    case SLM_T_EMBED: {
        if (t->a) return exec_embed_add(t, rr, scratch);
        const int32_t *ids = t->p[SLM_REF_SRC0];
        for (int r = rr.begin; r < rr.end; r++) {
            int id = ids[r];
            if (id < 0 || id >= t->k) return SLM_ERR_ARG;
            /* the table may be repacked (a tied embedding is also the LM head) */
            float *y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
            if (!slm_dequantize_matrix_row(t->wtype, t->p[SLM_REF_SRC1], t->n, t->k, id, y)) return SLM_ERR_INTERNAL;
            if (t->f0 != 0.0f)
                for (int i = 0; i < t->n; i++) y[i] *= t->f0;
        }
        return SLM_OK;
    }
    case SLM_T_RMSNORM: {
        const int w = t->c > 0 ? t->c : t->n; /* per-head norms: runs of c columns */
        for (int r = rr.begin; r < rr.end; r++) {
            const int dr = (t->flags & SLM_TF_DST_COMPACT) ? r - rr.begin : (t->flags & SLM_TF_DST_CPOS) ? cpos[r] : r;
            /* in place on a present view: the source row is where the destination row is */
            const int sr = t->p[SLM_REF_SRC0] == t->p[SLM_REF_DST] ? dr : r;
            const float *x = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], sr);
            float *y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], dr);
            if (t->a == 1) { /* LayerNorm (encoders): centred, gain, bias */
                layernorm_plain(x, t->p[SLM_REF_SRC1], t->p[SLM_REF_SRC2], y, t->n, t->f0);
                continue;
            }
            for (int j = 0; j + w <= t->n; j += w) {
                if (t->p[SLM_REF_SRC1]) ks->rmsnorm(x + j, t->p[SLM_REF_SRC1], y + j, w, t->f0);
                else rmsnorm_plain(x + j, y + j, w, t->f0); /* no gain (gemma4's V) */
            }
        }
        return SLM_OK;
    }
    case SLM_T_MATMUL:
        return run_matmul(t, rr, cpos, ks, scratch, memo);
    case SLM_T_ROPE: {
        const int32_t *pos = t->p[SLM_REF_SRC1];
        const float *table = t->p[SLM_REF_SRC2];
        const int rot = t->b > 0 ? t->b : t->c, pairs = rot / 2;
        for (int r = rr.begin; r < rr.end; r++) {
            int dr = (t->flags & SLM_TF_DST_COMPACT) ? r - rr.begin : (t->flags & SLM_TF_DST_CPOS) ? cpos[r] : r;
            float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], dr);
            if (t->flags & SLM_TF_NEOX)
                rope_neox_rows(x + (size_t)t->n0 * t->c, t->n1 - t->n0, t->c, rot, table + (size_t)pos[r] * pairs * 2);
            else
                slm_k_rope(x + (size_t)t->n0 * t->c, t->n1 - t->n0, t->c, table + (size_t)pos[r] * pairs * 2);
        }
        return SLM_OK;
    }
    case SLM_T_ATTENTION:
        if (!cpos && (t->flags & SLM_TF_SINKS)) return SLM_ERR_INTERNAL;
        slm_exec_attention(t, rr, cpos, ks);
        return SLM_OK;
    case SLM_T_ATTN_MERGE:
        slm_exec_attn_merge(t, rr);
        return SLM_OK;
    case SLM_T_ADD:
        for (int r = rr.begin; r < rr.end; r++) {
            float *y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
            slm_k_add(y, row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r), t->n);
            if (t->f2 != 0.0f) /* gemma4: the layer's output scale */
                for (int i = 0; i < t->n; i++) y[i] *= t->f2;
        }
        return SLM_OK;
    case SLM_T_BIAS:
        for (int r = rr.begin; r < rr.end; r++) {
            int dr = (t->flags & SLM_TF_DST_COMPACT) ? r - rr.begin : (t->flags & SLM_TF_DST_CPOS) ? cpos[r] : r;
            slm_k_add(row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], dr), t->p[SLM_REF_SRC1], t->n);
        }
        return SLM_OK;
    case SLM_T_KV_STORE: { /* this call's K/V rows into the cache, as its type */
        const size_t rb = (size_t)slm_row_bytes(t->wtype, t->ref[SLM_REF_DST].ld);
        for (int r = rr.begin; r < rr.end; r++) {
            const int dr = (t->flags & SLM_TF_DST_COMPACT) ? r - rr.begin : (t->flags & SLM_TF_DST_CPOS) ? cpos[r] : r;
            ks->kv_store(t->wtype, row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r),
                         (uint8_t *)t->p[SLM_REF_DST] + (size_t)dr * rb, t->n);
        }
        return SLM_OK;
    }
    case SLM_T_SLICE:
        slm_exec_slice(t, rr);
        return SLM_OK;
    case SLM_T_SSM_CONV:
        return slm_exec_ssm_conv(t, rr, cpos, ks);
    case SLM_T_DELTA_GATE:
        slm_exec_delta_gate(t, rr);
        return SLM_OK;
    case SLM_T_DELTA_NET:
        return slm_exec_delta_net(t, rr, cpos, ks);
    case SLM_T_SWIGLU:
        if (t->a == 1) { /* qwen35's gated attention output */
            slm_exec_sigmoid_gate(t, rr);
            return SLM_OK;
        }
        if (t->a == 2) { /* an encoder's FFN: gelu_tanh in place */
            for (int r = rr.begin; r < rr.end; r++) {
                float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
                gelu_row(ks, x, x, t->n);
            }
            return SLM_OK;
        }
        if (t->flags & SLM_TF_GELU) {
            for (int r = rr.begin; r < rr.end; r++)
                ks->geglu(row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r), row_f(t->p[SLM_REF_SRC1], &t->ref[SLM_REF_SRC1], r),
                      row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r), t->n);
            return SLM_OK;
        }
        for (int r = rr.begin; r < rr.end; r++)
            ks->swiglu(row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r),
                         row_f(t->p[SLM_REF_SRC1], &t->ref[SLM_REF_SRC1], r),
                         row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r), t->n);
        return SLM_OK;
    case SLM_T_MOE_ROUTE:
        return slm_exec_moe_route(t, rr);
    case SLM_T_MOE_COMBINE:
        return slm_exec_moe_combine(t, rr);
    case SLM_T_PREFETCH: { /* rows [n0, n1) of the matrix toward this core's L2 */
        const uint64_t rb = slm_row_bytes(t->wtype, (uint64_t)t->k);
        const char *a = (const char *)t->p[SLM_REF_SRC1] + (size_t)t->n0 * rb;
        const char *e = a + (size_t)(t->n1 - t->n0) * rb;
        for (; a < e; a += 64) __builtin_prefetch(a, 0, 2);
        return SLM_OK;
    }
    default:
        return SLM_ERR_INTERNAL;
    }
}

/* ---- profile ------------------------------------------------------------ */

static int g_profile;
static uint64_t g_prof_ns[SLM_T_OP_COUNT], g_prof_calls;

void slm_exec_profile(int enable) {
    g_profile = enable;
    memset(g_prof_ns, 0, sizeof g_prof_ns);
    g_prof_calls = 0;
}

void slm_exec_profile_get(uint64_t ns[SLM_T_OP_COUNT], uint64_t *calls) {
    memcpy(ns, g_prof_ns, sizeof g_prof_ns);
    *calls = g_prof_calls;
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the pool ------------------------------------------------------------ */

/* Spin this long at a barrier before sleeping: long enough to cover the
 * skew of a typical stage, short enough not to steal a core from a peer
 * that the OS has descheduled. */
#define SPIN_NS 30000

struct slm_pool {
    int n;                    /* threads including the caller */
    pthread_t *threads;       /* [n - 1] */
    _Atomic uint32_t job_gen; /* changed to start a job (futex word): low bit 1 = a counted job */
    _Atomic int job_sleepers;
    _Atomic int quit;
    slm_exec *job;            /* the job */
    rows valid;
    const slm_kernel_set *ks;
    _Atomic int status;       /* first error of the job */
    _Atomic uint32_t bar_arrived;
    _Atomic uint32_t bar_gen; /* futex word of the barrier */
    _Atomic int bar_sleepers;
    _Atomic int done_sleepers; /* threads asleep on a stage_done word */
    _Atomic uint32_t job_active; /* workers inside the job (counted schedule; futex word) */
    _Atomic int job_closed;   /* the caller is done with the job: workers not inside stay out */
    _Atomic int exit_sleepers;
    int schedule;             /* slm_schedule_kind, never DEFAULT */
    int trace;                /* the job is traced (read once by the caller) */
    void **scratch;           /* [n] per-thread scratch */
    void *args;               /* [n] worker_arg */
    uint64_t scratch_bytes;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait until *word != seen: spin, then sleep. */
static void wait_change(_Atomic uint32_t *word, uint32_t seen, _Atomic int *sleepers) {
    uint64_t start = 0;
    for (int i = 0;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen) return;
        cpu_relax();
        if ((i & 63) == 63) {
            uint64_t t = now_ns();
            if (!start) start = t;
            else if (t - start > SPIN_NS) break;
        }
    }
    while (atomic_load_explicit(word, memory_order_acquire) == seen) {
        atomic_fetch_add(sleepers, 1);
        futex_wait(word, seen);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void bump_and_wake(_Atomic uint32_t *word, _Atomic int *sleepers) {
    atomic_fetch_add_explicit(word, 1, memory_order_acq_rel);
    if (atomic_load(sleepers) > 0) futex_wake_all(word);
}

/* Counted barrier: the last of n to arrive releases the others. */
static void barrier(slm_pool *pool) {
    if (pool->n == 1) return;
    uint32_t gen = atomic_load_explicit(&pool->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&pool->bar_arrived, 1, memory_order_acq_rel) == (uint32_t)pool->n - 1) {
        atomic_store_explicit(&pool->bar_arrived, 0, memory_order_relaxed);
        bump_and_wake(&pool->bar_gen, &pool->bar_sleepers);
    } else {
        wait_change(&pool->bar_gen, gen, &pool->bar_sleepers);
    }
}

/* Every thread runs this for a job under the rendezvous schedule: claim
 * tasks stage by stage, meet every thread at each barrier. */
static void run_stages(slm_pool *pool, slm_exec *p, rows valid, const slm_kernel_set *ks, int tid) {
    const int prof = g_profile && tid == 0, tr = pool->trace;
    /* trace: the end of the last record; entered before the first barrier,
     * so a trace stopped after the run returns waits for this thread */
    uint64_t tt = tr ? (slm_trace_enter(), slm_exec_trace_start(tid)) : 0;
    for (int s = 0; s < p->n_stages; s++) {
        xmemo memo = {0};
        const int first = p->stage_first[s];
        const int n = p->stage_prod[s]; /* the work tasks: prefetch tasks are skipped */
        for (;;) {
            int i = atomic_fetch_add_explicit(&p->stage_next[s], 1, memory_order_relaxed);
            if (i >= n) break;
            const slm_task *t = &p->tasks[first + i];
            uint64_t t0 = prof ? now_ns() : 0;
            slm_status st = exec_task(t, valid, p->io_ptr[p->io_cache_pos], ks, pool->scratch[tid], &memo);
            if (prof) g_prof_ns[t->op] += now_ns() - t0;
            if (tr) tt = slm_exec_trace_task(p, s, first + i, valid.begin, valid.end, tt);
            if (st) {
                int expected = SLM_OK;
                atomic_compare_exchange_strong(&pool->status, &expected, (int)st);
            }
        }
        uint64_t t0 = prof ? now_ns() : 0;
        barrier(pool);
        if (prof) g_prof_ns[SLM_T_BARRIER] += now_ns() - t0;
        if (tr) tt = slm_exec_trace_barrier(p, s, tt);
    }
    if (tr) slm_trace_leave(); /* this thread's records of the run are written */
}

/* Run task i of x on thread tid and trace it. */
static inline void run_one(slm_pool *pool, slm_exec *p, rows valid, const slm_kernel_set *ks, int tid, int s, int i,
                           xmemo *memo, uint64_t *tt) {
    const slm_task *t = &p->tasks[i];
    const int prof = g_profile && tid == 0;
    uint64_t t0 = prof ? now_ns() : 0;
    slm_status st = exec_task(t, valid, p->io_ptr[p->io_cache_pos], ks, pool->scratch[tid], memo);
    if (prof) g_prof_ns[t->op] += now_ns() - t0;
    if (pool->trace) *tt = slm_exec_trace_task(p, s, i, valid.begin, valid.end, *tt);
    if (st) {
        int expected = SLM_OK;
        atomic_compare_exchange_strong(&pool->status, &expected, (int)st);
    }
}

/* Counted schedule: wait until stage s's producers are done, running its
 * prefetch tasks (the next weights) while there are some. Returns whether
 * it had to wait. */
static int wait_producers(slm_pool *pool, slm_exec *p, rows valid, const slm_kernel_set *ks, int tid, int s,
                          uint64_t *tt) {
    const uint32_t need = (uint32_t)p->stage_prod[s];
    uint32_t v = atomic_load_explicit(&p->stage_done[s], memory_order_acquire);
    if (v >= need) return 0;
    const int xfer0 = p->stage_first[s] + p->stage_prod[s], n_xfer = p->stage_first[s + 1] - 1 - xfer0;
    while (v < need) {
        if (atomic_load_explicit(&p->stage_xfer[s], memory_order_relaxed) < n_xfer) {
            const int j = atomic_fetch_add_explicit(&p->stage_xfer[s], 1, memory_order_relaxed);
            if (j < n_xfer) {
                if (pool->trace) *tt = slm_exec_trace_barrier(p, s, *tt); /* the wait so far */
                run_one(pool, p, valid, ks, tid, s, xfer0 + j, NULL, tt);
                v = atomic_load_explicit(&p->stage_done[s], memory_order_acquire);
                continue;
            }
        }
        wait_change(&p->stage_done[s], v, &pool->done_sleepers);
        v = atomic_load_explicit(&p->stage_done[s], memory_order_acquire);
    }
    return 1;
}

/* Every thread runs this for a job under the counted schedule. A stage's
 * work is claimed once its predecessor's producers are done; a thread that
 * finds a stage's work all claimed goes straight on. Each finished work
 * task counts in its stage's counter; the last one wakes the sleepers. */
static void run_counted(slm_pool *pool, slm_exec *p, rows valid, const slm_kernel_set *ks, int tid) {
    const int prof = g_profile && tid == 0, tr = pool->trace;
    uint64_t tt = tr ? (slm_trace_enter(), slm_exec_trace_start(tid)) : 0;
    for (int s = 0; s < p->n_stages; s++) {
        xmemo memo = {0};
        const int first = p->stage_first[s], n = p->stage_prod[s];
        if (atomic_load_explicit(&p->stage_next[s], memory_order_relaxed) >= n) continue;
        if (s > 0) {
            uint64_t t0 = prof ? now_ns() : 0;
            int waited = wait_producers(pool, p, valid, ks, tid, s - 1, &tt);
            if (prof) g_prof_ns[SLM_T_BARRIER] += now_ns() - t0;
            if (tr && waited) tt = slm_exec_trace_barrier(p, s - 1, tt);
        }
        for (;;) {
            int i = atomic_fetch_add_explicit(&p->stage_next[s], 1, memory_order_relaxed);
            if (i >= n) break;
            run_one(pool, p, valid, ks, tid, s, first + i, &memo, &tt);
            /* the last producer wakes the sleepers; the profile and the trace count that as barrier
             * time (the woken thread may take this one's core, as at a rendezvous release) */
            uint64_t t0 = prof ? now_ns() : 0;
            if (atomic_fetch_add(&p->stage_done[s], 1) + 1 == (uint32_t)n && atomic_load(&pool->done_sleepers) > 0) {
                futex_wake_all(&p->stage_done[s]);
                if (tr) tt = slm_exec_trace_barrier(p, s, tt);
            }
            if (prof) g_prof_ns[SLM_T_BARRIER] += now_ns() - t0;
        }
    }
    if (tid == 0) { /* the fence: the last stage's producers, then the job closed and every worker inside out */
        uint64_t t0 = prof ? now_ns() : 0;
        int waited = wait_producers(pool, p, valid, ks, tid, p->n_stages - 1, &tt);
        atomic_store(&pool->job_closed, 1);
        for (uint32_t v; (v = atomic_load(&pool->job_active)) > 0;) {
            wait_change(&pool->job_active, v, &pool->exit_sleepers);
            waited = 1;
        }
        if (prof) g_prof_ns[SLM_T_BARRIER] += now_ns() - t0;
        if (tr && waited) tt = slm_exec_trace_barrier(p, p->n_stages - 1, tt);
    }
    if (tr) slm_trace_leave();
}

/* A worker's turn at a counted job. A worker that wakes after the caller
 * has closed the job (all of it done: a late wake-up, or the thread was
 * descheduled) stays out, so the caller never waits for a thread to wake;
 * one inside (it entered before the close) is waited for, and it only
 * skips claimed stages. Entering and the close are ordered (seq_cst): a
 * worker either is counted in job_active before the caller reads it or
 * sees the close. */
static void counted_turn(slm_pool *pool, int tid) {
    atomic_fetch_add(&pool->job_active, 1);
    if (!atomic_load(&pool->job_closed)) run_counted(pool, pool->job, pool->valid, pool->ks, tid);
    if (atomic_fetch_sub(&pool->job_active, 1) == 1 && atomic_load(&pool->exit_sleepers) > 0)
        futex_wake_all(&pool->job_active);
}

typedef struct worker_arg {
    slm_pool *pool;
    int tid;
} worker_arg;

static void *worker_main(void *arg) {
    slm_pool *pool = ((worker_arg *)arg)->pool;
    int tid = ((worker_arg *)arg)->tid;
    uint32_t seen = 0;
    for (;;) {
        wait_change(&pool->job_gen, seen, &pool->job_sleepers);
        seen = atomic_load_explicit(&pool->job_gen, memory_order_acquire);
        if (atomic_load(&pool->quit)) break;
        if (seen & 1) counted_turn(pool, tid); /* the job's schedule comes with its generation */
        else run_stages(pool, pool->job, pool->valid, pool->ks, tid);
    }
    return NULL;
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 256 ? 256 : n) : 1;
}

slm_status slm_pool_create(slm_pool **out, int n_threads, slm_err *err) {
    *out = NULL;
    if (n_threads <= 0) n_threads = online_cpus();
    slm_pool *pool = slm_calloc(1, sizeof *pool);
    if (!pool) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    pool->n = n_threads;
    pool->schedule = SLM_SCHEDULE_RENDEZVOUS;
    atomic_store(&pool->job_closed, 1);
    pool->scratch = slm_calloc((size_t)n_threads, sizeof(void *));
    pool->args = slm_calloc((size_t)n_threads, sizeof(worker_arg));
    if (!pool->scratch || !pool->args) {
        slm_xfree(pool->scratch);
        slm_xfree(pool->args);
        slm_xfree(pool);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    if (n_threads > 1) {
        pool->threads = slm_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!pool->threads) {
            pool->n = 1;
            slm_pool_free(pool);
            return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            worker_arg *wa = &((worker_arg *)pool->args)[i + 1];
            wa->pool = pool;
            wa->tid = i + 1;
            if (pthread_create(&pool->threads[i], NULL, worker_main, wa) != 0) {
                pool->n = i + 1; /* join the ones started */
                slm_pool_free(pool);
                return slm_errf(err, SLM_ERR_INTERNAL, "cannot start worker thread %d", i + 1);
            }
        }
    }
    *out = pool;
    return SLM_OK;
}

void slm_pool_free(slm_pool *pool) {
    if (!pool) return;
    if (pool->n > 1) {
        atomic_store(&pool->quit, 1);
        bump_and_wake(&pool->job_gen, &pool->job_sleepers);
        for (int i = 0; i < pool->n - 1; i++) pthread_join(pool->threads[i], NULL);
    }
    for (int i = 0; i < pool->n; i++) slm_aligned_free(pool->scratch[i]);
    slm_xfree(pool->scratch);
    slm_xfree(pool->args);
    slm_xfree(pool->threads);
    slm_xfree(pool);
}

slm_status slm_pool_reserve_scratch(slm_pool *pool, uint64_t bytes, slm_err *err) {
    if (bytes <= pool->scratch_bytes) return SLM_OK;
    for (int i = 0; i < pool->n; i++) {
        slm_aligned_free(pool->scratch[i]);
        pool->scratch[i] = slm_aligned_alloc((size_t)bytes);
        if (!pool->scratch[i]) return slm_errf(err, SLM_ERR_NOMEM, "out of memory for %llu bytes of scratch",
                                               (unsigned long long)bytes);
    }
    pool->scratch_bytes = bytes;
    return SLM_OK;
}

int slm_pool_size(const slm_pool *pool) { return pool ? pool->n : 1; }

void slm_pool_set_schedule(slm_pool *pool, int schedule) {
    if (pool) pool->schedule = schedule == SLM_SCHEDULE_COUNTED ? SLM_SCHEDULE_COUNTED : SLM_SCHEDULE_RENDEZVOUS;
}

int slm_pool_schedule(const slm_pool *pool) { return pool ? pool->schedule : SLM_SCHEDULE_RENDEZVOUS; }

slm_status slm_exec_run(slm_exec *p, slm_pool *pool) {
    const int32_t *cpos = p->io_ptr[p->io_cache_pos];
    const int T = p->prog->rows;
    rows valid = {0, T};
    while (valid.begin < T && cpos[valid.begin] < 0) valid.begin++;
    if (valid.begin == T) return SLM_ERR_ARG;
    const slm_kernel_set *ks = slm_kernels_active();
    for (int s = 0; s < p->n_stages; s++) {
        atomic_store_explicit(&p->stage_next[s], 0, memory_order_relaxed);
        atomic_store_explicit(&p->stage_done[s], 0, memory_order_relaxed);
        atomic_store_explicit(&p->stage_xfer[s], 0, memory_order_relaxed);
    }
    if (g_profile) g_prof_calls++;
    if (!pool || pool->n == 1) {
        const int prof = g_profile, tr = slm_trace_enabled();
        xmemo memo = {0};
        uint64_t tt = tr ? slm_exec_trace_start(0) : 0;
        int stage = 0;
        for (const slm_task *t = p->tasks, *end = p->tasks + p->prog->n_tasks; t < end; t++) {
            if (t->op == SLM_T_PREFETCH) continue; /* nothing to overlap with */
            uint64_t t0 = prof ? now_ns() : 0;
            if (t->op == SLM_T_BARRIER) memo = (xmemo){0};
            slm_status st = exec_task(t, valid, cpos, ks, pool ? pool->scratch[0] : NULL, &memo);
            if (prof) g_prof_ns[t->op] += now_ns() - t0;
            if (tr) /* one thread: a barrier waits for no one, but marks the stage's end */
                tt = t->op == SLM_T_BARRIER ? slm_exec_trace_barrier(p, stage++, tt)
                                            : slm_exec_trace_task(p, stage, (int)(t - p->tasks), valid.begin,
                                                                  valid.end, tt);
            if (st) return st;
        }
        return SLM_OK;
    }
    pool->job = p;
    pool->valid = valid;
    pool->ks = ks;
    pool->trace = slm_trace_enabled();
    atomic_store(&pool->status, SLM_OK);
    const int counted = pool->schedule == SLM_SCHEDULE_COUNTED;
    /* a counted job opens after its fields and counters are set (a worker late for the previous
     * one may enter it early); a rendezvous job stays closed to them: every worker runs it once,
     * for its own generation */
    if (counted) atomic_store(&pool->job_closed, 0);
    const uint32_t g = atomic_load(&pool->job_gen);
    atomic_store(&pool->job_gen, ((g | 1u) + 1u) | (uint32_t)counted);
    if (atomic_load(&pool->job_sleepers) > 0) futex_wake_all(&pool->job_gen);
    if (counted) run_counted(pool, p, valid, ks, 0);
    else run_stages(pool, p, valid, ks, 0);
    /* the last stage's barrier: every worker is done with this job */
    return (slm_status)atomic_load(&pool->status);
}
