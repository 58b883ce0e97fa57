/* The blob reader's validation of task records: every op's fields and
 * flags in range, every operand inside its space (a hostile blob is refused
 * before a task runs). */
#include "blob/blob_check.h"
#include "compiler/amx_plan.h"
#include "device/kernels.h"

/* The KV rows of one sequence's region and the sequences a program sees: a
 * batch program's n_seqs regions of the config's capacity, else one region
 * of the program's capacity. */
/* The KV rows a row attends within: a batch program's sequence region, an
 * embed batch program's text region, else the program's KV capacity. */
static int prog_region(const pctx *q) {
    return q->p->kind == SLM_PROG_BATCH ? q->r->c->kv_capacity
         : q->p->kind == SLM_PROG_EMBED_BATCH ? q->p->region : q->p->kv_capacity;
}
/* Programs whose K/V rows land at their cache positions (DST_CPOS). */
static int cpos_prog(const slm_program *p) { return p->kind == SLM_PROG_BATCH || p->kind == SLM_PROG_EMBED_BATCH; }
static int prog_seqs(const pctx *q) { return q->p->kind == SLM_PROG_BATCH ? q->r->c->n_seqs : 1; }

/* Bytes a reference may touch must lie in its space. */
static slm_status check_ref(pctx *q, int ti, int k, uint64_t ext, int is_dst) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const slm_ref *rf = &t->ref[k];
    static const char *const fn[SLM_TASK_NREF] = {"src0", "src1", "src2", "src3", "src4", "dst"};
    uint64_t limit = 0, end;
    const char *space = "?";
    if (rf->off % 4) return pbad(q, "task %d: %s: offset 0x%llx not 4-byte aligned", ti, fn[k], (unsigned long long)rf->off);
    switch (rf->space) {
    case SLM_SPACE_WEIGHTS: limit = q->r->b->weights_size; space = "weights"; break;
    case SLM_SPACE_CONST: limit = q->r->const_bytes; space = "constants"; break;
    case SLM_SPACE_ARENA: limit = p->arena_bytes; space = "arena"; break;
    case SLM_SPACE_IO: {
        if (rf->io >= p->n_io) return pbad(q, "task %d: %s: I/O index %u >= n_io %d", ti, fn[k], rf->io, p->n_io);
        const slm_io_desc *d = &p->io[rf->io];
        limit = (uint64_t)d->rows * blob_io_bytes(d->dtype, (uint64_t)d->cols);
        space = d->name;
        if (d->role == SLM_IO_PRESENT_KEY || d->role == SLM_IO_PRESENT_VALUE) {
            /* present.* are views at the write index: only compact writes stay in the KV buffer; a
             * batch program's present is the whole KV, row cache_position[r] written (DST_CPOS): a
             * row of the I/O's width, so [off, off + ext) inside T rows keeps each row inside its own
             * (the runtime binds kv_capacity rows and keeps the cache positions below it) */
            const int cpos = (t->flags & SLM_TF_DST_CPOS) != 0;
            if (cpos && (!cpos_prog(q->p) || rf->ld != (uint32_t)d->cols))
                return pbad(q, "task %d (%s): %s: %s written at the cache positions outside a batch or embed batch program or with "
                            "stride %u != its width %d", ti, slm_task_op_name(t->op), fn[k], d->name, rf->ld, d->cols);
            if (!is_dst || !((t->flags & SLM_TF_DST_COMPACT) || (t->flags & SLM_TF_ONE_ROW) || cpos) ||
                (d->dtype == SLM_F32 ? t->op != SLM_T_MATMUL && t->op != SLM_T_ROPE && t->op != SLM_T_BIAS && t->op != SLM_T_RMSNORM
                                     : t->op != SLM_T_KV_STORE))
                return pbad(q, "task %d (%s): %s: %s only as a compact %s destination", ti, slm_task_op_name(t->op),
                            fn[k], d->name, d->dtype == SLM_F32 ? "matmul/rope/bias/rmsnorm" : "kv_store");
        }
        break;
    }
    default:
        return pbad(q, "task %d (%s): %s: space %u invalid for this operand", ti, slm_task_op_name(t->op), fn[k], rf->space);
    }
    if (!slm_add_ok(rf->off, ext, &end) || end > limit)
        return pbad(q, "task %d (%s): %s: bytes [0x%llx, +0x%llx) beyond %s (%llu bytes)", ti, slm_task_op_name(t->op), fn[k],
                    (unsigned long long)rf->off, (unsigned long long)ext, space, (unsigned long long)limit);
    return SLM_OK;
}

/* Extent of rows [0, rows) of width w floats with stride ld floats. */
static int mat_ext(uint64_t rows, uint64_t ld, uint64_t w, uint64_t *ext) {
    uint64_t x;
    if (rows == 0 || w == 0) return 0;
    if (rows > 1 && ld < w) return 0;
    if (!slm_mul_ok(rows - 1, ld, &x) || !slm_add_ok(x, w, &x) || !slm_mul_ok(x, 4, &x)) return 0;
    *ext = x;
    return 1;
}

static int embed_type_ok(uint32_t wtype) {
    if (slm_is_r16(wtype)) return slm_matmul_supported(wtype);
    const slm_dtype_info *di = slm_dtype_get(wtype);
    if (!di || !di->name || di->block == 0 || di->block > 256 || di->bytes > 1024) return 0;
    uint8_t zeros[1024];
    float out[256];
    memset(zeros, 0, sizeof zeros);
    return slm_dequantize_row(wtype, zeros, out, di->block) != 0;
}

/* The fields the qwen3 / gemma / phi3 programs use: GeGLU, the logit and
 * score caps (f1), the embedding and query scales (f0). */
