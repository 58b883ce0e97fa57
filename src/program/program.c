/* The compiled program: freeing, I/O lookup, names and dumps. */
#include "program/program.h"

#include "common/dtype.h"

void slm_attn_range(const slm_task *t, const int32_t *cp, int r, int upto, int *first, int *last) {
    *last = cp[r];
    const int base = t->k > 0 ? *last - *last % t->k : 0;
    if (t->window < 0) { /* an encoder: every row of its region up to the call's last one, `upto` */
        const int h = -t->window - 1; /* gemma-embedding's window layers: h rows on either side */
        const int end = t->k > 0 && base + t->k - 1 < upto ? base + t->k - 1 : upto;
        *first = h > 0 && *last - h > base ? *last - h : base;
        *last = h > 0 && *last + h < end ? *last + h : end;
        return;
    }
    *first = t->window > 0 && *last + 1 > t->window ? *last + 1 - t->window : 0;
    if (*first < base) *first = base;
}

/* KV rows row r attends to (at least 1): slm_attn_range's, counted. */
static uint64_t attn_keys(const slm_task *t, const int32_t *cp, int r, int upto) {
    if (cp[r] < 0) return 1;
    int first, last;
    slm_attn_range(t, cp, r, upto, &first, &last);
    return last >= first ? (uint64_t)(last - first + 1) : 1;
}

void slm_attn_part_rows(const slm_task *t, const int32_t *cp, int begin, int end, int *b, int *e) {
    *b = begin;
    *e = end;
    /* key parts take every row (a part of each row's keys) */
    const int parts = t->op == SLM_T_ATTENTION && !(t->flags & SLM_TF_KEY_PARTS) ? t->tiles[1] : 0, part = t->tiles[0];
    if (parts < 2 || part >= parts || begin >= end) return;
    uint64_t total = 0;
    for (int r = begin; r < end; r++) total += attn_keys(t, cp, r, cp[end - 1]);
    /* part p starts at the first row whose work before it reaches p / parts of the total */
    const uint64_t lo = total * (uint64_t)part, hi = total * (uint64_t)(part + 1);
    uint64_t before = 0;
    int r = begin;
    for (; r < end && before * (uint64_t)parts < lo; r++) before += attn_keys(t, cp, r, cp[end - 1]);
    *b = r;
    if (part + 1 == parts) return;
    for (; r < end && before * (uint64_t)parts < hi; r++) before += attn_keys(t, cp, r, cp[end - 1]);
    *e = r;
}

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
    case SLM_T_BIAS: return "bias";
    case SLM_T_PREFETCH: return "prefetch";
    case SLM_T_KV_STORE: return "kv_store";
    case SLM_T_ATTN_MERGE: return "attn_merge";
    case SLM_T_MOE_ROUTE: return "moe_route";
    case SLM_T_MOE_COMBINE: return "moe_combine";
    case SLM_T_SLICE: return "slice";
    case SLM_T_SSM_CONV: return "ssm_conv";
    case SLM_T_DELTA_GATE: return "delta_gate";
    case SLM_T_DELTA_NET: return "delta_net";
    default: return "?";
    }
}

const char *slm_lane_name(int lane) {
    switch (lane) {
    case SLM_LANE_VECTOR: return "vector";
    case SLM_LANE_MATRIX: return "matrix";
    case SLM_LANE_TRANSFER: return "transfer";
    default: return "?";
    }
}


void slm_program_free(slm_program *p) {
    slm_xfree(p->tasks);
    slm_xfree(p->io);
    slm_xfree(p->relocs);
    slm_graph_free(&p->graph);
    memset(p, 0, sizeof *p);
}


int slm_program_find_io(const slm_program *p, slm_io_role role, int layer) {
    for (int i = 0; i < p->n_io; i++)
        if (p->io[i].role == role && (layer < 0 || p->io[i].layer == layer)) return i;
    return -1;
}


/* ---- schedule ------------------------------------------------------------- */

