/* Memory planning and lowering of a specialized graph to a task list, and
 * the compile driver that produces both programs. */
#include <math.h>
#include <stdlib.h>

#include "compiler/amx_plan.h"
#include "compiler/compiler.h"

#define ALIGN 64
#define MAX_MATMUL_TILES 8192 /* per matmul; the last tile takes the rest */

/* ---- buffers ----------------------------------------------------------- */

/* Where a node's value lives. In-place ops (rope, add, swiglu) and views
 * (kv_view, outputs) share their input's buffer: `root` names the node that
 * owns the storage. */
typedef struct buf {
    int root;          /* node owning the storage */
    slm_space space;   /* ARENA or IO */
    int io;            /* I/O index when space == IO */
    uint64_t off;      /* arena byte offset */
    uint64_t size;     /* bytes */
    int last_use;      /* last node reading any alias of it */
} buf;

typedef struct lower_ctx {
    const slm_graph *g;
    slm_program *p;
    const slm_compile_options *opt;
    const uint8_t *wbase;
    uint64_t wsize;
    slm_err *err;
    int *root;         /* [n_nodes] storage root of each node */
    buf *bufs;         /* [n_nodes] indexed by root */
    int cap_tasks;
    /* hazard tracking for the current stage */
    int stage_start;   /* index of the first task of the current stage */
    struct region { int obj; uint64_t lo, hi; int write; } *regions;
    int n_regions, cap_regions;
    int seq_rows;      /* batch programs: KV rows of one sequence's region (0: one sequence) */
    uint64_t parts_off; /* arena offset of the attention key parts' partials (after the
                           planned buffers; one buffer serves every layer in turn) */
} lower_ctx;

/* Hazard object of the key parts' partials buffer (not a node's storage). */
#define PARTIALS_OBJ (-7)

/* Decode attention in parts of the KV rows (flash-decoding): programs of a
 * few rows (generate, batch decode) whose sequences hold >= 256 KV rows get
 * capacity / 128 parts, at most 8, over all heads, and a merge task in the
 * next stage. A part reads whole KV rows (every KV head) of its run, where a
 * task of KV heads reads a few lines of each, and the parts keep every
 * thread busy whatever the KV heads (3 KV heads left one of 2 threads idle a
 * third of each attention stage). 0: tasks of heads, no merge. */
static int key_parts(const lower_ctx *c, const slm_node *nd) {
    const int region = c->seq_rows ? c->seq_rows : c->g->rows_c;
    if (c->g->rows_t > 16 || region < 256 || nd->softcap > 0.0f || nd->window < 0) return 0;
    const int parts = region / 128;
    return parts > 8 ? 8 : parts;
}

static int is_inplace(slm_op op) {
    return op == SLM_OP_ROPE || op == SLM_OP_ADD || op == SLM_OP_SWIGLU || op == SLM_OP_KV_VIEW ||
           op == SLM_OP_OUTPUT || op == SLM_OP_BIAS || op == SLM_OP_MOE_COMBINE || op == SLM_OP_SSM_CONV ||
           op == SLM_OP_DELTA_GATE || op == SLM_OP_GELU || op == SLM_OP_EMBED_ADD;
}

/* Sequences a program sees (a state input's rows): a batch program's regions, else 1. */
static int state_seqs(const lower_ctx *c) { return c->seq_rows ? c->g->rows_c / c->seq_rows : 1;
}

/* A present.L.* output when the KV cache holds another type than f32: its
 * rows are computed in the arena and a KV_STORE task converts them into the
 * cache (the output owns its I/O storage instead of aliasing its input). */
static int is_typed_present(const lower_ctx *c, const slm_node *nd) {
    return c->opt->kv_type != SLM_F32 && nd->op == SLM_OP_OUTPUT &&
           (nd->role == SLM_IO_PRESENT_KEY || nd->role == SLM_IO_PRESENT_VALUE);
}

/* The I/O element type of an input or output: the KV type for past/present. */
static uint16_t io_dtype(const lower_ctx *c, const slm_node *nd) {
    if (nd->role == SLM_IO_PAST_KEY || nd->role == SLM_IO_PAST_VALUE || nd->role == SLM_IO_PRESENT_KEY ||
        nd->role == SLM_IO_PRESENT_VALUE)
        return (uint16_t)c->opt->kv_type;
    return (uint16_t)(nd->op == SLM_OP_INPUT ? nd->dtype : SLM_F32);
}

static int io_add(lower_ctx *c, slm_io_role role, int layer, int rows, int cols, uint16_t dtype, int is_out) {
    slm_program *p = c->p;
    slm_io_desc *io = slm_realloc(p->io, (size_t)(p->n_io + 1) * sizeof *io);
    if (!io) return -1;
    p->io = io;
    slm_io_desc *d = &io[p->n_io];
    memset(d, 0, sizeof *d);
    d->role = (uint8_t)role;
    d->is_output = (uint8_t)is_out;
    d->dtype = dtype;
    d->layer = layer;
    d->rows = rows;
    d->cols = cols;
    switch (role) {
    case SLM_IO_PAST_KEY: snprintf(d->name, sizeof d->name, "past_key_values.%d.key", layer); break;
    case SLM_IO_PAST_VALUE: snprintf(d->name, sizeof d->name, "past_key_values.%d.value", layer); break;
    case SLM_IO_PRESENT_KEY: snprintf(d->name, sizeof d->name, "present.%d.key", layer); break;
    case SLM_IO_PRESENT_VALUE: snprintf(d->name, sizeof d->name, "present.%d.value", layer); break;
    case SLM_IO_CONV_STATE: snprintf(d->name, sizeof d->name, "conv_state.%d", layer); break;
    case SLM_IO_RECUR_STATE: snprintf(d->name, sizeof d->name, "recurrent_state.%d", layer); break;
    default: snprintf(d->name, sizeof d->name, "%s", slm_io_role_name(role)); break;
    }
    return p->n_io++;
}