static slm_status check_family_fields(pctx *q, int ti) {
    const slm_task *t = &q->p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    if ((t->flags & SLM_TF_GELU) && t->op != SLM_T_SWIGLU && !(t->op == SLM_T_MATMUL && (t->flags & SLM_TF_PRE_SWIGLU)))
        return pbad(q, "task %d (%s): flag GELU without a swiglu", ti, op);
    /* an expert's down projection: GeGLU exactly on gemma4's experts, GELU of the up rows alone on
     * nomic-bert-moe's ungated ones (src2 none: check_matmul), SwiGLU on the others */
    const slm_model_config *m = &q->r->c->cfg;
    if (t->op == SLM_T_MATMUL && (t->flags & SLM_TF_EXPERT) && (t->flags & SLM_TF_PRE_SWIGLU) &&
        ((t->flags & SLM_TF_GELU) != 0) != (m->moe_dense || m->expert_ungated))
        return pbad(q, "task %d (%s): an expert's %s prologue, the config's experts are %s", ti, op,
                    (t->flags & SLM_TF_GELU) ? "GeGLU" : "SwiGLU",
                    m->moe_dense ? "GeGLU (gemma4)" : m->expert_ungated ? "ungated GELU" : "SwiGLU");
    const int post_cap = (t->flags & SLM_TF_POST_SOFTCAP) != 0;
    if (post_cap && (t->op != SLM_T_MATMUL || (t->flags & (SLM_TF_POST_ADD | SLM_TF_POST_ROPE))))
        return pbad(q, "task %d (%s): a soft-cap epilogue on a non-matmul task or with another epilogue", ti, op);
    /* f1 on an expert's swiglu prologue: the clamped SwiGLU's limit (gpt-oss) */
    const int oai = t->op == SLM_T_MATMUL && (t->flags & SLM_TF_EXPERT) && (t->flags & SLM_TF_PRE_SWIGLU) && !post_cap;
    if (oai && t->f1 != 0.0f && !(t->f0 > 0.0f && t->f0 < 1e6f))
        return pbad(q, "task %d (%s): clamped swiglu alpha f0 %g out of range", ti, op, (double)t->f0);
    if ((t->flags & SLM_TF_SINKS) && ((t->op != SLM_T_ATTENTION && t->op != SLM_T_ATTN_MERGE) ||
                                      (t->flags & SLM_TF_KEY_PARTS) || t->f1 != 0.0f))
        return pbad(q, "task %d (%s): sinks on a task other than an uncapped attention or a merge", ti, op);
    if (!(t->f1 >= 0.0f && t->f1 < 1e9f) || (post_cap && !(t->f1 > 0.0f)) ||
        (t->f1 != 0.0f && t->op != SLM_T_ATTENTION && !post_cap && !oai))
        return pbad(q, "task %d (%s): f1 %g out of range for this task", ti, op, (double)t->f1);
    const int post_scale = (t->flags & SLM_TF_POST_SCALE) != 0;
    /* ATTENTION's f2: ALiBi's largest bias, jina-bert-v2's (encoder 5) alone */
    const int alibi = t->op == SLM_T_ATTENTION && q->r->c->cfg.encoder == 5 && t->f2 > 0.0f && t->f2 <= 64.0f;
    if ((post_scale && (t->op != SLM_T_MATMUL || !(t->f2 > 0.0f && t->f2 < 1e9f))) ||
        (!post_scale && t->f2 != 0.0f && t->op != SLM_T_MOE_COMBINE && t->op != SLM_T_MOE_ROUTE && t->op != SLM_T_ADD &&
         !alibi) ||
        (t->op == SLM_T_ADD && !(t->f2 > -1e6f && t->f2 < 1e6f))) /* ADD: gemma4's layer output scale */
        return pbad(q, "task %d (%s): scale f2 %g out of range for this task", ti, op, (double)t->f2);
    if ((t->op == SLM_T_EMBED || t->op == SLM_T_ATTENTION) && !(t->f0 >= 0.0f && t->f0 < 1e9f))
        return pbad(q, "task %d (%s): scale f0 %g out of range", ti, op, (double)t->f0);
    return SLM_OK;
}

/* The matmul prologue and epilogue flags: on matmuls only, one of each kind. */
static slm_status check_prologue_epilogue(pctx *q, int ti) {
    const slm_task *t = &q->p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    const unsigned pre = t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU);
    if (pre && t->op != SLM_T_MATMUL) return pbad(q, "task %d (%s): an input prologue on a non-matmul task", ti, op);
    if (pre == (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU)) return pbad(q, "task %d (%s): two input prologues", ti, op);
    const int post_rope = (t->flags & SLM_TF_POST_ROPE) != 0;
    if (post_rope && t->op != SLM_T_MATMUL) return pbad(q, "task %d (%s): a rope epilogue on a non-matmul task", ti, op);
    if ((t->flags & SLM_TF_POST_ADD) && (t->op != SLM_T_MATMUL || post_rope))
        return pbad(q, "task %d (%s): an add epilogue on a non-matmul task or with a rope epilogue", ti, op);
    if ((t->flags & SLM_TF_NEOX) && t->op != SLM_T_ROPE && !post_rope)
        return pbad(q, "task %d (%s): flag NEOX on a non-rope task", ti, op);
    return SLM_OK;
}

/* A rope's rotated dimensions (b, or the head size c): the pairs of the
 * table its operand k points at (table 0 at offset 0, table 1 right after
 * it: gemma4's window layers may rotate another width); only the neox
 * layout rotates part of a head. *ext: that table's bytes. */
static int rope_dims_ok(const pctx *q, const slm_task *t, int k, uint64_t *ext) {
    const int rot = t->b ? t->b : t->c;
    if (t->b && (t->b < 0 || t->b > t->c || t->b % 2 || !(t->flags & SLM_TF_NEOX))) return 0;
    const slm_constants *k0 = &q->r->c->consts;
    if (t->ref[k].off == 0) {
        *ext = q->r->table_bytes;
        return rot / 2 == k0->rope_pairs;
    }
    if (t->ref[k].off != q->r->table_bytes || q->r->const_bytes == q->r->table_bytes) return 0;
    *ext = q->r->table1_bytes;
    return rot / 2 == (k0->rope_pairs_swa ? k0->rope_pairs_swa : k0->rope_pairs);
}

