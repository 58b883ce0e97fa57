/* Graph passes: state -> I/O, specialization, last-row selection. */
#include "common/dtype.h"
#include "compiler/compiler.h"

/* ConvertAssignReadValueToReturnsAndInputs, with one change that removes the
 * article's copy_kvcache: the present rows are not a separate buffer that
 * the runtime later copies into the past; they are stored in place, at the
 * write index of the past buffer (kv_view). Requires the pattern
 *   p = ReadValue(v); c = Concat(p, new); Assign(v, c)
 * and rewrites it to
 *   p = Input(past_key_values.L.*); Output(present.L.*) = new; c = kv_view(p, new). */
slm_status slm_pass_state_to_io(slm_graph *g, slm_err *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        slm_node *rv = &g->nodes[i];
        if (rv->dead || rv->op != SLM_OP_READ_VALUE) continue;
        int var = rv->var;
        int concat = -1, assign = -1;
        for (int j = i + 1; j < g->n_nodes; j++) {
            slm_node *n = &g->nodes[j];
            if (n->dead) continue;
            if (n->op == SLM_OP_CONCAT && n->in[0] == i) {
                if (concat >= 0)
                    return slm_errf(err, SLM_ERR_UNSUPPORTED, "state var %d: read by two concats", var);
                concat = j;
            } else if (n->op == SLM_OP_ASSIGN && n->var == var) {
                if (assign >= 0)
                    return slm_errf(err, SLM_ERR_UNSUPPORTED, "state var %d: assigned twice", var);
                assign = j;
            } else {
                for (int k = 0; k < n->n_in; k++)
                    if (n->in[k] == i)
                        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                                        "state var %d: ReadValue used by %s, not a concat", var,
                                        slm_op_name(n->op));
            }
        }
        if (concat < 0 || assign < 0 || g->nodes[assign].in[0] != concat)
            return slm_errf(err, SLM_ERR_UNSUPPORTED,
                            "state var %d: expected ReadValue -> Concat -> Assign", var);
        int is_v = var & 1;
        int layer = var / 2;
        int fresh = g->nodes[concat].in[1];

        rv->op = SLM_OP_INPUT;
        rv->role = is_v ? SLM_IO_PAST_VALUE : SLM_IO_PAST_KEY;
        rv->layer = layer;

        slm_node *as = &g->nodes[assign];
        as->op = SLM_OP_OUTPUT;
        as->role = is_v ? SLM_IO_PRESENT_VALUE : SLM_IO_PRESENT_KEY;
        as->layer = layer;
        as->in[0] = fresh;
        as->n_in = 1;
        as->rows = g->nodes[fresh].rows;
        as->var = -1;

        g->nodes[concat].op = SLM_OP_KV_VIEW;
        rv->var = -1;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && (g->nodes[i].op == SLM_OP_READ_VALUE || g->nodes[i].op == SLM_OP_ASSIGN))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "node %%%d: unpaired %s", i,
                            slm_op_name(g->nodes[i].op));
    return SLM_OK;
}

slm_status slm_pass_specialize(slm_graph *g, int rows_t, int rows_c, slm_err *err) {
    if (rows_t <= 0 || rows_c <= 0 || rows_t > rows_c)
        return slm_errf(err, SLM_ERR_ARG, "specialize: bad rows T=%d C=%d", rows_t, rows_c);
    for (int i = 0; i < g->n_nodes; i++) {
        slm_node *n = &g->nodes[i];
        if (n->rows == SLM_DIM_T) n->rows = rows_t;
        else if (n->rows == SLM_DIM_C) n->rows = rows_c;
        if (n->rows <= 0) return slm_errf(err, SLM_ERR_INTERNAL, "specialize: node %%%d has no rows", i);
    }
    g->rows_t = rows_t;
    g->rows_c = rows_c;
    return SLM_OK;
}

/* Insert node `nn` before position `at`, renumbering references. */
static slm_status insert_before(slm_graph *g, int at, const slm_node *nn) {
    if (slm_graph_add(g, nn) < 0) return SLM_ERR_NOMEM; /* grow by one */
    memmove(&g->nodes[at + 1], &g->nodes[at], (size_t)(g->n_nodes - 1 - at) * sizeof(slm_node));
    g->nodes[at] = *nn;
    for (int i = at + 1; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= at) g->nodes[i].in[k]++;
    return SLM_OK;
}

/* Prefill needs logits of the last input row only (right-aligned padding
 * puts the newest token there). Select that row before the final norm so the
 * norm and the LM head run on one row instead of T. */