int slm_program_check_schedule(const slm_program *p, char *why, size_t len) {
    int first = 0, prod = 0, prev_bar = -1;
    for (int i = 0; i < p->n_tasks; i++) {
        const slm_task *t = &p->tasks[i];
        const char *op = slm_task_op_name(t->op);
        const int lane = t->op == SLM_T_BARRIER ? SLM_LANE_VECTOR : slm_task_lane(t->op);
        if (t->lane != lane)
            return snprintf(why, len, "task %d (%s): lane %u, this kind runs on the %s lane", i, op, t->lane,
                            slm_lane_name(lane)), 1;
        if (t->op == SLM_T_PREFETCH) {
            if (t->c <= i || t->c >= p->n_tasks)
                return snprintf(why, len, "task %d (prefetch): target task %d not after it", i, t->c), 1;
            const slm_task *m = &p->tasks[t->c];
            if (m->op != SLM_T_MATMUL || m->ref[SLM_REF_SRC1].space != t->ref[SLM_REF_SRC1].space ||
                m->ref[SLM_REF_SRC1].off != t->ref[SLM_REF_SRC1].off || m->wtype != t->wtype || m->k != t->k ||
                m->n != t->n || t->n0 < m->n0 || t->n1 > m->n1)
                return snprintf(why, len, "task %d (prefetch): rows [%d,%d) are not in the matrix tile of task %d", i,
                                t->n0, t->n1, t->c), 1;
            int dist = 0;
            for (int j = i; j < t->c; j++) dist += p->tasks[j].op == SLM_T_BARRIER;
            if (t->a != dist)
                return snprintf(why, len, "task %d (prefetch): distance %d, its target is %d stages on", i, t->a, dist), 1;
            continue;
        }
        if (t->op != SLM_T_BARRIER) {
            if (i - first != prod)
                return snprintf(why, len, "task %d (%s): a work task after a prefetch task in its stage", i, op), 1;
            prod++;
            continue;
        }
        if (t->a != prod)
            return snprintf(why, len, "task %d (barrier): producers %d, the stage has %d work tasks", i, t->a, prod), 1;
        if (prev_bar >= 0 && p->tasks[prev_bar].b != prod)
            return snprintf(why, len, "task %d (barrier): consumers %d, the next stage has %d work tasks", prev_bar,
                            p->tasks[prev_bar].b, prod), 1;
        prev_bar = i;
        first = i + 1;
        prod = 0;
    }
    if (prev_bar >= 0 && p->tasks[prev_bar].b != 0)
        return snprintf(why, len, "task %d (barrier): consumers %d after the last stage", prev_bar,
                        p->tasks[prev_bar].b), 1;
    return 0;
}

/* ---- dumps --------------------------------------------------------------- */

static const char *space_name(int s) {
    switch (s) {
    case SLM_SPACE_WEIGHTS: return "W";
    case SLM_SPACE_CONST: return "K";
    case SLM_SPACE_ARENA: return "A";
    case SLM_SPACE_IO: return "IO";
    default: return "-";
    }
}

void slm_program_dump_io(const slm_program *p, FILE *f) {
    fprintf(f, "program %s: T=%d C=%d tasks=%d arena=%llu bytes\n", p->name, p->rows, p->kv_capacity,
            p->n_tasks, (unsigned long long)p->arena_bytes);
    for (int i = 0; i < p->n_io; i++) {
        const slm_io_desc *d = &p->io[i];
        fprintf(f, "  %-6s %2d %-26s %s[%d,%d]\n", d->is_output ? "output" : "input", i, d->name,
                d->dtype == SLM_I32 ? "i32" : "f32", d->rows, d->cols);
    }
}

