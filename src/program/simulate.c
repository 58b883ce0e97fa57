/* The simulator: task costs, lanes, the replay of a program call and its
 * trace (program/simulate.h, docs/simulate.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "program/simulate.h"

slm_lane slm_sim_lane_of(const slm_task *t) {
    if (t->op == SLM_T_BARRIER || t->op == SLM_T_NOP || t->op == SLM_T_PREFETCH) return SLM_LANE_COUNT;
    return t->lane < SLM_LANE_COUNT ? (slm_lane)t->lane : (slm_lane)slm_task_lane(t->op);
}

double slm_sim_rate(const slm_sim_profile *p, slm_lane lane, uint32_t wtype) {
    if (lane == SLM_LANE_MATRIX) {
        const uint32_t b = slm_r16_base(wtype);
        const double g = b < SLM_DTYPE_COUNT && p->matrix_gops[b] > 0 ? p->matrix_gops[b] : p->matrix_default_gops;
        return g; /* G ops/s = ops per ns */
    }
    if (lane == SLM_LANE_VECTOR) return p->vector_gflops;
    return 0.0;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 1; }

/* Pieces of a tile in a buffer of buf bytes: `shared` bytes every piece
 * needs (activations, KV) and `split` bytes cut among the pieces. When
 * the shared part takes more than half the buffer it is cut too, and the
 * split part is reloaded for each of its blocks (*extra). */
static int split_pieces(uint64_t buf, uint64_t shared, uint64_t split, uint64_t reload, uint64_t *extra) {
    *extra = 0;
    if (!buf || shared + split <= buf) return 1;
    if (shared <= buf / 2) return (int)ceil_div(split, buf - shared);
    const uint64_t sb = ceil_div(shared, buf / 2), pb = ceil_div(split, buf / 2);
    *extra = (sb - 1) * reload;
    return (int)(sb * pb);
}

/* Bytes of an activation or KV element on the device (the engine's f32 unless the profile says). */
static uint64_t act_elem(const slm_sim_profile *p) { return p->activation_bytes > 0 ? (uint64_t)p->activation_bytes : 4; }

static void matmul_cost(const slm_sim_profile *p, const slm_task *t, int r, slm_sim_cost *c) {
    const uint64_t E = act_elem(p);
    const uint64_t nt = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : t->n), k = (uint64_t)t->k;
    const uint64_t w = nt * slm_row_bytes(t->wtype, k);
    uint64_t a = (uint64_t)r * k * E;
    if ((t->flags & SLM_TF_PRE_SWIGLU) && t->ref[SLM_REF_SRC2].space) a *= 2; /* gate and up (not an ungated expert's) */
    if (t->flags & SLM_TF_PRE_NORM) a += k * 4;
    const uint64_t out = (uint64_t)r * nt * E;
    c->bytes_read = w + a + ((t->flags & SLM_TF_POST_ADD) ? out : 0);
    c->bytes_written = out;
    c->ops = 2.0 * r * (double)nt * (double)k;
    c->shared_bytes = a;
    const uint64_t buf = p->tiles_in_flight > 0 ? p->scratch_bytes / (uint64_t)p->tiles_in_flight : 0;
    uint64_t extra;
    c->pieces = split_pieces(buf, a, w + out, w, &extra);
    c->bytes_read += extra;
}

/* Row i attends at position depth0 + i (one sequence), or, in a batch
 * program (one row per sequence), at depth0 in its own region. */