slm_status slm_pass_last_row(slm_graph *g, slm_err *err) {
    int out = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == SLM_OP_OUTPUT && g->nodes[i].role == SLM_IO_LOGITS) out = i;
    if (out < 0) return slm_errf(err, SLM_ERR_INTERNAL, "last_row: no logits output");
    int head = g->nodes[out].in[0];
    if (g->nodes[head].op != SLM_OP_MATMUL) return slm_errf(err, SLM_ERR_INTERNAL, "last_row: logits not from a matmul");
    int norm = g->nodes[head].in[0];
    if (g->nodes[norm].op != SLM_OP_RMSNORM) return slm_errf(err, SLM_ERR_INTERNAL, "last_row: no final norm");
    if (g->rows_t <= 1) return SLM_OK; /* already one row */
    int x = g->nodes[norm].in[0];

    slm_node sel;
    memset(&sel, 0, sizeof sel);
    sel.op = SLM_OP_LAST_ROW;
    sel.in[0] = x;
    for (int k = 1; k < 5; k++) sel.in[k] = -1;
    sel.n_in = 1;
    sel.rows = 1;
    sel.cols = g->nodes[x].cols;
    sel.dtype = SLM_F32;
    sel.layer = -1;
    sel.var = -1;
    slm_status s = insert_before(g, norm, &sel);
    if (s) return slm_errf(err, s, "out of memory");
    /* norm moved to norm+1, head to head+1, out to out+1 */
    g->nodes[norm + 1].in[0] = norm;
    g->nodes[norm + 1].rows = 1;
    g->nodes[head + 1].rows = 1;
    g->nodes[out + 1].rows = 1;
    return SLM_OK;
}

slm_status slm_pass_fuse_prologues(slm_graph *g, slm_err *err) {
    (void)err;
    for (int f = 0; f < g->n_nodes; f++) {
        slm_node *F = &g->nodes[f];
        if (F->dead || (F->op != SLM_OP_RMSNORM && F->op != SLM_OP_SWIGLU)) continue;
        if (F->op == SLM_OP_RMSNORM && (F->group || !F->weight)) continue; /* per-head norms stay tasks */
        /* a slice of a wider `up` (gemma4's per-layer inputs) stays a task */
        if (F->op == SLM_OP_SWIGLU && (F->col0 || g->nodes[F->in[1]].cols != F->cols)) continue;
        if (F->op == SLM_OP_SWIGLU && F->sigmoid) continue; /* qwen35's gated attention output: a task */
        int ok = 1, users = 0;
        for (int i = 0; i < g->n_nodes && ok; i++) {
            const slm_node *u = &g->nodes[i];
            if (u->dead) continue;
            for (int k = 0; k < u->n_in; k++) {
                if (u->in[k] != f) continue;
                users++;
                if (u->op != SLM_OP_MATMUL || k != 0 || u->pre || u->rows != F->rows) ok = 0;
            }
        }
        if (!ok || !users) continue;
        for (int i = 0; i < g->n_nodes; i++) {
            slm_node *u = &g->nodes[i];
            if (u->dead || u->op != SLM_OP_MATMUL || u->n_in < 1 || u->in[0] != f) continue;
            u->pre = F->op;
            u->in[0] = F->in[0];
            if (F->op == SLM_OP_SWIGLU) {
                u->in[1] = F->in[1];
                u->n_in = 2;
                u->gelu = F->gelu;
            } else {
                u->weight2 = F->weight;
                u->eps = F->eps;
            }
        }
        F->dead = 1;
    }
    return SLM_OK;
}

static int count_users(const slm_graph *g, int node) {
    int users = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int k = 0; k < g->nodes[i].n_in; k++) users += g->nodes[i].in[k] == node;
    return users;
}

/* Live nodes reading `from` read `to` instead. */
static void replace_uses(slm_graph *g, int from, int to) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] == from) g->nodes[i].in[k] = to;
}

slm_status slm_pass_fuse_rope(slm_graph *g, slm_err *err) {
    (void)err;
    for (int r = 0; r < g->n_nodes; r++) {
        slm_node *R = &g->nodes[r];
        if (R->dead || R->op != SLM_OP_ROPE) continue;
        const int m = R->in[0];
        slm_node *M = &g->nodes[m];
        if (M->dead || M->op != SLM_OP_MATMUL || M->post || M->softcap != 0.0f || M->n_in >= 5 || M->rows != R->rows)
            continue;
        if (count_users(g, m) != 1) continue; /* the rope alone reads the matmul's output */
        M->post = SLM_OP_ROPE;
        M->post_in = M->n_in;
        M->in[M->n_in++] = R->in[1];
        M->heads = R->heads;
        M->head_dim = R->head_dim;
        M->neox = R->neox;
        M->rot = R->rot;
        M->table = R->table;
        R->dead = 1;
        replace_uses(g, r, m); /* the rope's readers read the matmul (the same storage) */
    }
    return SLM_OK;
}