/* The checks every task validator uses: a failed condition returns the message; an operand
 * is marked used and its extent checked; MAT: rows of a matrix; KVR: rows of the KV cache. */
#define NEED(cond, ...) do { if (!(cond)) return pbad(q, __VA_ARGS__); } while (0)
#define REF(k, e, dst) do { used |= 1u << (k); if ((s = check_ref(q, ti, k, e, dst))) return s; } while (0)
#define MAT(rows, k, w, dst) do { NEED(mat_ext(rows, t->ref[k].ld, w, &ext), "task %d (%s): operand %d: ld %u / width %llu incoherent", ti, op, k, t->ref[k].ld, (unsigned long long)(w)); REF(k, ext, dst); } while (0)
#define KVR(rows, k, w, dst) do { NEED(blob_kv_ext(q->p, &t->ref[k], t->wtype, rows, w, &ext), "task %d (%s): operand %d not rows of %s KV", ti, op, k, slm_dtype_name(t->wtype)); REF(k, ext, dst); } while (0)

/* A prefetch task: rows [n0, n1) of a matrix in the weights. */
static slm_status check_prefetch(pctx *q, int ti, unsigned *usedp) {
    const slm_task *t = &q->p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    unsigned used = 0;
    slm_status s;
    NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->k >= 1 && t->k <= BLOB_MAX_DIM, "task %d (%s): n %d / k %d out of range", ti, op, t->n, t->k);
    NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): rows [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->n);
    NEED(t->flags == 0 && t->a >= 1 && t->b == 0, "task %d (%s): flags 0x%x / distance %d / b %d invalid", ti, op, t->flags, t->a, t->b);
    NEED(slm_matmul_supported(t->wtype), "task %d (%s): wtype %u not supported", ti, op, t->wtype);
    const uint64_t prow = slm_row_bytes(t->wtype, (uint64_t)t->k);
    NEED(prow > 0, "task %d (%s): k %d not a whole number of %s blocks", ti, op, t->k, slm_dtype_name(t->wtype));
    NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): src1 must be in the weights", ti, op);
    REF(SLM_REF_SRC1, (uint64_t)t->n1 * prow, 0);
    *usedp |= used;
    return SLM_OK;
}

static slm_status check_matmul(pctx *q, int ti, unsigned *usedp) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    const unsigned pre = t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU);
    const int post_rope = (t->flags & SLM_TF_POST_ROPE) != 0, post_add = (t->flags & SLM_TF_POST_ADD) != 0;
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows;
    unsigned used = 0;
    uint64_t ext;
    slm_status s;
    NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->k >= 1 && t->k <= BLOB_MAX_DIM, "task %d (%s): n %d / k %d out of range", ti, op, t->n, t->k);
    NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): tile [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->n);
    NEED(slm_matmul_supported(t->wtype), "task %d (%s): wtype %u not supported", ti, op, t->wtype);
    NEED(t->a >= 0 && t->a <= SLM_STREAM_PREFETCH_MAX && t->a % 64 == 0,
         "task %d (%s): stream prefetch distance %d not a multiple of 64 in [0, %d]", ti, op, t->a, SLM_STREAM_PREFETCH_MAX);
    uint64_t row = slm_row_bytes(t->wtype, (uint64_t)t->k);
    NEED(row > 0, "task %d (%s): k %d not a whole number of %s blocks", ti, op, t->k, slm_dtype_name(t->wtype));
    NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): src1 must be in the weights", ti, op);
    /* repacked weights: whole groups of 16 rows, and a tile reads the groups it cuts */
    NEED(!slm_is_r16(t->wtype) || t->n1 <= t->n / 16 * 16, "task %d (%s): tile [%d,%d) of %s weights beyond the %d "
         "repacked rows", ti, op, t->n0, t->n1, slm_dtype_name(t->wtype), t->n / 16 * 16);
    const int expert = (t->flags & SLM_TF_EXPERT) != 0, gather = (t->flags & SLM_TF_EXPERT_GATHER) != 0;
    NEED(!gather || expert, "task %d (%s): flag EXPERT_GATHER without EXPERT", ti, op);
    /* an expert's rows: the c * m (row, slot) pairs of the program; its table: the route's */
    uint64_t RX = R;
    if (expert) {
        NEED(!(t->flags & (SLM_TF_ONE_ROW | SLM_TF_DST_COMPACT | SLM_TF_SRC_COMPACT | SLM_TF_DST_CPOS | SLM_TF_PRE_NORM |
                           SLM_TF_POST_ROPE | SLM_TF_POST_ADD | SLM_TF_POST_SOFTCAP | SLM_TF_POST_SCALE)) &&
             (!(t->flags & SLM_TF_GELU) || !gather) &&
             (gather ? pre == 0 : pre == SLM_TF_PRE_SWIGLU),
             "task %d (%s): expert flags 0x%x: gather, or the swiglu (or geglu) prologue, and nothing else", ti, op,
             t->flags);
        NEED(t->c >= 1 && t->c <= 64 && t->window >= t->c && t->window <= 1024 && t->b >= 0 && t->b < t->window,
             "task %d (%s): expert %d of %d, %d used: out of range", ti, op, t->b, t->window, t->c);
        NEED(t->ref[SLM_REF_SRC3].space == SLM_SPACE_ARENA, "task %d (%s): the routing table must be in the arena", ti, op);
        REF(SLM_REF_SRC3, (SLM_MOE_EXPERT(p->rows, t->c, t->b) + 2) * 4, 0);
        RX = R * (uint64_t)t->c;
        if (t->ref[SLM_REF_SRC4].space != SLM_SPACE_NONE) { /* the expert's bias */
            NEED(t->ref[SLM_REF_SRC4].space == SLM_SPACE_WEIGHTS, "task %d (%s): an expert's bias must be in the weights", ti, op);
            REF(SLM_REF_SRC4, (uint64_t)t->n * 4, 0);
        }
    }
    MAT(gather ? R : RX, SLM_REF_SRC0, (uint64_t)t->k, 0);
    REF(SLM_REF_SRC1, (uint64_t)(slm_is_r16(t->wtype) ? (t->n1 + 15) / 16 * 16 : t->n1) * row, 0);
    if (pre == SLM_TF_PRE_NORM) { /* rmsnorm gains: k floats in the weights */
        NEED(t->ref[SLM_REF_SRC2].space == SLM_SPACE_WEIGHTS, "task %d (%s): norm gains must be in the weights", ti, op);
        NEED(t->f0 >= 0.0f && t->f0 < 1.0f, "task %d (%s): eps %g out of range", ti, op, (double)t->f0);
        REF(SLM_REF_SRC2, (uint64_t)t->k * 4, 0);
    } else if (pre == SLM_TF_PRE_SWIGLU && expert && q->r->c->cfg.expert_ungated) {
        /* nomic-bert-moe's ungated expert: GELU of src0 (the up rows) alone, no second operand */
        NEED(t->ref[SLM_REF_SRC2].space == SLM_SPACE_NONE && t->f0 == 0.0f && t->f1 == 0.0f,
             "task %d (%s): an ungated expert's prologue with a second operand (space %u) or a clamp (f0 %g, f1 %g)", ti,
             op, t->ref[SLM_REF_SRC2].space, (double)t->f0, (double)t->f1);
    } else if (pre == SLM_TF_PRE_SWIGLU) { /* the up rows, shaped as src0 */
        MAT(RX, SLM_REF_SRC2, (uint64_t)t->k, 0);
    }
    NEED(!post_add || t->n0 % 16 == 0, "task %d (%s): add epilogue on a tile starting at column %d (not a multiple of 16)", ti, op, t->n0);
    if (post_rope) { /* as a ROPE task over the tile's columns */
        const int unit = (t->flags & SLM_TF_NEOX) ? t->c : 2;
        uint64_t tb = 0;
        NEED(t->c >= 2 && t->c % 2 == 0 && rope_dims_ok(q, t, SLM_REF_SRC4, &tb), "task %d (%s): head_dim c %d / rotated b %d not the pairs of a RoPE table at src4", ti, op, t->c, t->b);
        NEED(t->n % t->c == 0 && t->n0 % unit == 0 && (t->n1 % unit == 0),
             "task %d (%s): tile [%d,%d) of width %d cuts a rotation (head_dim %d)", ti, op, t->n0, t->n1, t->n, t->c);
        NEED(t->ref[SLM_REF_SRC4].space == SLM_SPACE_CONST, "task %d (%s): src4 must be the constants", ti, op);
        REF(SLM_REF_SRC3, R * 4, 0);
        REF(SLM_REF_SRC4, tb, 0);
    }
    MAT(RX, SLM_REF_DST, (uint64_t)t->n1, 1);
    *usedp |= used;
    return SLM_OK;
}