/* Assign storage: I/O for inputs/outputs, arena offsets (first fit over
 * live intervals) for everything else. */
static slm_status plan_memory(lower_ctx *c) {
    const slm_graph *g = c->g;
    int n = g->n_nodes;
    for (int i = 0; i < n; i++) {
        const slm_node *nd = &g->nodes[i];
        c->root[i] = i;
        if (nd->dead) continue;
        if (is_inplace(nd->op) && !is_typed_present(c, nd)) c->root[i] = c->root[nd->in[0]];
        if (nd->op == SLM_OP_MATMUL && nd->post == SLM_OP_ADD) c->root[i] = c->root[nd->in[nd->post_in]];
        buf *b = &c->bufs[i];
        b->root = i;
        b->io = -1;
        b->last_use = i;
    }
    /* I/O: inputs own their storage; outputs turn their root's storage into I/O. */
    for (int i = 0; i < n; i++) {
        const slm_node *nd = &g->nodes[i];
        if (nd->dead) continue;
        if (nd->op == SLM_OP_INPUT) {
            const int st = nd->role == SLM_IO_CONV_STATE || nd->role == SLM_IO_RECUR_STATE;
            int io = io_add(c, nd->role, nd->layer, st ? state_seqs(c) : nd->rows, nd->cols, io_dtype(c, nd), 0);
            if (io < 0) return SLM_ERR_NOMEM;
            c->bufs[i].space = SLM_SPACE_IO;
            c->bufs[i].io = io;
        } else if (nd->op == SLM_OP_OUTPUT) {
            int r = c->root[i]; /* its input's storage, or its own (typed present) */
            if (c->bufs[r].space == SLM_SPACE_IO)
                return slm_errf(c->err, SLM_ERR_INTERNAL, "output %%%d aliases another I/O", i);
            int io = io_add(c, nd->role, nd->layer, nd->rows, nd->cols, io_dtype(c, nd), 1);
            if (io < 0) return SLM_ERR_NOMEM;
            c->bufs[r].space = SLM_SPACE_IO;
            c->bufs[r].io = io;
        }
    }
    /* liveness */
    for (int i = 0; i < n; i++) {
        const slm_node *nd = &g->nodes[i];
        if (nd->dead) continue;
        for (int k = 0; k < nd->n_in; k++) {
            int r = c->root[nd->in[k]];
            if (c->bufs[r].last_use < i) c->bufs[r].last_use = i;
        }
        int r = c->root[i];
        if (c->bufs[r].last_use < i) c->bufs[r].last_use = i;
    }
    /* arena: first fit among live blocks, released after last use */
    typedef struct { uint64_t lo, hi; int root; } live;
    live *lv = slm_calloc((size_t)n + 1, sizeof *lv);
    if (!lv) return SLM_ERR_NOMEM;
    int n_lv = 0;
    uint64_t peak = 0;
    for (int i = 0; i < n; i++) {
        const slm_node *nd = &g->nodes[i];
        /* release blocks whose last use is before i */
        for (int j = 0; j < n_lv;) {
            if (c->bufs[lv[j].root].last_use < i) lv[j] = lv[--n_lv];
            else j++;
        }
        if (nd->dead || c->root[i] != i || c->bufs[i].space == SLM_SPACE_IO) continue;
        if (nd->op == SLM_OP_INPUT) continue;
        uint64_t size = ((uint64_t)nd->rows * (uint64_t)nd->cols * 4 + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
        /* lowest offset that does not overlap a live block */
        uint64_t off = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int j = 0; j < n_lv; j++)
                if (off < lv[j].hi && lv[j].lo < off + size) {
                    off = lv[j].hi;
                    moved = 1;
                }
        }
        lv[n_lv++] = (live){off, off + size, i};
        c->bufs[i].space = SLM_SPACE_ARENA;
        c->bufs[i].off = off;
        c->bufs[i].size = size;
        if (off + size > peak) peak = off + size;
    }
    slm_xfree(lv);
    /* the key parts' partials: rows x parts x heads x (head_dim + 2) floats */
    uint64_t partials = 0;
    for (int i = 0; i < n; i++) {
        const slm_node *nd = &g->nodes[i];
        const int parts = !nd->dead && nd->op == SLM_OP_ATTENTION ? key_parts(c, nd) : 0;
        const uint64_t b = (uint64_t)g->rows_t * (uint64_t)parts * (uint64_t)nd->heads * (uint64_t)(nd->head_dim + 2) * 4;
        if (b > partials) partials = b;
    }
    c->parts_off = (peak + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
    c->p->arena_bytes = partials ? c->parts_off + partials : peak;
    return SLM_OK;
}

/* ---- tasks and barriers -------------------------------------------------- */