slm_status slm_pass_fuse_residual(slm_graph *g, slm_err *err) {
    (void)err;
    for (int a = 0; a < g->n_nodes; a++) {
        slm_node *A = &g->nodes[a];
        if (A->dead || A->op != SLM_OP_ADD || A->scale != 0.0f) continue; /* a scaled sum stays a task */
        const int m = A->in[1], x = A->in[0];
        slm_node *M = &g->nodes[m];
        if (M->dead || M->op != SLM_OP_MATMUL || M->post || M->softcap != 0.0f || M->n_in >= 5 || M->rows != A->rows ||
            M->cols != A->cols)
            continue;
        if (count_users(g, m) != 1) continue;
        int ok = 1; /* the matmul must not read x, nor anything between it and the add read x */
        for (int k = 0; k < M->n_in; k++) ok &= M->in[k] != x;
        for (int i = m + 1; i < a && ok; i++)
            if (!g->nodes[i].dead)
                for (int k = 0; k < g->nodes[i].n_in; k++) ok &= g->nodes[i].in[k] != x;
        if (!ok) continue;
        M->post = SLM_OP_ADD;
        M->post_in = M->n_in;
        M->in[M->n_in++] = x;
        A->dead = 1;
        replace_uses(g, a, m);
    }
    return SLM_OK;
}

slm_status slm_pass_split_lm_head(slm_graph *g, slm_err *err) {
    int out = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == SLM_OP_OUTPUT && g->nodes[i].role == SLM_IO_LOGITS) out = i;
    if (out < 0) return slm_errf(err, SLM_ERR_INTERNAL, "split_lm_head: no logits output");
    int head = g->nodes[out].in[0];
    if (g->nodes[head].op != SLM_OP_MATMUL) return slm_errf(err, SLM_ERR_INTERNAL, "split_lm_head: logits not from a matmul");
    int x = g->nodes[head].in[0];
    g->nodes[head].dead = 1;
    slm_node *o = &g->nodes[out];
    o->role = SLM_IO_HIDDEN;
    o->in[0] = x;
    o->cols = g->nodes[x].cols;
    return SLM_OK;
}

/* ---- schedule: lanes, prefetch tasks, barrier counts ---------------------- */

/* Where the prefetch of a target stage has got to: its next matrix task
 * and row. */
typedef struct pf_cursor {
    int stage, task, row;
} pf_cursor;

/* The first stage after `s` (stage_first[] holds each stage's first task;
 * the stage's barrier ends it) with a matrix task that is not an expert's,
 * or -1. */
static int next_matrix_stage(const slm_program *p, const int *first, int n_stages, int s) {
    for (int t = s + 1; t < n_stages; t++)
        for (int i = first[t]; i < first[t + 1] - 1; i++)
            if (p->tasks[i].op == SLM_T_MATMUL && !(p->tasks[i].flags & SLM_TF_EXPERT)) return t;
    return -1;
}

/* Emit into out (NULL: count) the prefetch tasks of stage s, advancing
 * the cursor; returns how many. */
static int stage_prefetch(const slm_program *p, const int *first, int n_stages, int s, pf_cursor *cur,
                          uint64_t budget, uint64_t chunk, slm_task *out) {
    const int t = next_matrix_stage(p, first, n_stages, s);
    if (t < 0) return 0;
    if (cur->stage != t) *cur = (pf_cursor){t, first[t], 0};
    int n = 0;
    uint64_t left = budget;
    while (left > 0 && cur->task < first[t + 1] - 1) {
        const slm_task *m = &p->tasks[cur->task];
        /* an expert's weights are read only when a row picks it: not prefetched */
        if (m->op != SLM_T_MATMUL || (m->flags & SLM_TF_EXPERT)) {
            cur->task++;
            continue;
        }
        if (cur->row < m->n0) cur->row = m->n0;
        uint64_t rb = slm_row_bytes(m->wtype, (uint64_t)m->k);
        if (!rb) rb = (uint64_t)m->k * 4;
        uint64_t rows = chunk / rb;
        rows = rows < 16 ? 16 : rows & ~(uint64_t)15;
        int r1 = cur->row + (int)rows < m->n1 ? cur->row + (int)rows : m->n1;
        if (out) {
            slm_task *q = &out[n];
            memset(q, 0, sizeof *q);
            q->op = SLM_T_PREFETCH;
            q->lane = SLM_LANE_TRANSFER;
            q->wtype = m->wtype;
            q->m = m->m;
            q->n = m->n;
            q->k = m->k;
            q->n0 = cur->row;
            q->n1 = r1;
            q->a = t - s;
            q->c = cur->task; /* an old index: renumbered by the caller */
            q->layer = m->layer;
            q->ref[SLM_REF_SRC1] = m->ref[SLM_REF_SRC1];
        }
        n++;
        const uint64_t got = (uint64_t)(r1 - cur->row) * rb;
        left = got >= left ? 0 : left - got;
        cur->row = r1;
        if (r1 >= m->n1) {
            cur->task++;
            cur->row = 0;
        }
    }
    return n;
}