/* An ATTENTION task: heads, KV type and rows; the sinks in place of the cache
 * positions (gpt-oss); key parts into the partials. */
static slm_status check_attention(pctx *q, int ti, unsigned *usedp) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows, C = (uint64_t)p->kv_capacity;
    unsigned used = 0;
    uint64_t ext;
    slm_status s;
    NEED(t->a >= 1 && t->b >= 1 && t->b <= t->a && t->a % t->b == 0, "task %d (%s): heads a %d / kv heads b %d incoherent", ti, op, t->a, t->b);
    NEED(t->c >= 1 && (int64_t)t->a * t->c <= BLOB_MAX_DIM, "task %d (%s): head_dim c %d out of range", ti, op, t->c);
    NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->a, "task %d (%s): heads [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->a);
    NEED(t->k == prog_region(q), "task %d (%s): k %d != the KV rows of a region %d (a sequence's, or a text's in an "
         "embed batch program; program KV capacity %llu)", ti, op, t->k, prog_region(q), (unsigned long long)C);
    NEED(t->ref[SLM_REF_SRC2].ld == t->ref[SLM_REF_SRC1].ld, "task %d (%s): K and V strides differ", ti, op);
    /* window < 0: both ways (an encoder's, or gemma-embedding's; -(h + 1): h rows either side) */
    NEED(t->window >= 0 || (q->r->c->cfg.encoder && t->window >= -BLOB_MAX_DIM && !(t->flags & SLM_TF_KEY_PARTS)),
         "task %d (%s): window %d negative%s", ti, op, t->window, q->r->c->cfg.encoder ? "" : " (an encoder's only)");
    NEED(t->wtype == q->r->c->opt.kv_type && (t->wtype != SLM_Q8_0 || t->c % SLM_QK8_0 == 0),
         "task %d (%s): KV type %u (head_dim %d), the config's is %d", ti, op, t->wtype, t->c, q->r->c->opt.kv_type);
    const uint64_t w = (uint64_t)t->n1 * (uint64_t)t->c, kvw = (uint64_t)t->b * (uint64_t)t->c;
    MAT(R, SLM_REF_SRC0, w, 0);
    KVR(C, SLM_REF_SRC1, kvw, 0);
    KVR(C, SLM_REF_SRC2, kvw, 0);
    REF(SLM_REF_SRC3, C * 4, 0);
    if (t->flags & SLM_TF_SINKS) { /* the sinks in place of the cache positions */
        NEED(t->ref[SLM_REF_SRC4].space == SLM_SPACE_WEIGHTS, "task %d (%s): sinks must be in the weights", ti, op);
        REF(SLM_REF_SRC4, (uint64_t)t->a * 4, 0);
    } else {
        REF(SLM_REF_SRC4, R * 4, 0);
    }
    if (t->flags & SLM_TF_KEY_PARTS) { /* the partials: parts x heads x (head_dim + 2) a row */
        NEED(t->ref[SLM_REF_DST].space == SLM_SPACE_ARENA, "task %d (%s): key parts' partials not in the arena", ti, op);
        MAT(R, SLM_REF_DST, (uint64_t)t->tiles[1] * (uint64_t)t->a * (uint64_t)(t->c + 2), 1);
    } else {
        MAT(R, SLM_REF_DST, w, 1);
    }
    *usedp |= used;
    return SLM_OK;
}