static void attention_cost(const slm_sim_profile *p, const slm_task *t, int r, int depth0, int kv_cap, int batch,
                           slm_sim_cost *c) {
    const uint64_t E = act_elem(p);
    const int h = t->n1 > t->n0 ? t->n1 - t->n0 : t->a, hd = t->c > 0 ? t->c : 1;
    const int group = t->a > 0 && t->b > 0 && t->a >= t->b ? t->a / t->b : 1;
    const int kvh = h > 0 ? (t->n0 + h - 1) / group - t->n0 / group + 1 : 0;
    const int region = t->k > 0 ? t->k : kv_cap;
    double ops = 0;
    int maxd = 0, i0 = 0, i1 = r;
    const int kparts = (t->flags & SLM_TF_KEY_PARTS) && t->tiles[1] >= 2 ? t->tiles[1] : 1;
    if (kparts == 1 && t->tiles[1] >= 2 && r > 0) { /* a row part: its rows, by the executor's rule over these positions */
        int32_t *cp = malloc((size_t)r * sizeof(int32_t));
        if (cp) {
            const int reg = region > 0 ? region : 1;
            for (int i = 0; i < r; i++)
                cp[i] = p->static_rows ? reg - 1 : batch ? i * reg + depth0 % reg : depth0 + i;
            slm_task u = *t;
            u.k = p->static_rows || batch ? reg : t->k;
            slm_attn_part_rows(&u, cp, 0, r, &i0, &i1);
            free(cp);
        }
    }
    for (int i = i0; i < i1; i++) {
        int d;
        if (p->static_rows) d = region;
        else {
            const int pos = batch ? depth0 : depth0 + i;
            d = pos % (region > 0 ? region : 1) + 1;
            if (t->window > 0 && d > t->window) d = t->window;
        }
        d = (d + kparts - 1) / kparts; /* a key part: its run of the row's KV rows */
        ops += (double)h * d * (4.0 * hd + 5.0);
        if (d > maxd) maxd = d;
    }
    /* a KV row of one head: the profile's element size, or the cache's own type (the task's wtype) */
    const uint64_t kv_row = p->activation_bytes > 0 ? (uint64_t)hd * E : slm_row_bytes(t->wtype, (uint64_t)hd);
    const uint64_t kv = (uint64_t)maxd * (uint64_t)kvh * kv_row * 2 + (uint64_t)maxd * 4;
    const uint64_t q = (uint64_t)(i1 - i0) * (uint64_t)h * (uint64_t)hd * E;
    c->bytes_read = kv + q;
    c->bytes_written = q;
    c->ops = ops;
    c->shared_bytes = 0;
    const uint64_t buf = p->tiles_in_flight > 0 ? p->scratch_bytes / (uint64_t)p->tiles_in_flight : 0;
    uint64_t extra;
    /* the query rows are cut; the KV is reloaded for each block of them */
    c->pieces = split_pieces(buf, 2 * q, kv, kv, &extra);
    c->bytes_read += extra;
}