/* Weight bytes a task reads (its panel), 0 for tasks without weights. */
static uint64_t panel_bytes(const slm_task *t) {
    if (t->op != SLM_T_MATMUL) return 0;
    return slm_row_bytes(t->wtype, (uint64_t)t->k) * (uint64_t)(t->n1 - t->n0);
}

/* Decode: a stage's tasks biggest panel first (stable), so the small tail
 * tiles of its matmuls are claimed last and even out the threads' finish.
 * The tasks of a stage are independent, so their order is free; a few
 * dozen per stage, so insertion sort. */
static void sort_stage(slm_task *t, int n) {
    for (int i = 1; i < n; i++) {
        const slm_task x = t[i];
        const uint64_t bx = panel_bytes(&x);
        int j = i;
        for (; j > 0 && panel_bytes(&t[j - 1]) < bx; j--) t[j] = t[j - 1];
        t[j] = x;
    }
}

slm_status slm_pass_schedule(slm_program *p, const slm_compile_options *opt, slm_err *err) {
    int n_stages = 0;
    for (int i = 0; i < p->n_tasks; i++) n_stages += p->tasks[i].op == SLM_T_BARRIER;
    if (n_stages == 0 || p->tasks[p->n_tasks - 1].op != SLM_T_BARRIER)
        return slm_errf(err, SLM_ERR_INTERNAL, "%s: task list does not end with a barrier", p->name);
    int *first = slm_calloc((size_t)n_stages + 1, sizeof *first);
    int *remap = slm_calloc((size_t)p->n_tasks, sizeof *remap);
    if (!first || !remap) {
        slm_xfree(first);
        slm_xfree(remap);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory scheduling %s", p->name);
    }
    for (int i = 0, s = 0; i < p->n_tasks; i++)
        if (p->tasks[i].op == SLM_T_BARRIER) first[++s] = i + 1;
    const int decode = p->rows <= SLM_PREFETCH_MAX_ROWS, pf = decode && !opt->prefetch_off;
    if (decode)
        for (int s = 0; s < n_stages; s++) sort_stage(p->tasks + first[s], first[s + 1] - 1 - first[s]);
    for (int i = 0; i < p->n_tasks; i++)
        if (p->tasks[i].op == SLM_T_MATMUL) p->tasks[i].a = pf ? SLM_STREAM_PREFETCH : 0;
    const uint64_t kb = (uint64_t)(opt->tile_kb > 0 ? opt->tile_kb : 256);
    const uint64_t budget = pf ? kb * 2 * 1024 : 0, chunk = kb * 1024 / 4;
    int extra = 0;
    pf_cursor cur = {-1, 0, 0};
    for (int s = 0; s < n_stages && budget; s++) extra += stage_prefetch(p, first, n_stages, s, &cur, budget, chunk, NULL);
    slm_task *nt = slm_calloc((size_t)(p->n_tasks + extra), sizeof *nt);
    if (!nt) {
        slm_xfree(first);
        slm_xfree(remap);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory scheduling %s", p->name);
    }
    int n = 0;
    cur = (pf_cursor){-1, 0, 0};
    for (int s = 0; s < n_stages; s++) {
        const int bar = first[s + 1] - 1;
        for (int i = first[s]; i < bar; i++) {
            remap[i] = n;
            nt[n] = p->tasks[i];
            nt[n++].lane = slm_task_lane(p->tasks[i].op);
        }
        const int producers = bar - first[s];
        if (budget) n += stage_prefetch(p, first, n_stages, s, &cur, budget, chunk, nt + n);
        remap[bar] = n;
        nt[n] = p->tasks[bar];
        nt[n].lane = SLM_LANE_VECTOR;
        nt[n].count = (uint32_t)(n - remap[first[s]]);
        nt[n].a = producers;
        nt[n].b = s + 1 < n_stages ? first[s + 2] - 1 - first[s + 1] : 0;
        n++;
    }
    for (int i = 0; i < n; i++)
        if (nt[i].op == SLM_T_PREFETCH) nt[i].c = remap[nt[i].c];
    slm_xfree(p->tasks);
    p->tasks = nt;
    p->n_tasks = n;
    slm_xfree(first);
    slm_xfree(remap);
    return SLM_OK;
}