/* MOE_ROUTE (the router's logits into the routing table) and MOE_COMBINE
 * (the experts' down rows into the residual). */
static slm_status check_moe(pctx *q, int ti, unsigned *usedp) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows;
    unsigned used = 0;
    uint64_t ext;
    slm_status s;
    if (t->op == SLM_T_MOE_ROUTE) { /* the router's logits [R, E] (and the selection bias [E]) -> the routing table */
        const slm_model_config *m = &q->r->c->cfg;
        const float scale = m->expert_scale != 1.0f ? m->expert_scale : 0.0f;
        NEED(t->n >= 1 && t->n <= 1024 && t->c >= 1 && t->c <= 64 && t->c <= t->n && (t->a == 0 || t->a == 1) && !t->flags,
             "task %d (%s): %d experts, %d used, norm %d, flags 0x%x out of range", ti, op, t->n, t->c, t->a, t->flags);
        NEED(t->b == m->expert_sigmoid, "task %d (%s): gating %d, the config's is %d (0 softmax, 1 sigmoid)", ti, op, t->b,
             m->expert_sigmoid);
        NEED(!m->moe_every || (t->layer >= 0 && t->layer < m->n_layers && slm_layer_moe(m, t->layer)),
             "task %d (%s): layer %d holds no experts by the config's rule (moe_every %d: l %% moe_every == 1)", ti, op,
             t->layer, m->moe_every);
        NEED(t->f2 == scale, "task %d (%s): weight scale f2 %g, the config's is %g", ti, op, (double)t->f2, (double)scale);
        NEED((t->ref[SLM_REF_SRC1].space != SLM_SPACE_NONE) == (m->expert_sel_bias != 0),
             "task %d (%s): a selection bias %s, the config %s", ti, op,
             t->ref[SLM_REF_SRC1].space != SLM_SPACE_NONE ? "given" : "missing",
             m->expert_sel_bias ? "has one" : "has none");
        NEED(!m->expert_sel_bias || t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS,
             "task %d (%s): the selection bias must be in the weights", ti, op);
        if (m->expert_sel_bias) REF(SLM_REF_SRC1, (uint64_t)t->n * 4, 0);
        NEED((t->ref[SLM_REF_SRC2].space != SLM_SPACE_NONE) == (m->expert_down_scale != 0),
             "task %d (%s): per-expert scales %s, the config %s", ti, op,
             t->ref[SLM_REF_SRC2].space != SLM_SPACE_NONE ? "given" : "missing",
             m->expert_down_scale ? "has them" : "has none");
        NEED(!m->expert_down_scale || t->ref[SLM_REF_SRC2].space == SLM_SPACE_WEIGHTS,
             "task %d (%s): the per-expert scales must be in the weights", ti, op);
        if (m->expert_down_scale) REF(SLM_REF_SRC2, (uint64_t)t->n * 4, 0);
        NEED(t->ref[SLM_REF_DST].space == SLM_SPACE_ARENA, "task %d (%s): the routing table must be in the arena", ti, op);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        REF(SLM_REF_DST, (SLM_MOE_EXPERT(p->rows, t->c, t->n)) * 4, 1);
    } else { /* MOE_COMBINE: the experts' down rows [R * c, n] into dst [R, n], the shared expert's */
        const slm_model_config *m = &q->r->c->cfg;
        const int shared = m->shared_ffn ? (m->shared_gate ? 2 : 1) : 0;
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->c >= 1 && t->c <= 64 && !t->flags,
             "task %d (%s): n %d / used %d / flags 0x%x out of range", ti, op, t->n, t->c, t->flags);
        NEED(t->a == shared, "task %d (%s): shared expert %d, the config's is %d (0 none, 1 ungated, 2 gated)", ti, op,
             t->a, shared);
        NEED(t->b == m->moe_dense && (!t->b || t->f2 == 0.0f),
             "task %d (%s): set %d (scale %g), the config's moe_dense is %d (1: the sum alone, unscaled)", ti, op, t->b,
             (double)t->f2, m->moe_dense);
        if (t->a) MAT(R, SLM_REF_SRC1, (uint64_t)t->n, 0);
        if (t->a == 2) MAT(R, SLM_REF_SRC2, 1, 0);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): tile [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->n);
        NEED(t->f2 >= 0.0f && t->f2 < 1e9f, "task %d (%s): scale f2 %g out of range", ti, op, (double)t->f2);
        NEED(t->ref[SLM_REF_SRC3].space == SLM_SPACE_ARENA, "task %d (%s): the routing table must be in the arena", ti, op);
        MAT(R * (uint64_t)t->c, SLM_REF_SRC0, (uint64_t)t->n, 0);
        REF(SLM_REF_SRC3, SLM_MOE_EXPERT(p->rows, t->c, 0) * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
    }
    *usedp |= used;
    return SLM_OK;
}

/* A state operand of a recurrent task: the program's conv_state or
 * recurrent_state input of the task's layer. */
static int is_state_ref(const pctx *q, const slm_task *t, int k, int role) {
    const slm_ref *rf = &t->ref[k];
    return rf->space == SLM_SPACE_IO && rf->io < q->p->n_io && q->p->io[rf->io].role == role &&
           q->p->io[rf->io].layer == t->layer;
}

/* The hybrid recurrent layers' tasks (qwen35): the gated query's slices,
 * the conv, the decay and the delta rule, their shapes the config's and
 * their state the program's state inputs of their layer (one sequence). */