void slm_sim_task_cost(const slm_sim_profile *p, const slm_program *prog, const slm_task *t, int rows, int depth0,
                       int kv_cap, slm_sim_cost *c) {
    memset(c, 0, sizeof *c);
    c->pieces = 1;
    const int r = (t->flags & SLM_TF_ONE_ROW) ? 1 : (p->static_rows && prog ? prog->rows : rows);
    const uint64_t n = (uint64_t)(t->n > 0 ? t->n : 0), R = (uint64_t)r, E = act_elem(p);
    switch (t->op) {
    case SLM_T_MATMUL:
        if ((t->flags & SLM_TF_EXPERT) && t->window > 0) {
            /* an expert: routing is runtime data, so its expected share: K/E of the
             * (row, slot) pairs, and its weights read when any row picks it */
            const double share = (double)t->c / (double)t->window;
            const int re = (int)ceil((double)r * (double)t->c / (double)t->window);
            matmul_cost(p, t, re > 0 ? re : 1, c);
            const double active = 1.0 - pow(1.0 - (share < 1.0 ? share : 1.0), (double)r);
            c->bytes_read = (uint64_t)((double)c->bytes_read * active);
            c->ops *= active;
            return;
        }
        matmul_cost(p, t, r, c);
        return;
    case SLM_T_MOE_ROUTE: /* the router's logits in, the table out */
        c->bytes_read = R * n * 4;
        c->bytes_written = R * (uint64_t)t->c * 12;
        c->ops = 4.0 * (double)R * (double)n;
        break;
    case SLM_T_MOE_COMBINE: { /* K down rows of each row's columns, weighted into the residual */
        const uint64_t w = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : t->n);
        const uint64_t sh = t->a ? 1 : 0; /* the shared expert's rows */
        c->bytes_read = R * ((uint64_t)t->c + sh) * w * E + R * w * E;
        c->bytes_written = R * w * E;
        c->ops = 2.0 * (double)R * (double)((uint64_t)t->c + sh) * (double)w;
        break;
    }
    case SLM_T_ATTENTION: attention_cost(p, t, r, depth0, kv_cap, prog && prog->kind == SLM_PROG_BATCH, c); return;
    case SLM_T_EMBED:
        c->bytes_read = R * slm_row_bytes(t->wtype, n) + R * 4;
        c->bytes_written = R * n * E;
        c->ops = (double)R * (double)n;
        break;
    case SLM_T_RMSNORM:
        c->bytes_read = R * n * E + (uint64_t)(t->c > 0 ? t->c : (int)n) * 4;
        c->bytes_written = R * n * E;
        c->ops = 4.0 * (double)R * (double)n;
        break;
    case SLM_T_ADD:
    case SLM_T_SWIGLU:
        c->bytes_read = 2 * R * n * E;
        c->bytes_written = R * n * E;
        c->ops = (t->op == SLM_T_SWIGLU ? 8.0 : 1.0) * (double)R * (double)n;
        break;
    case SLM_T_BIAS:
        c->bytes_read = R * n * E + n * 4;
        c->bytes_written = R * n * E;
        c->ops = (double)R * (double)n;
        break;
    case SLM_T_ROPE: {
        const uint64_t hd = (uint64_t)(t->c > 0 ? t->c : 1), rot = (uint64_t)(t->b > 0 ? t->b : (int)hd);
        const uint64_t heads = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : 1), el = R * heads * hd;
        c->bytes_read = el * E + R * rot * 4;
        c->bytes_written = el * E;
        c->ops = 3.0 * (double)(R * heads * rot);
        break;
    }
    case SLM_T_KV_STORE: /* this call's K/V rows converted to the cache's type */
        c->bytes_read = R * n * E;
        c->bytes_written = p->activation_bytes > 0 ? R * n * E : R * slm_row_bytes(t->wtype, n);
        c->ops = 2.0 * (double)R * (double)n;
        break;
    case SLM_T_ATTN_MERGE: { /* every part's outputs, max and sum of the heads; the merged outputs */
        const uint64_t heads = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : 1), hd = (uint64_t)(t->c > 0 ? t->c : 1);
        c->bytes_read = R * (uint64_t)t->tiles[1] * heads * (hd + 2) * 4;
        c->bytes_written = R * heads * hd * E;
        c->ops = 2.0 * (double)(R * (uint64_t)t->tiles[1] * heads * hd);
        break;
    }
    case SLM_T_SLICE: case SLM_T_DELTA_GATE:
        c->bytes_read = R * n * E;
        c->bytes_written = R * n * E;
        c->ops = (double)R * (double)n;
        break;
    case SLM_T_SSM_CONV: { /* the tile's channels: K taps each, the window read and shifted */
        const uint64_t w = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : 1), K = (uint64_t)(t->c > 0 ? t->c : 1);
        c->bytes_read = R * w * E + w * K * 4 + w * (K - 1) * 4;
        c->bytes_written = R * w * E + w * (K - 1) * 4;
        c->ops = (double)(R * w * (2 * K + 4));
        break;
    }
    case SLM_T_DELTA_NET: { /* each head's state read and written once per call, 6 flops per element a row */
        const uint64_t h = (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : 1), S = (uint64_t)(t->c > 0 ? t->c : 1);
        c->bytes_read = h * S * S * 4 + R * h * S * 3 * E;
        c->bytes_written = h * S * S * 4 + R * h * S * E;
        c->ops = 6.0 * (double)(R * h * S * S);
        break;
    }
    case SLM_T_COPY_ROW:
        c->bytes_read = n * E;
        c->bytes_written = n * E;
        break;
    default: return;
    }
    const uint64_t buf = p->tiles_in_flight > 0 ? p->scratch_bytes / (uint64_t)p->tiles_in_flight : 0;
    if (buf && t->op != SLM_T_COPY_ROW) c->pieces = (int)ceil_div(c->bytes_read + c->bytes_written, buf);
    if (c->pieces < 1) c->pieces = 1;
}

/* ---- the trace ------------------------------------------------------------------ */

static int n_units(const slm_sim_profile *p, slm_lane l) {
    int u = l == SLM_LANE_MATRIX ? p->matrix_units : l == SLM_LANE_VECTOR ? p->vector_units : 1;
    if (u < 1) u = 1;
    return u > SLM_SIM_MAX_UNITS ? SLM_SIM_MAX_UNITS : u;
}

/* The trace's thread of a unit: 1 = transfer, 2.. = matrix, then vector. */
static int unit_tid(const slm_sim_profile *p, slm_lane l, int u) {
    if (l == SLM_LANE_TRANSFER) return 1;
    if (l == SLM_LANE_MATRIX || p->shared_units) return 2 + u;
    return 2 + n_units(p, SLM_LANE_MATRIX) + u;
}

static void put_name(FILE *f, int tid, const char *name) {
    fprintf(f,
            ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}"
            ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            tid, name, tid, tid);
}