static slm_task *new_task(lower_ctx *c, slm_task_op op, int layer) {
    slm_program *p = c->p;
    if (p->n_tasks == c->cap_tasks) {
        int cap = c->cap_tasks ? c->cap_tasks * 2 : 256;
        slm_task *t = slm_realloc(p->tasks, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        p->tasks = t;
        c->cap_tasks = cap;
    }
    slm_task *t = &p->tasks[p->n_tasks++];
    memset(t, 0, sizeof *t);
    t->op = (uint8_t)op;
    t->lane = slm_task_lane(op);
    t->layer = layer;
    t->m = c->g->rows_t;
    return t;
}

/* A memory object for hazard tracking. past.L.* and present.L.* are the
 * same memory at run time (present is a view into past). */
static int hazard_obj(lower_ctx *c, int node, uint64_t *lo, uint64_t *hi) {
    const buf *b = &c->bufs[c->root[node]];
    if (b->space == SLM_SPACE_ARENA) {
        *lo = b->off;
        *hi = b->off + b->size;
        return 0;
    }
    *lo = 0;
    *hi = UINT64_MAX;
    const slm_io_desc *d = &c->p->io[b->io];
    switch (d->role) {
    case SLM_IO_PAST_KEY: case SLM_IO_PRESENT_KEY: return 1000 + 2 * d->layer;
    case SLM_IO_PAST_VALUE: case SLM_IO_PRESENT_VALUE: return 1001 + 2 * d->layer;
    default: return 100 + b->io;
    }
}

static int overlaps(lower_ctx *c, int obj, uint64_t lo, uint64_t hi, int writes_only) {
    for (int i = 0; i < c->n_regions; i++) {
        const struct region *r = &c->regions[i];
        if (r->obj == obj && lo < r->hi && r->lo < hi && (r->write || !writes_only)) return 1;
    }
    return 0;
}

static slm_status add_region(lower_ctx *c, int node, int write) {
    if (c->n_regions == c->cap_regions) {
        int cap = c->cap_regions ? c->cap_regions * 2 : 64;
        struct region *r = slm_realloc(c->regions, (size_t)cap * sizeof *r);
        if (!r) return SLM_ERR_NOMEM;
        c->regions = r;
        c->cap_regions = cap;
    }
    struct region *r = &c->regions[c->n_regions++];
    if (node < 0) { /* the key parts' partials buffer */
        r->obj = PARTIALS_OBJ;
        r->lo = 0;
        r->hi = UINT64_MAX;
    } else {
        r->obj = hazard_obj(c, node, &r->lo, &r->hi);
    }
    r->write = write;
    return SLM_OK;
}

/* End the current stage (if it holds tasks) with a counted barrier. */
static slm_status close_stage(lower_ctx *c) {
    if (c->p->n_tasks == c->stage_start) return SLM_OK;
    slm_task *b = new_task(c, SLM_T_BARRIER, -1);
    if (!b) return SLM_ERR_NOMEM;
    b->count = (uint32_t)(c->p->n_tasks - 1 - c->stage_start);
    c->stage_start = c->p->n_tasks;
    c->n_regions = 0;
    return SLM_OK;
}

/* A region of the partials buffer (its whole extent). */
static slm_status add_partials_region(lower_ctx *c, int write) { return add_region(c, -1, write); }

/* Before emitting node i: if it reads something written in this stage, or
 * writes something read or written in this stage, close the stage with a
 * counted barrier. Then record its accesses. */
static slm_status stage_for(lower_ctx *c, int i) {
    const slm_node *nd = &c->g->nodes[i];
    int need = 0;
    uint64_t lo, hi;
    for (int k = 0; k < nd->n_in && !need; k++) {
        int obj = hazard_obj(c, nd->in[k], &lo, &hi);
        need = overlaps(c, obj, lo, hi, 1);
    }
    if (!need) {
        int obj = hazard_obj(c, i, &lo, &hi);
        need = overlaps(c, obj, lo, hi, 0);
    }
    if (need && close_stage(c)) return SLM_ERR_NOMEM;
    for (int k = 0; k < nd->n_in; k++)
        if (add_region(c, nd->in[k], 0)) return SLM_ERR_NOMEM;
    return add_region(c, i, 1);
}

/* A reference to node `node`'s storage. */
static slm_ref ref_node(lower_ctx *c, int node) {
    const buf *b = &c->bufs[c->root[node]];
    slm_ref r;
    memset(&r, 0, sizeof r);
    r.ld = (uint32_t)c->g->nodes[node].cols;
    if (b->space == SLM_SPACE_IO) {
        r.space = SLM_SPACE_IO;
        r.io = (uint16_t)b->io;
    } else {
        r.space = SLM_SPACE_ARENA;
        r.off = b->off;
    }
    return r;
}

static int ref_is_present(lower_ctx *c, int node) {
    const buf *b = &c->bufs[c->root[node]];
    if (b->space != SLM_SPACE_IO) return 0;
    int role = c->p->io[b->io].role;
    return role == SLM_IO_PRESENT_KEY || role == SLM_IO_PRESENT_VALUE;
}

static slm_status ref_weight(lower_ctx *c, const slm_tensor *w, slm_ref *r) {
    const uint8_t *d = w->data;
    if (d < c->wbase || (uint64_t)(d - c->wbase) + w->nbytes > c->wsize)
        return slm_errf(c->err, SLM_ERR_INTERNAL, "tensor '%s' outside the weights region", w->name);
    memset(r, 0, sizeof *r);
    r->space = SLM_SPACE_WEIGHTS;
    r->off = (uint64_t)(d - c->wbase);
    r->ld = (uint32_t)w->ne[0];
    return SLM_OK;
}

static uint16_t row_flags(lower_ctx *c, int node) {
    uint16_t f = 0;
    if (c->g->nodes[node].rows == 1 && c->g->rows_t > 1) f |= SLM_TF_ONE_ROW;
    if (ref_is_present(c, node)) f |= c->seq_rows ? SLM_TF_DST_CPOS : SLM_TF_DST_COMPACT;
    return f;
}

/* Column bounds of a matmul's tiles: b[0] = 0 < b[1] < ... < b[nt] = n;
 * returns nt. Tile widths are multiples of unit (whole rotation pairs or
 * heads, groups of 16) and, unless asked for, of 16.
 *
 * Prefill: equal tiles whose weight panel stays within tile_kb (a share of
 * the per-core L2), an even number when more than one, so two threads
 * finish a matmul together.
 *
 * Decode (one input row): the panel streams through once and is not
 * reused, so the budget only sets how many tasks share the matrix. Big
 * tiles (8x the budget: fewer claims, fewer restarts of the prefetchers)
 * cover all but the last big tile's worth of columns, which is cut into
 * small tiles (half the budget). The scheduling pass runs a stage's big
 * tiles first, so the threads share out the small ones at the end of each
 * stage and arrive at its barrier together whatever their speeds (one
 * thread of a VM reading 7% slower left the other waiting 77 us at every
 * gate/up stage with equal tiles). At least two tiles, so both threads of
 * a typical CPU share every matrix. */
static int matmul_bounds(lower_ctx *c, int n, int k, uint32_t wtype, int unit, int *b, int max) {
    int nt = 0;
    b[nt] = 0;
    if (c->opt->matmul_tile_cols > 0) { /* as asked, rounded up to the unit */
        const int w = (c->opt->matmul_tile_cols + unit - 1) / unit * unit;
        for (int n0 = 0; n0 < n && nt < max; n0 += w) b[++nt] = n0 + w < n ? n0 + w : n;
        b[nt] = n;
        return nt;
    }
    if (unit < 16) unit = 16;
    uint64_t row = slm_row_bytes(wtype, (uint64_t)k);
    if (!row) row = (uint64_t)k * 4;
    const uint64_t total = row * (uint64_t)n;
    const uint64_t budget = (uint64_t)(c->opt->tile_kb > 0 ? c->opt->tile_kb : 256) << 10;
    const int decode = c->g->rows_t == 1;
    const uint64_t big_b = decode ? budget * 8 : budget, small_b = budget / 2;
    uint64_t nb = (total + big_b - 1) / big_b;
    const uint64_t min_tiles = decode && n >= 32 ? 2 : 1;
    if (nb < min_tiles) nb = min_tiles;
    if (nb > 1 && (nb & 1)) nb++; /* even: two threads finish together */
#define ROUND_COLS(x) ((int)(((x) + (uint64_t)unit - 1) / (uint64_t)unit * (uint64_t)unit))
    int big = ROUND_COLS(((uint64_t)n + nb - 1) / nb);
    if (big > n) big = n;
    /* decode: the columns of the last big tile go into small tiles */
    int tail = decode && nb > 1 ? n - big * (int)(nb - 1) : 0;
    if (tail <= 0) tail = 0;
    int small = ROUND_COLS(small_b / row > 0 ? small_b / row : 1);
    if (tail > 0 && small >= tail) tail = 0; /* one small tile would be the big one */
    const int head = n - tail;
    for (int n0 = 0; n0 < head && nt < max - 1; n0 += big) b[++nt] = n0 + big < head ? n0 + big : head;
    for (int n0 = head; n0 < n && nt < max - 1; n0 += small) b[++nt] = n0 + small < n ? n0 + small : n;
#undef ROUND_COLS
    b[nt] = n;
    return nt;
}

/* An attention task of node i over heads [h0, h1): the node's fields and
 * operands (dst: the node's storage; a key part replaces it). */
static slm_task *attention_task(lower_ctx *c, int i, const slm_node *nd, int h0, int h1) {
    slm_task *t = new_task(c, SLM_T_ATTENTION, nd->layer);
    if (!t) return NULL;
    t->n = nd->cols;
    t->n0 = h0;
    t->n1 = h1;
    t->a = nd->heads;
    t->b = nd->kv_heads;
    t->c = nd->head_dim;
    t->k = c->seq_rows ? c->seq_rows : c->g->rows_c;
    t->window = nd->window;
    t->f0 = nd->scale;
    t->f1 = nd->softcap;
    t->f2 = nd->alibi; /* an encoder's (jina-bert-v2) */
    t->wtype = (uint8_t)c->opt->kv_type;
    t->flags = row_flags(c, i);
    for (int k = 0; k < 5; k++) t->ref[k] = ref_node(c, nd->in[k]);
    t->ref[SLM_REF_DST] = ref_node(c, i);
    if (nd->weight) { /* sinks (gpt-oss): in place of the cache positions, which the executor has */
        t->flags |= SLM_TF_SINKS;
        if (ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC4])) return NULL;
    }
    return t;
}