void slm_program_dump_tasks(const slm_program *p, FILE *f) {
    slm_program_dump_io(p, f);
    int stage = 0;
    for (int i = 0; i < p->n_tasks; i++) {
        const slm_task *t = &p->tasks[i];
        if (t->op == SLM_T_BARRIER) {
            fprintf(f, "  %5d barrier count=%u producers=%d consumers=%d   (end of stage %d)\n", i, t->count, t->a,
                    t->b, stage++);
            continue;
        }
        fprintf(f, "  %5d %-9s %c", i, slm_task_op_name(t->op), slm_lane_name(t->lane)[0]);
        if (t->layer >= 0) fprintf(f, " L%-2d", t->layer);
        else fprintf(f, "    ");
        if (t->op == SLM_T_MATMUL || t->op == SLM_T_EMBED || t->op == SLM_T_PREFETCH) fprintf(f, " %s", slm_dtype_name(t->wtype));
        fprintf(f, " n=%d k=%d", t->n, t->k);
        if (t->op == SLM_T_PREFETCH) fprintf(f, " rows=[%d,%d) for=%d distance=%d", t->n0, t->n1, t->c, t->a);
        else if (t->n1) fprintf(f, " tile=[%d,%d)", t->n0, t->n1);
        if (t->op == SLM_T_MATMUL && t->a > 0) fprintf(f, " stream-prefetch=%d", t->a);
        if (t->op == SLM_T_MATMUL && t->tiles[2]) fprintf(f, " tiles=%ux%u,k%u", t->tiles[0], t->tiles[1], t->tiles[2]);
        if (t->op == SLM_T_ATTENTION && t->tiles[1])
            fprintf(f, " %s=part%u/%u", (t->flags & SLM_TF_KEY_PARTS) ? "keys" : "rows", t->tiles[0] + 1u, t->tiles[1]);
        if (t->op == SLM_T_ATTN_MERGE) fprintf(f, " parts=%u", t->tiles[1]);
        if (t->flags & SLM_TF_EXPERT)
            fprintf(f, " expert=%d/%d used=%d%s", t->b, t->window, t->c, (t->flags & SLM_TF_EXPERT_GATHER) ? " gather" : "");
        if (t->op == SLM_T_MOE_ROUTE)
            fprintf(f, " experts=%d used=%d%s%s%s%s", t->n, t->c, t->a ? " norm" : "", t->b ? " sigmoid" : "",
                    t->ref[SLM_REF_SRC1].space ? " select-bias" : "", t->ref[SLM_REF_SRC2].space ? " expert-scales" : "");
        if (t->op == SLM_T_MOE_ROUTE && t->f2 != 0.0f) fprintf(f, " scale=%g", (double)t->f2);
        if (t->op == SLM_T_MOE_COMBINE) fprintf(f, " used=%d%s", t->c, t->b ? " set" : "");
        if (t->flags & SLM_TF_ONE_ROW) fprintf(f, " one-row");
        if (t->flags & SLM_TF_DST_COMPACT) fprintf(f, " dst-compact");
        if (t->flags & SLM_TF_NEOX) fprintf(f, " neox");
        if (t->flags & SLM_TF_PRE_NORM) fprintf(f, " pre=rmsnorm(s0,s2)");
        if (t->flags & SLM_TF_PRE_SWIGLU) fprintf(f, t->ref[SLM_REF_SRC2].space ? " pre=swiglu(s0,s2)" : " pre=act(s0)");
        if (t->flags & SLM_TF_POST_ROPE) fprintf(f, " post=rope(s3,s4)");
        if (t->flags & SLM_TF_POST_ADD) fprintf(f, " post=add(d)");
        if (t->flags & SLM_TF_GELU) fprintf(f, " gelu");
        if (t->flags & SLM_TF_POST_SOFTCAP) fprintf(f, " post=softcap(%g)", (double)t->f1);
        if (t->window && t->op == SLM_T_ATTENTION) fprintf(f, " window=%d", t->window);
        static const char *const fn[SLM_TASK_NREF] = {"s0", "s1", "s2", "s3", "s4", "d"};
        for (int k = 0; k < SLM_TASK_NREF; k++) {
            const slm_ref *r = &t->ref[k];
            if (!r->space) continue;
            if (r->space == SLM_SPACE_IO) fprintf(f, " %s=%s", fn[k], p->io[r->io].name);
            else fprintf(f, " %s=%s+0x%llx", fn[k], space_name(r->space), (unsigned long long)r->off);
        }
        fprintf(f, "\n");
    }
}