void slm_sim_trace_open(slm_sim_trace *tr, FILE *f, const slm_sim_profile *p) {
    memset(tr, 0, sizeof *tr);
    tr->f = f;
    if (!f) return;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"simulated\",\"device\":\"%s\",\"estimate\":%d,"
               "\"dropped\":0},\n",
            p->name, p->estimate);
    fputs("\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":"
          "\"staticlm simulate\"}}",
          f);
    char nm[40];
    put_name(f, 0, "runtime");
    put_name(f, 1, "transfer (DMA)");
    for (int u = 0; u < n_units(p, SLM_LANE_MATRIX); u++) {
        snprintf(nm, sizeof nm, p->shared_units ? "core %d (matrix+vector)" : "matrix %d", u);
        put_name(f, unit_tid(p, SLM_LANE_MATRIX, u), nm);
    }
    if (!p->shared_units)
        for (int u = 0; u < n_units(p, SLM_LANE_VECTOR); u++) {
            snprintf(nm, sizeof nm, "vector %d", u);
            put_name(f, unit_tid(p, SLM_LANE_VECTOR, u), nm);
        }
}

void slm_sim_trace_slice(slm_sim_trace *tr, const char *name, const char *prog, double t0_ns, double dur_ns,
                         int rows, int position) {
    if (!tr || !tr->f) return;
    fprintf(tr->f,
            ",\n{\"name\":\"%s\",\"cat\":\"runtime\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":0,"
            "\"args\":{\"rows\":%d,\"position\":%d,\"program\":\"%s\"}}",
            name, t0_ns * 1e-3, dur_ns * 1e-3, rows, position, prog);
    tr->events++;
}

void slm_sim_trace_close(slm_sim_trace *tr) {
    if (!tr || !tr->f) return;
    fputs("\n]}\n", tr->f);
    tr->f = NULL;
}

static void trace_task(slm_sim_trace *tr, const char *name, const char *cat, int tid, double t0, double t1,
                       const slm_program *prog, int stage, int index, const slm_task *t, int rows,
                       const slm_sim_cost *c) {
    if (!tr || !tr->f) return;
    fprintf(tr->f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%d,"
                   "\"args\":{\"program\":\"%s\",\"stage\":%d",
            name, cat, (tr->t0_ns + t0) * 1e-3, (t1 - t0) * 1e-3, tid, prog->name, stage);
    if (t)
        fprintf(tr->f, ",\"task\":%d,\"layer\":%d,\"n0\":%d,\"n1\":%d,\"rows\":%d,\"bytes_read\":%llu,"
                       "\"bytes_written\":%llu,\"pieces\":%d",
                index, (int)t->layer, (int)t->n0, (int)t->n1, rows, (unsigned long long)c->bytes_read,
                (unsigned long long)c->bytes_written, c->pieces);
    fputs("}}", tr->f);
    tr->events++;
}

/* ---- the replay ----------------------------------------------------------------- */

/* One unit of a compute lane: when it is free, the compute-end times of
 * its last tiles in flight (a ring), the input it keeps. */
typedef struct sim_unit {
    double free;
    double slot[8];
    int next;
    uint64_t key; /* the last task's src0 (space, I/O, offset, prologue), 0: none */
    double stage_busy[SLM_LANE_COUNT]; /* compute time in this stage, per lane */
} sim_unit;

typedef struct sim_state {
    const slm_sim_profile *p;
    const slm_program *prog;
    slm_sim_trace *tr;
    sim_unit mu[SLM_SIM_MAX_UNITS], vu[SLM_SIM_MAX_UNITS];
    int nm, nv, depth;
    double gbps, dma_free, stage_start;
    double stage_xfer, stage_launch;
    int stage;
} sim_state;

static uint64_t input_key(const slm_task *t) {
    const slm_ref *s = &t->ref[SLM_REF_SRC0];
    if (!s->space) return 0;
    return ((uint64_t)s->space << 60) ^ ((uint64_t)s->io << 44) ^ (s->off << 4) ^
           (uint64_t)(t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU)) ^ 1u;
}

static void stage_reset(sim_state *s, double t) {
    s->stage_start = s->dma_free = t;
    s->stage_xfer = s->stage_launch = 0;
    for (int u = 0; u < s->nm; u++) {
        memset(&s->mu[u], 0, sizeof s->mu[u]);
        s->mu[u].free = t;
        for (int j = 0; j < 8; j++) s->mu[u].slot[j] = t;
    }
    for (int u = 0; u < s->nv; u++) {
        memset(&s->vu[u], 0, sizeof s->vu[u]);
        s->vu[u].free = t;
        for (int j = 0; j < 8; j++) s->vu[u].slot[j] = t;
    }
}