/* An attention node in key parts (key_parts): the parts into the partials
 * buffer, a barrier, the merge into the node's storage. */
static slm_status lower_attention_keys(lower_ctx *c, int i, const slm_node *nd) {
    const int heads = nd->heads, parts = key_parts(c, nd);
    slm_ref partials;
    memset(&partials, 0, sizeof partials);
    partials.space = SLM_SPACE_ARENA;
    partials.off = c->parts_off;
    partials.ld = (uint32_t)(parts * heads * (nd->head_dim + 2));
    /* the previous layer's merge read the buffer: it must be done (it is, stages ago) */
    if (overlaps(c, PARTIALS_OBJ, 0, UINT64_MAX, 0) && close_stage(c)) return SLM_ERR_NOMEM;
    if (add_partials_region(c, 1)) return SLM_ERR_NOMEM;
    for (int part = 0; part < parts; part++) {
        slm_task *t = attention_task(c, i, nd, 0, heads);
        if (!t) return SLM_ERR_NOMEM;
        t->tiles[0] = (uint8_t)part;
        t->tiles[1] = (uint8_t)parts;
        t->flags |= SLM_TF_KEY_PARTS;
        if (t->flags & SLM_TF_SINKS) { /* the merge adds the sinks */
            t->flags &= (uint16_t)~SLM_TF_SINKS;
            t->ref[SLM_REF_SRC4] = ref_node(c, nd->in[4]);
        }
        t->ref[SLM_REF_DST] = partials;
    }
    if (close_stage(c)) return SLM_ERR_NOMEM;
    slm_task *t = new_task(c, SLM_T_ATTN_MERGE, nd->layer);
    if (!t) return SLM_ERR_NOMEM;
    t->tiles[1] = (uint8_t)parts;
    t->n = nd->cols;
    t->n0 = 0;
    t->n1 = heads;
    t->a = heads;
    t->c = nd->head_dim;
    t->flags = row_flags(c, i);
    t->ref[SLM_REF_SRC0] = partials;
    if (nd->weight) {
        t->flags |= SLM_TF_SINKS;
        slm_status s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]);
        if (s) return s;
    }
    t->ref[SLM_REF_DST] = ref_node(c, i);
    if (add_partials_region(c, 0) || add_region(c, i, 1)) return SLM_ERR_NOMEM;
    return SLM_OK;
}

/* An attention node: tasks of whole heads (prefill: of whole KV groups)
 * times, in programs of >= 64 rows, row parts of equal work. */