static slm_status check_recurrent(pctx *q, int ti, unsigned *usedp) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const slm_model_config *m = &q->r->c->cfg;
    const char *op = slm_task_op_name(t->op);
    const uint64_t R = (uint64_t)p->rows;
    unsigned used = 0;
    uint64_t ext;
    slm_status s;
    NEED(!t->flags, "task %d (%s): flags 0x%x on a recurrent layer's task", ti, op, t->flags);
    NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
    if (t->op == SLM_T_SLICE) {
        NEED(t->b >= 1 && t->n % t->b == 0 && t->a >= 0 && t->c >= 1 && t->c <= BLOB_MAX_DIM && t->a <= t->c - t->b &&
             (int64_t)(t->n / t->b) * t->c == t->k,
             "task %d (%s): runs of %d, %d taken at %d, widths %d / %d incoherent", ti, op, t->c, t->b, t->a, t->n, t->k);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->k, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        *usedp |= used;
        return SLM_OK;
    }
    if (t->op == SLM_T_DELTA_GATE) {
        NEED(m->recur_interval && t->n == m->ssm_v_heads, "task %d (%s): %d heads, the config's are %d", ti, op, t->n,
             m->ssm_v_heads);
        NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS && t->ref[SLM_REF_SRC2].space == SLM_SPACE_WEIGHTS,
             "task %d (%s): dt bias and a must be in the weights", ti, op);
        REF(SLM_REF_SRC1, (uint64_t)t->n * 4, 0);
        REF(SLM_REF_SRC2, (uint64_t)t->n * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        *usedp |= used;
        return SLM_OK;
    }
    /* SSM_CONV, DELTA_NET: rows of one sequence of the program's capacity */
    NEED(m->recur_interval && t->layer >= 0 && slm_layer_recurrent(m, t->layer), "task %d (%s): layer %d is not recurrent",
         ti, op, t->layer);
    NEED(t->k == prog_region(q) && t->window == prog_seqs(q),
         "task %d (%s): region %d / sequences %d, want the program's %d and %d", ti, op, t->k, t->window,
         prog_region(q), prog_seqs(q));
    const uint64_t S = (uint64_t)prog_seqs(q); /* a state row per sequence */
    if (t->op == SLM_T_SSM_CONV) {
        NEED(t->n == slm_conv_dim(m) && t->c == m->ssm_conv, "task %d (%s): %d channels of %d taps, the config's %d of %d",
             ti, op, t->n, t->c, slm_conv_dim(m), m->ssm_conv);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): channels [%d,%d) not within [0,%d)", ti, op, t->n0,
             t->n1, t->n);
        NEED(is_state_ref(q, t, SLM_REF_SRC1, SLM_IO_CONV_STATE), "task %d (%s): src1 is not its layer's conv_state", ti, op);
        NEED(t->ref[SLM_REF_SRC2].space == SLM_SPACE_WEIGHTS, "task %d (%s): the taps must be in the weights", ti, op);
        REF(SLM_REF_SRC1, S * (uint64_t)(t->c - 1) * (uint64_t)t->n * 4, 0);
        REF(SLM_REF_SRC2, (uint64_t)t->c * (uint64_t)t->n * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
    } else { /* DELTA_NET */
        NEED(t->a == m->ssm_k_heads && t->b == m->ssm_v_heads && t->c == m->ssm_state && (int64_t)t->b * t->c == t->n,
             "task %d (%s): %d key / %d value heads of %d, width %d: not the config's", ti, op, t->a, t->b, t->c, t->n);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->b, "task %d (%s): heads [%d,%d) not within [0,%d)", ti, op, t->n0,
             t->n1, t->b);
        NEED(t->f0 >= 0.0f && t->f0 < 1.0f, "task %d (%s): eps %g out of range", ti, op, (double)t->f0);
        NEED(is_state_ref(q, t, SLM_REF_SRC3, SLM_IO_RECUR_STATE), "task %d (%s): src3 is not its layer's recurrent_state",
             ti, op);
        MAT(R, SLM_REF_SRC0, (uint64_t)(2 * t->a + t->b) * (uint64_t)t->c, 0);
        MAT(R, SLM_REF_SRC1, (uint64_t)t->b, 0);
        MAT(R, SLM_REF_SRC2, (uint64_t)t->b, 0);
        REF(SLM_REF_SRC3, S * (uint64_t)t->b * (uint64_t)t->c * (uint64_t)t->c * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
    }
    *usedp |= used;
    return SLM_OK;
}

/* Rows written at their cache positions (DST_CPOS): a batch or embed batch
 * program's K/V rows into present.* only, by the ops that honour it (a
 * matmul's tile at a multiple of 16). */
static int cpos_ok(const pctx *q, const slm_task *t) {
    const slm_program *p = q->p;
    const slm_ref *d = &t->ref[SLM_REF_DST];
    if (!(t->flags & SLM_TF_DST_CPOS)) return 1;
    if (t->op != SLM_T_MATMUL && t->op != SLM_T_ROPE && t->op != SLM_T_BIAS && t->op != SLM_T_RMSNORM &&
        t->op != SLM_T_KV_STORE)
        return 0;
    if (t->op == SLM_T_MATMUL && t->n0 % 16) return 0;
    return cpos_prog(p) && !(t->flags & (SLM_TF_DST_COMPACT | SLM_TF_ONE_ROW)) && d->space == SLM_SPACE_IO &&
           d->io < p->n_io && (p->io[d->io].role == SLM_IO_PRESENT_KEY || p->io[d->io].role == SLM_IO_PRESENT_VALUE);
}

/* EMBED (a decoder's, or an encoder graph's accumulating variants) and
 * RMSNORM (with gains, per-head groups, or an encoder graph's LayerNorm). */