/* The unit whose oldest buffer frees first (the executor's threads claim
 * tasks in order as they come free). */
static int pick_unit(const sim_unit *u, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (u[i].slot[u[i].next] < u[best].slot[u[best].next]) best = i;
    return best;
}

static void run_task(sim_state *s, const slm_task *t, int index, int rows, slm_sim_result *r) {
    const slm_sim_profile *p = s->p;
    slm_sim_cost c;
    slm_sim_task_cost(p, s->prog, t, rows, s->depth, s->prog->kv_capacity, &c);
    const slm_lane lane = slm_sim_lane_of(t);
    const int tr_rows = (t->flags & SLM_TF_ONE_ROW) ? 1 : (p->static_rows ? s->prog->rows : rows);
    uint64_t bytes = c.bytes_read + c.bytes_written;
    r->tasks++;
    if (lane == SLM_LANE_COUNT) return; /* a prefetch hint */
    if (lane == SLM_LANE_TRANSFER) { /* a transfer alone */
        const double xs = s->dma_free > s->stage_start ? s->dma_free : s->stage_start, d = (double)bytes / s->gbps;
        s->dma_free = xs + d;
        s->stage_xfer += d;
        r->busy_ns[SLM_LANE_TRANSFER] += d;
        r->bytes += bytes;
        trace_task(s->tr, slm_task_op_name(t->op), "task", 1, xs, xs + d, s->prog, s->stage, index, t, tr_rows, &c);
        return;
    }
    const int on_matrix = lane == SLM_LANE_MATRIX || p->shared_units;
    sim_unit *units = on_matrix ? s->mu : s->vu;
    const int ui = pick_unit(units, on_matrix ? s->nm : s->nv);
    sim_unit *u = &units[ui];
    const uint64_t key = input_key(t);
    if (key && key == u->key && c.shared_bytes <= bytes) bytes -= c.shared_bytes; /* kept from its last task */
    u->key = key;
    const int d_in_flight = p->tiles_in_flight < 1 ? 1 : p->tiles_in_flight > 8 ? 8 : p->tiles_in_flight;
    double xs = u->slot[u->next];
    if (xs < s->dma_free) xs = s->dma_free;
    const double xd = (double)bytes / s->gbps, xe = xs + xd;
    s->dma_free = xe;
    double rate = slm_sim_rate(p, lane, t->wtype);
    if (lane == SLM_LANE_MATRIX && t->op != SLM_T_MATMUL && p->matrix_attention_gops > 0) rate = p->matrix_attention_gops;
    rate /= n_units(p, lane); /* a unit's share */
    const double launch = p->launch_ns * c.pieces, work = rate > 0 ? c.ops / rate : 0.0;
    const double cs = xe > u->free ? xe : u->free, ce = cs + launch + work;
    u->free = ce;
    u->slot[u->next] = ce;
    u->next = (u->next + 1) % d_in_flight;
    u->stage_busy[lane] += work;
    s->stage_xfer += xd;
    s->stage_launch += launch;
    r->busy_ns[SLM_LANE_TRANSFER] += xd;
    r->busy_ns[lane] += work + launch;
    r->launch_ns += launch;
    r->ops[lane] += c.ops;
    if (lane == SLM_LANE_MATRIX && slm_r16_base(t->wtype) < SLM_DTYPE_COUNT)
        r->matrix_ops_by_type[slm_r16_base(t->wtype)] += c.ops;
    r->bytes += bytes;
    if (xd > 0) trace_task(s->tr, "transfer", "task", 1, xs, xe, s->prog, s->stage, index, t, tr_rows, &c);
    trace_task(s->tr, slm_task_op_name(t->op), "task", unit_tid(p, lane, ui), cs, ce, s->prog, s->stage, index, t,
               tr_rows, &c);
}

/* Close a stage at its barrier: the stage ends when its last unit and the
 * transfer lane are done; the lane with the most work per unit bounds it. */