static slm_status lower_attention(lower_ctx *c, int i, const slm_node *nd) {
    slm_task *t;
    const int heads = nd->heads, rows = c->g->rows_t;
    int per = heads >= 4 ? (heads + 3) / 4 : 1; /* up to 4 tiles of whole heads */
    int parts = 1;
    if (key_parts(c, nd)) return lower_attention_keys(c, i, nd);
    if (rows >= 64 && nd->kv_heads >= 1 && heads % nd->kv_heads == 0) {
        /* several rows: up to 4 tiles of whole KV groups (a block of rows converts each KV
           tile once for its group), times row parts of equal work, ~16 tasks in all, each
           part 32 rows or more on average (the block entry's blocks are up to 64) */
        const int group = heads / nd->kv_heads, gpt = (nd->kv_heads + 3) / 4;
        per = gpt * group;
        const int tiles = (heads + per - 1) / per;
        parts = (16 + tiles - 1) / tiles;
        if (parts > rows / 32) parts = rows / 32;
        if (parts > 255) parts = 255;
        if (parts < 1) parts = 1;
    }
    for (int h0 = 0; h0 < heads; h0 += per)
        for (int part = 0; part < parts; part++) {
            if (!(t = attention_task(c, i, nd, h0, h0 + per < heads ? h0 + per : heads))) return SLM_ERR_NOMEM;
            if (parts > 1) {
                t->tiles[0] = (uint8_t)part;
                t->tiles[1] = (uint8_t)parts;
            }
        }
    return SLM_OK;
}

/* A typed present.L.* output: its rows (f32, in the arena) converted to the
 * KV type into the cache at the write index. */
static slm_status lower_kv_store(lower_ctx *c, int i) {
    const slm_node *nd = &c->g->nodes[i];
    slm_task *t = new_task(c, SLM_T_KV_STORE, nd->layer);
    if (!t) return SLM_ERR_NOMEM;
    t->wtype = (uint8_t)c->opt->kv_type;
    t->n = nd->cols;
    t->flags = row_flags(c, i);
    t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
    t->ref[SLM_REF_DST] = ref_node(c, i);
    return SLM_OK;
}

/* Mixture of experts: the routing table (one task), each expert's matmul
 * tiles over the rows routed to it (every expert's tasks exist; one that no
 * row picked returns at once), and the weighted sum in column tiles. */
static slm_status lower_moe(lower_ctx *c, int i, const slm_node *nd) {
    slm_task *t;
    slm_status s;
    const int K = nd->n_used, E = nd->n_experts;
    if (nd->op == SLM_OP_MOE_ROUTE) {
        if (!(t = new_task(c, SLM_T_MOE_ROUTE, nd->layer))) return SLM_ERR_NOMEM;
        t->n = E;
        t->c = K;
        t->a = nd->expert_norm;
        t->b = nd->expert_sigmoid;
        t->f2 = nd->scale != 1.0f ? nd->scale : 0.0f;
        t->flags = row_flags(c, i);
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        if (nd->weight && (s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]))) return s; /* the selection bias */
        if (nd->weight2 && (s = ref_weight(c, nd->weight2, &t->ref[SLM_REF_SRC2]))) return s; /* the down scales */
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    }
    if (nd->op == SLM_OP_MOE_COMBINE) {
        const int n = nd->cols, parts = c->g->rows_t >= 16 ? 8 : 1;
        const int w = n / parts > 16 ? (n / parts + 15) / 16 * 16 : 16; /* >= 16: a dim under 8 takes one tile */
        for (int n0 = 0; n0 < n; n0 += w) {
            if (!(t = new_task(c, SLM_T_MOE_COMBINE, nd->layer))) return SLM_ERR_NOMEM;
            t->n = n;
            t->n0 = n0;
            t->n1 = n0 + w < n ? n0 + w : n;
            t->c = K;
            t->f2 = nd->scale != 1.0f ? nd->scale : 0.0f;
            t->flags = row_flags(c, i);
            t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[1]);
            t->ref[SLM_REF_SRC0].ld = (uint32_t)n;
            t->ref[SLM_REF_SRC3] = ref_node(c, nd->in[2]);
            t->ref[SLM_REF_DST] = ref_node(c, i);
            t->a = nd->n_in > 4 ? 2 : nd->n_in > 3; /* the shared expert, gated or not */
            t->b = nd->moe_set;                      /* gemma4: the sum alone, not into x */
            if (t->a) t->ref[SLM_REF_SRC1] = ref_node(c, nd->in[3]);
            if (t->a == 2) t->ref[SLM_REF_SRC2] = ref_node(c, nd->in[4]);
        }
        return SLM_OK;
    }
    /* MOE_MATMUL: rows of width n = cols / K */
    const int n = nd->cols / K, k = nd->gather ? c->g->nodes[nd->in[0]].cols : c->g->nodes[nd->in[0]].cols / K;
    const int route = nd->in[nd->n_in - 1]; /* after x (gather), gate and up, or up alone (pre GELU) */
    int bounds[MAX_MATMUL_TILES + 1];
    for (int e = 0; e < E; e++) {
        const slm_tensor *w = nd->experts[e];
        if (w->ne[0] != k || w->ne[1] != n || w->type != nd->experts[0]->type)
            return slm_errf(c->err, SLM_ERR_INTERNAL, "node %%%d: expert %d's matrix '%s' is not [%d, %d] of %s", i, e,
                            w->name, k, n, slm_dtype_name(nd->experts[0]->type));
        const int nt = matmul_bounds(c, n, k, w->type, 1, bounds, MAX_MATMUL_TILES);
        for (int j = 0; j < nt; j++) {
            if (!(t = new_task(c, SLM_T_MATMUL, nd->layer))) return SLM_ERR_NOMEM;
            t->wtype = (uint8_t)w->type;
            t->n = n;
            t->k = k;
            t->n0 = bounds[j];
            t->n1 = bounds[j + 1];
            t->b = e;
            t->c = K;
            t->window = E;
            /* gemma4's GeGLU experts; nomic-bert-moe's ungated GELU (PRE_SWIGLU | GELU, no src2) */
            t->flags = SLM_TF_EXPERT | (nd->gather ? SLM_TF_EXPERT_GATHER : SLM_TF_PRE_SWIGLU) |
                       (!nd->gather && (nd->gelu || nd->pre == SLM_OP_GELU) ? SLM_TF_GELU : 0);
            slm_amx_choose(t->wtype, t->m, t->n0, t->n1, t->tiles);
            t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
            t->ref[SLM_REF_SRC0].ld = (uint32_t)k;
            if ((s = ref_weight(c, w, &t->ref[SLM_REF_SRC1]))) return s;
            if (!nd->gather && nd->pre != SLM_OP_GELU) {
                t->ref[SLM_REF_SRC2] = ref_node(c, nd->in[1]);
                t->ref[SLM_REF_SRC2].ld = (uint32_t)k;
                if (nd->oai_limit > 0.0f) { /* gpt-oss's clamped SwiGLU */
                    t->f0 = nd->oai_alpha;
                    t->f1 = nd->oai_limit;
                }
            }
            if (nd->expert_bias && (s = ref_weight(c, nd->expert_bias[e], &t->ref[SLM_REF_SRC4]))) return s;
            t->ref[SLM_REF_SRC3] = ref_node(c, route);
            t->ref[SLM_REF_DST] = ref_node(c, i);
            t->ref[SLM_REF_DST].ld = (uint32_t)n;
        }
    }
    return SLM_OK;
}