static slm_status check_embed_norm(pctx *q, int ti, unsigned *usedp) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const slm_model_config *m = &q->r->c->cfg;
    const int enc_graph = slm_encoder_graph(m); /* bert's graph: its EMBED and LayerNorm variants */
    const char *op = slm_task_op_name(t->op);
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows;
    unsigned used = 0;
    uint64_t ext;
    slm_status s;
    if (t->op == SLM_T_EMBED) {
        /* a = 1 (rows by src0's ids) or 3 (row 0 on every row): an encoder's accumulating embedding,
         * its row in the scratch (slm_task_scratch_bytes: n floats) */
        NEED(t->a == 0 || (enc_graph && (t->a == 1 || t->a == 3) && t->f0 == 0.0f && t->n <= m->dim),
             "task %d (%s): a %d: an encoder graph's accumulating embedding (rows by ids 1, row 0 3), of the model's width"
             " (the config: encoder %d)", ti, op, t->a, m->encoder);
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->k >= 1 && t->k <= BLOB_MAX_DIM, "task %d (%s): n %d / k %d out of range", ti, op, t->n, t->k);
        NEED(embed_type_ok(t->wtype), "task %d (%s): wtype %u not supported", ti, op, t->wtype);
        uint64_t row = slm_row_bytes(t->wtype, (uint64_t)t->n);
        NEED(row > 0, "task %d (%s): n %d not a whole number of %s blocks", ti, op, t->n, slm_dtype_name(t->wtype));
        NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): src1 must be in the weights", ti, op);
        NEED(!slm_is_r16(t->wtype) || t->k >= 16, "task %d (%s): k %d rows of %s under 16", ti, op, t->k,
             slm_dtype_name(t->wtype));
        if (t->a != 3) REF(SLM_REF_SRC0, R * 4, 0);
        REF(SLM_REF_SRC1, (uint64_t)t->k * row, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
    } else if (t->a == 1) { /* LayerNorm: centred, gains and (but modern-bert's) a bias of n floats in the weights */
        NEED(enc_graph && t->c == 0 && t->n >= 1 && t->n <= BLOB_MAX_DIM && t->f0 >= 0.0f && t->f0 < 1.0f,
             "task %d (%s): an encoder graph's LayerNorm (config encoder %d), n %d, groups %d, eps %g", ti, op,
             m->encoder, t->n, t->c, (double)t->f0);
        NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS &&
                 (t->ref[SLM_REF_SRC2].space == SLM_SPACE_NONE || t->ref[SLM_REF_SRC2].space == SLM_SPACE_WEIGHTS),
             "task %d (%s): LayerNorm gains and bias must be in the weights", ti, op);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        REF(SLM_REF_SRC1, (uint64_t)t->n * 4, 0);
        if (t->ref[SLM_REF_SRC2].space != SLM_SPACE_NONE) REF(SLM_REF_SRC2, (uint64_t)t->n * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
    } else {
        NEED(t->a == 0, "task %d (%s): a %d: not a norm (0) or an encoder's LayerNorm (1)", ti, op, t->a);
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        NEED(t->c >= 0 && (t->c == 0 || t->n % t->c == 0), "task %d (%s): groups of %d do not divide %d", ti, op, t->c, t->n);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        NEED(t->ref[SLM_REF_SRC1].space != SLM_SPACE_NONE || m->v_norm, "task %d (%s): no gains (only gemma4's V has none)", ti, op);
        if (t->ref[SLM_REF_SRC1].space != SLM_SPACE_NONE) REF(SLM_REF_SRC1, (uint64_t)(t->c ? t->c : t->n) * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
    }
    *usedp |= used;
    return SLM_OK;
}