static double end_stage(sim_state *s, slm_sim_result *r, double barrier) {
    double end = s->dma_free, mbusy = 0, vbusy = 0;
    for (int u = 0; u < s->nm; u++) {
        if (s->mu[u].free > end) end = s->mu[u].free;
        if (s->mu[u].stage_busy[SLM_LANE_MATRIX] > mbusy) mbusy = s->mu[u].stage_busy[SLM_LANE_MATRIX];
        if (s->mu[u].stage_busy[SLM_LANE_VECTOR] > vbusy) vbusy = s->mu[u].stage_busy[SLM_LANE_VECTOR];
    }
    for (int u = 0; u < s->nv; u++) {
        if (s->vu[u].free > end) end = s->vu[u].free;
        if (s->vu[u].stage_busy[SLM_LANE_VECTOR] > vbusy) vbusy = s->vu[u].stage_busy[SLM_LANE_VECTOR];
    }
    const double wall = end - s->stage_start;
    const int units = s->p->shared_units ? s->nm : s->nm + s->nv;
    const double over = s->stage_launch / (units > 0 ? units : 1) + barrier;
    int b = SLM_LANE_TRANSFER;
    double best = s->stage_xfer;
    if (mbusy > best) b = SLM_LANE_MATRIX, best = mbusy;
    if (vbusy > best) b = SLM_LANE_VECTOR, best = vbusy;
    if (over > best) b = SLM_LANE_COUNT; /* launches and the barrier take the most */
    if (s->tr && s->tr->f && barrier > 0) {
        for (int u = 0; u < s->nm; u++)
            trace_task(s->tr, "barrier", "barrier", unit_tid(s->p, SLM_LANE_MATRIX, u), s->mu[u].free, end + barrier,
                       s->prog, s->stage, 0, NULL, 0, NULL);
        if (!s->p->shared_units)
            for (int u = 0; u < s->nv; u++)
                trace_task(s->tr, "barrier", "barrier", unit_tid(s->p, SLM_LANE_VECTOR, u), s->vu[u].free,
                           end + barrier, s->prog, s->stage, 0, NULL, 0, NULL);
    }
    if (b < SLM_LANE_COUNT) r->bound_ns[b] += wall + barrier;
    else r->overhead_ns += wall + barrier;
    r->barrier_ns += barrier;
    r->stages++;
    s->stage++;
    return end + barrier;
}

void slm_sim_run(const slm_sim_profile *p, const slm_program *prog, int rows, int depth0, slm_sim_result *r,
                 slm_sim_trace *tr) {
    sim_state s; /* about 20 KiB */
    memset(r, 0, sizeof *r);
    memset(&s, 0, sizeof s);
    s.p = p;
    s.prog = prog;
    s.tr = tr;
    s.depth = depth0;
    s.nm = n_units(p, SLM_LANE_MATRIX);
    s.nv = p->shared_units ? 0 : n_units(p, SLM_LANE_VECTOR);
    if (rows > prog->rows) rows = prog->rows;
    if (rows < 1) rows = 1;
    /* the bandwidth: the cache's when every weight byte of the call fits it */
    uint64_t wbytes = 0;
    for (int i = 0; i < prog->n_tasks; i++) {
        const slm_task *t = &prog->tasks[i];
        if (t->op == SLM_T_MATMUL)
            wbytes += (uint64_t)(t->n1 > t->n0 ? t->n1 - t->n0 : t->n) * slm_row_bytes(t->wtype, (uint64_t)t->k);
    }
    s.gbps = p->cache_gbps > 0 && wbytes <= p->cache_bytes ? p->cache_gbps : p->xfer_gbps;
    if (s.gbps <= 0) s.gbps = 1e-9;
    double t = p->call_ns;
    stage_reset(&s, t);
    int open = 0;
    for (int i = 0; i < prog->n_tasks; i++) {
        const slm_task *k = &prog->tasks[i];
        if (k->op == SLM_T_BARRIER) {
            t = end_stage(&s, r, p->barrier_ns);
            stage_reset(&s, t);
            open = 0;
            continue;
        }
        if (k->op == SLM_T_NOP) continue;
        run_task(&s, k, i, rows, r);
        open = 1;
    }
    if (open) t = end_stage(&s, r, 0.0);
    r->ns = t;
}

const char *slm_sim_bound(const slm_sim_result *r) {
    int b = SLM_LANE_TRANSFER;
    for (int l = 1; l < SLM_LANE_COUNT; l++)
        if (r->bound_ns[l] > r->bound_ns[b]) b = l;
    if (r->overhead_ns > r->bound_ns[b]) return "overhead";
    return slm_lane_name(b);
}