/* The DeltaNet nodes (qwen35): the slices of the gated query, the conv in
 * channel tiles, the decay (one task), the delta rule in tiles of value
 * heads; the conv and the delta rule take their state input (one row per
 * sequence: `window`) and find a row's sequence by its cache position (k:
 * the rows of one region). */
static slm_status lower_recurrent(lower_ctx *c, int i, const slm_node *nd) {
    slm_task *t;
    slm_status s;
    const int region = c->seq_rows ? c->seq_rows : c->g->rows_c;
    switch (nd->op) {
    case SLM_OP_SLICE:
        if (!(t = new_task(c, SLM_T_SLICE, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->k = c->g->nodes[nd->in[0]].cols;
        t->c = nd->group;
        t->b = nd->head_dim;
        t->a = nd->offset;
        t->flags = row_flags(c, i);
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_SSM_CONV: { /* channel tiles: up to 8, of 64 channels or more */
        const int n = nd->cols, w = n / 8 > 64 ? (n + 7) / 8 : 64;
        for (int n0 = 0; n0 < n; n0 += w) {
            if (!(t = new_task(c, SLM_T_SSM_CONV, nd->layer))) return SLM_ERR_NOMEM;
            t->n = n;
            t->n0 = n0;
            t->n1 = n0 + w < n ? n0 + w : n;
            t->c = nd->head_dim;
            t->k = region;
            t->window = state_seqs(c);
            t->flags = row_flags(c, i);
            t->ref[SLM_REF_SRC1] = ref_node(c, nd->in[1]);
            if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC2]))) return s;
            t->ref[SLM_REF_DST] = ref_node(c, i);
        }
        return SLM_OK;
    }
    case SLM_OP_DELTA_GATE:
        if (!(t = new_task(c, SLM_T_DELTA_GATE, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->flags = row_flags(c, i);
        if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1])) || (s = ref_weight(c, nd->weight2, &t->ref[SLM_REF_SRC2])))
            return s;
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_DELTA_NET: { /* tiles of value heads: up to 8 */
        const int H = nd->heads, per = (H + 7) / 8;
        for (int h0 = 0; h0 < H; h0 += per) {
            if (!(t = new_task(c, SLM_T_DELTA_NET, nd->layer))) return SLM_ERR_NOMEM;
            t->n = nd->cols;
            t->n0 = h0;
            t->n1 = h0 + per < H ? h0 + per : H;
            t->a = nd->kv_heads;
            t->b = H;
            t->c = nd->head_dim;
            t->k = region;
            t->window = state_seqs(c);
            t->f0 = nd->eps;
            t->flags = row_flags(c, i);
            for (int k = 0; k < 4; k++) t->ref[k] = ref_node(c, nd->in[k]);
            t->ref[SLM_REF_DST] = ref_node(c, i);
        }
        return SLM_OK;
    }
    default:
        return slm_errf(c->err, SLM_ERR_INTERNAL, "node %%%d: cannot lower %s", i, slm_op_name(nd->op));
    }
}

/* The encoders' nodes (bert, nomic-bert) as variants of the decoder's
 * tasks: an accumulating EMBED, a centred RMSNORM with a bias, a GELU
 * SWIGLU in place. */