slm_status blob_check_task(pctx *q, int ti) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const slm_model_config *m = &q->r->c->cfg;
    const int enc_graph = slm_encoder_graph(m); /* bert's graph: its EMBED, LayerNorm and GELU variants */
    const char *op = slm_task_op_name(t->op);
    unsigned used = 0; /* bit per operand */
    uint64_t ext;
    slm_status s;
    if (t->op >= SLM_T_OP_COUNT) return pbad(q, "task %d: op %u unknown", ti, t->op);
    if (t->flags & ~(unsigned)(SLM_TF_ONE_ROW | SLM_TF_DST_COMPACT | SLM_TF_SRC_COMPACT | SLM_TF_NEOX | SLM_TF_PRE_NORM |
                               SLM_TF_PRE_SWIGLU | SLM_TF_POST_ROPE | SLM_TF_POST_ADD | SLM_TF_GELU | SLM_TF_POST_SOFTCAP |
                               SLM_TF_KEY_PARTS | SLM_TF_POST_SCALE | SLM_TF_EXPERT | SLM_TF_EXPERT_GATHER | SLM_TF_SINKS |
                               SLM_TF_DST_CPOS))
        return pbad(q, "task %d (%s): flags 0x%x unknown", ti, op, t->flags);
    if (!cpos_ok(q, t))
        return pbad(q, "task %d (%s): flag DST_CPOS (rows at their cache positions) but for a batch or embed batch "
                    "program's present K/V destination (a matmul, rope, bias, norm or K/V store; a matmul's tile at a "
                    "multiple of 16)", ti, op);
    if ((s = check_family_fields(q, ti)) || (s = check_prologue_epilogue(q, ti))) return s;
    if (t->window && t->op != SLM_T_ATTENTION && t->op != SLM_T_SSM_CONV && t->op != SLM_T_DELTA_NET &&
        !(t->flags & SLM_TF_EXPERT))
        return pbad(q, "task %d (%s): window %d on a non-attention task", ti, op, t->window);
    if (t->m != p->rows) return pbad(q, "task %d (%s): m %d != program rows %d", ti, op, t->m, p->rows);
    if (t->layer < -1 || t->layer >= m->n_layers) return pbad(q, "task %d (%s): layer %d out of range", ti, op, t->layer);
    if (t->op != SLM_T_BARRIER && t->count) return pbad(q, "task %d (%s): count %u on a non-barrier", ti, op, t->count);
    if ((t->flags & SLM_TF_KEY_PARTS) &&
        (t->op != SLM_T_ATTENTION || t->tiles[1] < 2 || t->tiles[0] >= t->tiles[1] || t->tiles[2] || t->f1 != 0.0f))
        return pbad(q, "task %d (%s): key parts {%u, %u, %u} not {part < parts, parts >= 2, 0} of an uncapped attention", ti, op,
                    t->tiles[0], t->tiles[1], t->tiles[2]);
    if (t->op == SLM_T_ATTN_MERGE && (t->tiles[0] || t->tiles[1] < 2 || t->tiles[2]))
        return pbad(q, "task %d (%s): tiles {%u, %u, %u} not {0, parts >= 2, 0}", ti, op, t->tiles[0], t->tiles[1], t->tiles[2]);
    if (t->op == SLM_T_ATTENTION && !(t->flags & SLM_TF_KEY_PARTS) && (t->tiles[0] | t->tiles[1] | t->tiles[2]) &&
        !(t->tiles[1] >= 2 && t->tiles[0] < t->tiles[1] && !t->tiles[2] && p->rows >= 2 && !(t->flags & SLM_TF_ONE_ROW)))
        return pbad(q, "task %d (%s): row part tiles {%u, %u, %u} is not {part < parts, parts >= 2, 0} of a program of several rows",
                    ti, op, t->tiles[0], t->tiles[1], t->tiles[2]);
    if (t->op != SLM_T_MATMUL && t->op != SLM_T_ATTENTION && t->op != SLM_T_ATTN_MERGE && (t->tiles[0] | t->tiles[1] | t->tiles[2]))
        return pbad(q, "task %d (%s): tiles %ux%u k=%u on a task that is not a matrix multiply", ti, op, t->tiles[0], t->tiles[1],
                    t->tiles[2]);
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows;
    switch (t->op) {
    case SLM_T_NOP: case SLM_T_BARRIER: break; /* counts: slm_program_check_schedule */
    case SLM_T_PREFETCH:
        if ((s = check_prefetch(q, ti, &used))) return s;
        break;
    case SLM_T_COPY_ROW:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        MAT((uint64_t)p->rows, SLM_REF_SRC0, (uint64_t)t->n, 0);
        MAT(1, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_EMBED: case SLM_T_RMSNORM:
        if ((s = check_embed_norm(q, ti, &used))) return s;
        break;
    case SLM_T_MATMUL: {
        if ((s = check_matmul(q, ti, &used))) return s;
        char why[120];
        if (slm_amx_tiles_check(t->wtype, (int)R, t->n0, t->n1, t->tiles, why, sizeof why))
            return pbad(q, "task %d (%s): %s", ti, op, why);
        break;
    }
    case SLM_T_ROPE: {
        uint64_t tb = 0;
        NEED(t->c >= 2 && t->c % 2 == 0 && rope_dims_ok(q, t, SLM_REF_SRC2, &tb), "task %d (%s): head_dim c %d / rotated b %d not the pairs of a RoPE table at src2", ti, op, t->c, t->b);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && (int64_t)t->n1 * t->c <= t->n && t->n <= BLOB_MAX_DIM,
             "task %d (%s): heads [%d,%d) x %d beyond width %d", ti, op, t->n0, t->n1, t->c, t->n);
        NEED(t->ref[SLM_REF_SRC2].space == SLM_SPACE_CONST, "task %d (%s): src2 must be the constants", ti, op);
        REF(SLM_REF_SRC1, R * 4, 0);
        REF(SLM_REF_SRC2, tb, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    }
    case SLM_T_ATTENTION:
        if ((s = check_attention(q, ti, &used))) return s;
        break;
    case SLM_T_ATTN_MERGE: {
        NEED(t->a >= 1 && t->c >= 1 && (int64_t)t->a * t->c <= BLOB_MAX_DIM, "task %d (%s): heads a %d x head_dim c %d out of range", ti, op, t->a, t->c);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->a, "task %d (%s): heads [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->a);
        NEED(t->ref[SLM_REF_SRC0].space == SLM_SPACE_ARENA, "task %d (%s): partials not in the arena", ti, op);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->tiles[1] * (uint64_t)t->a * (uint64_t)(t->c + 2), 0);
        if (t->flags & SLM_TF_SINKS) {
            NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): sinks must be in the weights", ti, op);
            REF(SLM_REF_SRC1, (uint64_t)t->a * 4, 0);
        }
        MAT(R, SLM_REF_DST, (uint64_t)t->n1 * (uint64_t)t->c, 1);
        break;
    }
    case SLM_T_ADD:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_BIAS:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        REF(SLM_REF_SRC1, (uint64_t)t->n * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_KV_STORE:
        NEED(t->wtype != SLM_F32 && t->wtype == q->r->c->opt.kv_type, "task %d (%s): KV type %u, the config's is %d", ti, op,
             t->wtype, q->r->c->opt.kv_type);
        NEED(t->layer >= 0 && t->n == slm_layer_kv_dim(m, t->layer), "task %d (%s): n %d != layer %d's kv_dim", ti, op, t->n, t->layer);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        KVR(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_MOE_ROUTE: case SLM_T_MOE_COMBINE:
        if ((s = check_moe(q, ti, &used))) return s;
        break;
    case SLM_T_SLICE: case SLM_T_SSM_CONV: case SLM_T_DELTA_GATE: case SLM_T_DELTA_NET:
        if ((s = check_recurrent(q, ti, &used))) return s;
        break;
    case SLM_T_SWIGLU:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        NEED(t->a == 0 || (t->a == 1 && !(t->flags & SLM_TF_GELU) && m->attn_gate) ||
                 (t->a == 2 && !(t->flags & SLM_TF_GELU) && enc_graph),
             "task %d (%s): gate kind a %d (0 silu, 1 sigmoid with the config's gated attention, 2 an encoder graph's "
             "GELU in place)", ti, op, t->a);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        if (t->a != 2) MAT(R, SLM_REF_SRC1, (uint64_t)t->n, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    default:
        return pbad(q, "task %d: op %u unknown", ti, t->op);
    }
    for (int k = 0; k < SLM_TASK_NREF; k++)
        if (!(used & (1u << k)) && t->ref[k].space != SLM_SPACE_NONE)
            return pbad(q, "task %d (%s): operand %d unused by this op but has space %u", ti, op, k, t->ref[k].space);
#undef NEED
#undef REF
#undef MAT
#undef KVR
    return SLM_OK;
}