static slm_status lower_encoder(lower_ctx *c, int i, const slm_node *nd) {
    slm_task *t;
    slm_status s;
    switch (nd->op) {
    case SLM_OP_EMBED_ADD: /* EMBED accumulating: a = 1 rows by ids, 3 row 0 on every row */
        if (!(t = new_task(c, SLM_T_EMBED, nd->layer))) return SLM_ERR_NOMEM;
        t->wtype = (uint8_t)nd->weight->type;
        t->n = nd->cols;
        t->k = (int32_t)nd->weight->ne[1];
        t->a = nd->in[1] >= 0 ? 1 : 3;
        t->flags = row_flags(c, i);
        if (nd->in[1] >= 0) t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[1]);
        if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]))) return s;
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_LAYERNORM: /* RMSNORM with a = 1: centred, plus the bias src2 */
        if (!(t = new_task(c, SLM_T_RMSNORM, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->a = 1;
        t->f0 = nd->eps;
        t->flags = row_flags(c, i);
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1])) ||
            (nd->weight2 && (s = ref_weight(c, nd->weight2, &t->ref[SLM_REF_SRC2])))) /* none: modern-bert's */
            return s;
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_GELU: /* SWIGLU with a = 2: gelu_tanh of dst in place */
        if (!(t = new_task(c, SLM_T_SWIGLU, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->a = 2;
        t->flags = row_flags(c, i);
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    default:
        return slm_errf(c->err, SLM_ERR_INTERNAL, "node %%%d: cannot lower %s", i, slm_op_name(nd->op));
    }
}

static slm_status lower_node(lower_ctx *c, int i) {
    const slm_node *nd = &c->g->nodes[i];
    slm_task *t;
    slm_status s;
    switch (nd->op) {
    case SLM_OP_OUTPUT:
        if (is_typed_present(c, nd)) break; /* a KV_STORE task */
        return SLM_OK;
    case SLM_OP_INPUT: case SLM_OP_KV_VIEW:
        return SLM_OK; /* no work: storage is bound or aliased */
    case SLM_OP_READ_VALUE: case SLM_OP_ASSIGN: case SLM_OP_CONCAT:
        return slm_errf(c->err, SLM_ERR_INTERNAL, "node %%%d: %s left after the state pass", i, slm_op_name(nd->op));
    default: break;
    }
    if ((s = stage_for(c, i))) return s;
    switch (nd->op) {
    case SLM_OP_EMBED:
        if (!(t = new_task(c, SLM_T_EMBED, nd->layer))) return SLM_ERR_NOMEM;
        t->wtype = (uint8_t)nd->weight->type;
        t->n = nd->cols;
        t->k = (int32_t)nd->weight->ne[1];
        t->f0 = nd->scale;
        t->flags = row_flags(c, i);
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]))) return s;
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_EMBED_ADD: case SLM_OP_LAYERNORM: case SLM_OP_GELU:
        return lower_encoder(c, i, nd);
    case SLM_OP_RMSNORM:
        if (!(t = new_task(c, SLM_T_RMSNORM, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->c = nd->group;
        t->f0 = nd->eps;
        t->flags = row_flags(c, i);
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        if (nd->weight && (s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]))) return s; /* none: gemma4's V */
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_MATMUL: {
        int n = nd->cols, k = c->g->nodes[nd->in[0]].cols;
        /* a tile holds whole rotation pairs (whole heads for neox), or whole groups of 16 */
        const int unit = nd->post == SLM_OP_ADD ? 16 : nd->post != SLM_OP_ROPE ? 1 : nd->neox ? nd->head_dim : 2;
        int bounds[MAX_MATMUL_TILES + 1];
        /* a repacked matrix's last n % 16 rows are in the base layout: a tile
         * of their own, of the base type */
        const int r16_tail = slm_is_r16(nd->weight->type) ? n % 16 : 0;
        int nt = matmul_bounds(c, n - r16_tail, k, nd->weight->type, unit, bounds, MAX_MATMUL_TILES - 1);
        if (r16_tail) bounds[++nt] = n;
        for (int j = 0; j < nt; j++) {
            if (!(t = new_task(c, SLM_T_MATMUL, nd->layer))) return SLM_ERR_NOMEM;
            t->wtype = (uint8_t)(r16_tail && j == nt - 1 ? slm_r16_base(nd->weight->type) : nd->weight->type);
            t->n = n;
            t->k = k;
            t->n0 = bounds[j];
            t->n1 = bounds[j + 1];
            t->flags = row_flags(c, i);
            /* the matrix engine's tile step for this tile (prefill on its types) */
            slm_amx_choose(t->wtype, (t->flags & SLM_TF_ONE_ROW) ? 1 : t->m, t->n0, t->n1, t->tiles);
            t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
            if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]))) return s;
            if (nd->pre == SLM_OP_RMSNORM) {
                t->flags |= SLM_TF_PRE_NORM;
                t->f0 = nd->eps;
                if ((s = ref_weight(c, nd->weight2, &t->ref[SLM_REF_SRC2]))) return s;
            } else if (nd->pre == SLM_OP_SWIGLU) {
                t->flags |= SLM_TF_PRE_SWIGLU | (nd->gelu ? SLM_TF_GELU : 0);
                t->ref[SLM_REF_SRC2] = ref_node(c, nd->in[1]);
            }
            if (nd->post == SLM_OP_ADD) t->flags |= SLM_TF_POST_ADD; /* dst is the residual */
            if (nd->post == SLM_OP_ROPE) {
                t->flags |= SLM_TF_POST_ROPE | (nd->neox ? SLM_TF_NEOX : 0);
                t->c = nd->head_dim;
                t->b = nd->rot;
                t->ref[SLM_REF_SRC3] = ref_node(c, nd->in[nd->post_in]);
                t->ref[SLM_REF_SRC4].space = SLM_SPACE_CONST;
                t->ref[SLM_REF_SRC4].off = (uint64_t)nd->table * c->g->rope_table_bytes;
            }
            if (nd->softcap > 0.0f) {
                t->flags |= SLM_TF_POST_SOFTCAP;
                t->f1 = nd->softcap;
            }
            if (nd->scale != 0.0f && nd->scale != 1.0f) { /* granite: residual / logit scale */
                t->flags |= SLM_TF_POST_SCALE;
                t->f2 = nd->scale;
            }
            t->ref[SLM_REF_DST] = ref_node(c, i);
        }
        return SLM_OK;
    }
    case SLM_OP_ROPE:
        if (!(t = new_task(c, SLM_T_ROPE, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->n0 = 0;
        t->n1 = nd->heads;
        t->c = nd->head_dim;
        t->b = nd->rot;
        t->flags = row_flags(c, i) | (nd->neox ? SLM_TF_NEOX : 0);
        t->ref[SLM_REF_SRC1] = ref_node(c, nd->in[1]);
        t->ref[SLM_REF_SRC2].space = SLM_SPACE_CONST;
        t->ref[SLM_REF_SRC2].off = (uint64_t)nd->table * c->g->rope_table_bytes;
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_ATTENTION:
        return lower_attention(c, i, nd);
    case SLM_OP_ADD: case SLM_OP_SWIGLU:
        if (!(t = new_task(c, nd->op == SLM_OP_ADD ? SLM_T_ADD : SLM_T_SWIGLU, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->flags = row_flags(c, i) | (nd->op == SLM_OP_SWIGLU && nd->gelu ? SLM_TF_GELU : 0);
        t->a = nd->op == SLM_OP_SWIGLU && nd->sigmoid; /* qwen35: sigmoid(gate) * up */
        if (nd->op == SLM_OP_ADD) {
            t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[1]);
            t->f2 = nd->scale; /* gemma4: the sum times the layer's output scale */
        } else {
            t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
            t->ref[SLM_REF_SRC1] = ref_node(c, nd->in[1]);
            t->ref[SLM_REF_SRC1].off += (uint64_t)nd->col0 * 4; /* a slice of a wider `up` (ld its width) */
        }
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_BIAS:
        if (!(t = new_task(c, SLM_T_BIAS, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->flags = row_flags(c, i);
        if ((s = ref_weight(c, nd->weight, &t->ref[SLM_REF_SRC1]))) return s;
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    case SLM_OP_OUTPUT:
        return lower_kv_store(c, i);
    case SLM_OP_MOE_ROUTE: case SLM_OP_MOE_MATMUL: case SLM_OP_MOE_COMBINE:
        return lower_moe(c, i, nd);
    case SLM_OP_SLICE: case SLM_OP_SSM_CONV: case SLM_OP_DELTA_GATE: case SLM_OP_DELTA_NET:
        return lower_recurrent(c, i, nd);
    case SLM_OP_LAST_ROW:
        if (!(t = new_task(c, SLM_T_COPY_ROW, nd->layer))) return SLM_ERR_NOMEM;
        t->n = nd->cols;
        t->ref[SLM_REF_SRC0] = ref_node(c, nd->in[0]);
        t->ref[SLM_REF_DST] = ref_node(c, i);
        return SLM_OK;
    default:
        return slm_errf(c->err, SLM_ERR_INTERNAL, "node %%%d: cannot lower %s", i, slm_op_name(nd->op));
    }
}

static int reloc_cmp(const void *a, const void *b) {
    const slm_reloc *x = a, *y = b;
    if (x->io != y->io) return x->io < y->io ? -1 : 1;
    if (x->task != y->task) return x->task < y->task ? -1 : 1;
    return (int)x->field - (int)y->field;
}

static slm_status lower_impl(slm_program *p, const slm_graph *g, const slm_compile_options *opt, int seq_rows,
                             const void *weights_base, uint64_t weights_size, slm_err *err);

slm_status slm_lower(slm_program *p, const slm_graph *g, const slm_compile_options *opt,
                     const void *weights_base, uint64_t weights_size, slm_err *err) {
    return lower_impl(p, g, opt, 0, weights_base, weights_size, err);
}

slm_status slm_lower_batch(slm_program *p, const slm_graph *g, const slm_compile_options *opt, int seq_rows,
                           const void *weights_base, uint64_t weights_size, slm_err *err) {
    return lower_impl(p, g, opt, seq_rows, weights_base, weights_size, err);
}

static slm_status lower_impl(slm_program *p, const slm_graph *g, const slm_compile_options *opt, int seq_rows,
                             const void *weights_base, uint64_t weights_size, slm_err *err) {
    lower_ctx c;
    memset(&c, 0, sizeof c);
    c.seq_rows = seq_rows;
    c.g = g;
    c.p = p;
    c.opt = opt;
    c.wbase = weights_base;
    c.wsize = weights_size;
    c.err = err;
    p->rows = g->rows_t;
    p->kv_capacity = g->rows_c;
    slm_status s = SLM_ERR_NOMEM;
    c.root = slm_calloc((size_t)g->n_nodes + 1, sizeof *c.root);
    c.bufs = slm_calloc((size_t)g->n_nodes + 1, sizeof *c.bufs);
    if (!c.root || !c.bufs) goto fail_free_ctx;
    if ((s = plan_memory(&c))) goto fail_free_ctx;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        if ((s = lower_node(&c, i))) goto fail_free_ctx;
    }
    /* the last stage ends with a barrier too: the fence */
    slm_task *b = new_task(&c, SLM_T_BARRIER, -1);
    if (!b) { s = SLM_ERR_NOMEM; goto fail_free_ctx; }
    b->count = (uint32_t)(p->n_tasks - 1 - c.stage_start);
    /* lanes, prefetch tasks and the barriers' producer / consumer counts */
    if ((s = slm_pass_schedule(p, opt, err))) goto fail_free_ctx;

    /* relocation table: every operand bound to an I/O tensor */
    int n_rel = 0;
    for (int i = 0; i < p->n_tasks; i++)
        for (int k = 0; k < SLM_TASK_NREF; k++) n_rel += p->tasks[i].ref[k].space == SLM_SPACE_IO;
    p->relocs = slm_calloc((size_t)n_rel + 1, sizeof *p->relocs);
    if (!p->relocs) { s = SLM_ERR_NOMEM; goto fail_free_ctx; }
    for (int i = 0; i < p->n_tasks; i++)
        for (int k = 0; k < SLM_TASK_NREF; k++)
            if (p->tasks[i].ref[k].space == SLM_SPACE_IO)
                p->relocs[p->n_relocs++] = (slm_reloc){(uint32_t)i, (uint16_t)k, p->tasks[i].ref[k].io};
    qsort(p->relocs, (size_t)p->n_relocs, sizeof *p->relocs, reloc_cmp);
    s = SLM_OK;
fail_free_ctx:
    if (s && err && err->status == SLM_OK) slm_errf(err, s, "lowering %s: %s", g->name, slm_status_str(s));
    slm_xfree(c.root);
    slm_xfree(c.bufs);
    slm_xfree(c.regions);
    return s;
}
