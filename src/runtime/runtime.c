#include <stdio.h>

#include "common/trace.h"
#include "runtime/runtime.h"

/* The device's bound copy of program p. */
static slm_exec *exec_of(slm_runtime *rt, const slm_program *p) { return &rt->exec[p - rt->comp->progs]; }

/* Row 0 of a layer's K or V over all sequences (rows of row_bytes bytes:
 * kv_dim elements of the KV type). */
static uint8_t *kv_base(slm_runtime *rt, int layer, int is_v) {
    return rt->kv + rt->kv_off[layer] + (size_t)is_v * (size_t)rt->n_seqs * (size_t)rt->cap * rt->kv_rb[layer];
}

/* Row 0 of the selected sequence's region of a layer's K or V. */
static uint8_t *kv_layer(slm_runtime *rt, int layer, int is_v) {
    return kv_base(rt, layer, is_v) + (size_t)rt->cur_seq * (size_t)rt->cap * rt->kv_rb[layer];
}

void *slm_rt_kv_rows(slm_runtime *rt, int layer, int is_v) { return kv_layer(rt, layer, is_v); }

size_t slm_rt_kv_row_bytes(const slm_runtime *rt, int layer) { return rt->kv_rb[layer]; }

void slm_rt_kv_copy(slm_runtime *rt, void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    rt->kv_bytes_copied += bytes;
}

static int is_batch(const slm_program *p) { return p->kind == SLM_PROG_BATCH; }

uint64_t slm_rt_recur_floats(const slm_model_config *cfg) {
    uint64_t n = 0;
    for (int l = 0; l < cfg->n_layers; l++)
        if (slm_layer_recurrent(cfg, l)) n += (uint64_t)slm_conv_state_floats(cfg) + (uint64_t)slm_delta_state_floats(cfg);
    return n;
}

/* A recurrent layer's conv windows (role CONV_STATE) or delta states of
 * sequence seq (the rows after it: the following sequences') in the state
 * buffer `buf` (rt->rstate, or its checkpoints rt->rsnap: the same layout). */
static float *state_in(slm_runtime *rt, float *buf, int layer, int role, int seq) {
    const slm_model_config *c = &rt->comp->cfg;
    const uint64_t cw = (uint64_t)slm_conv_state_floats(c), ds = (uint64_t)slm_delta_state_floats(c);
    float *base = buf + rt->rstate_off[layer];
    return role == SLM_IO_CONV_STATE ? base + (uint64_t)seq * cw : base + (uint64_t)rt->n_seqs * cw + (uint64_t)seq * ds;
}

static float *state_of(slm_runtime *rt, int layer, int role, int seq) { return state_in(rt, rt->rstate, layer, role, seq); }

/* The selected sequence's recurrent state, zeroed; its checkpoint dropped. */
static void state_reset(slm_runtime *rt) {
    if (!rt->rstate) return;
    const slm_model_config *c = &rt->comp->cfg;
    for (int l = 0; l < c->n_layers; l++)
        if (rt->rstate_off[l] >= 0) {
            memset(state_of(rt, l, SLM_IO_CONV_STATE, rt->cur_seq), 0, (size_t)slm_conv_state_floats(c) * sizeof(float));
            memset(state_of(rt, l, SLM_IO_RECUR_STATE, rt->cur_seq), 0, (size_t)slm_delta_state_floats(c) * sizeof(float));
        }
    for (int k = 0; k < rt->n_snaps; k++) rt->snap_at[rt->cur_seq * rt->n_snaps + k] = -1;
}

/* The selected sequence's recurrent state from `from` into `to`. */
static void state_copy(slm_runtime *rt, float *to, float *from) {
    const slm_model_config *c = &rt->comp->cfg;
    for (int l = 0; l < c->n_layers; l++)
        if (rt->rstate_off[l] >= 0) {
            memcpy(state_in(rt, to, l, SLM_IO_CONV_STATE, rt->cur_seq), state_in(rt, from, l, SLM_IO_CONV_STATE, rt->cur_seq),
                   (size_t)slm_conv_state_floats(c) * sizeof(float));
            memcpy(state_in(rt, to, l, SLM_IO_RECUR_STATE, rt->cur_seq), state_in(rt, from, l, SLM_IO_RECUR_STATE, rt->cur_seq),
                   (size_t)slm_delta_state_floats(c) * sizeof(float));
        }
}

/* Checkpoint slot k's buffer (rstate's layout). */
static float *snap_buf(slm_runtime *rt, int k) { return rt->rsnap + (size_t)k * (rt->rstate_bytes / sizeof(float)); }

/* The selected sequence's slot holding the latest checkpoint at or before
 * `rows` rows (and after row 0); -1: none. */
static int snap_best(const slm_runtime *rt, int rows) {
    const int *at = rt->snap_at + rt->cur_seq * rt->n_snaps;
    int best = -1;
    for (int k = 0; k < rt->n_snaps; k++)
        if (at[k] > 0 && at[k] <= rows && (best < 0 || at[k] > at[best])) best = k;
    return best;
}

void slm_rt_checkpoint(slm_runtime *rt) {
    if (!rt->rstate || rt->num_stored <= 0) return;
    int *at = rt->snap_at + rt->cur_seq * rt->n_snaps;
    int k = 0; /* the slot: this row count's own, else a free one, else the lowest (the oldest rows) */
    for (int i = 0; i < rt->n_snaps; i++)
        if (at[i] == rt->num_stored) return; /* held already (rows before it unchanged since) */
    for (int i = 1; i < rt->n_snaps; i++)
        if (at[k] >= 0 && (at[i] < 0 || at[i] < at[k])) k = i;
    state_copy(rt, snap_buf(rt, k), rt->rstate);
    at[k] = rt->num_stored;
    slm_trace_instant("runtime", "checkpoint", &(slm_trace_args){{"at", "slot"}, {rt->num_stored, k}, NULL, NULL});
}

int slm_rt_can_trim(const slm_runtime *rt, int n_keep) {
    if (!rt->rstate || n_keep >= rt->num_stored) return 1;
    return snap_best(rt, n_keep) >= 0;
}

/* The selected sequence's state in `buf` (rt->rstate or a checkpoint's
 * buffer) to or from the packed layout of one sequence: per recurrent layer
 * its conv window, then its delta state. */
static void state_pack(slm_runtime *rt, float *buf, float *packed, int out) {
    const slm_model_config *c = &rt->comp->cfg;
    const size_t cw = (size_t)slm_conv_state_floats(c), ds = (size_t)slm_delta_state_floats(c);
    for (int l = 0; l < c->n_layers; l++)
        if (rt->rstate_off[l] >= 0) {
            float *cv = state_in(rt, buf, l, SLM_IO_CONV_STATE, rt->cur_seq), *dl = state_in(rt, buf, l, SLM_IO_RECUR_STATE, rt->cur_seq);
            memcpy(out ? packed : cv, out ? cv : packed, cw * sizeof(float));
            memcpy(out ? packed + cw : dl, out ? dl : packed + cw, ds * sizeof(float));
            packed += cw + ds;
        }
}

int slm_rt_state_get(slm_runtime *rt, int rows, float *dst) {
    if (!rt->rstate || rows <= 0 || rows > rt->num_stored) return 0;
    if (rows == rt->num_stored) {
        state_pack(rt, rt->rstate, dst, 1);
        return 1;
    }
    for (int k = 0; k < rt->n_snaps; k++)
        if (rt->snap_at[rt->cur_seq * rt->n_snaps + k] == rows) {
            state_pack(rt, snap_buf(rt, k), dst, 1);
            return 1;
        }
    return 0;
}

void slm_rt_state_set(slm_runtime *rt, const float *src) {
    if (!rt->rstate) return;
    state_pack(rt, rt->rstate, (float *)src, 0);
    slm_rt_checkpoint(rt);
}

int slm_rt_checkpoints(const slm_runtime *rt, int *rows, int cap) {
    if (!rt->rstate) return 0;
    int n = 0;
    for (int k = 0; k < rt->n_snaps; k++) {
        const int at = rt->snap_at[rt->cur_seq * rt->n_snaps + k];
        if (at < 0) continue;
        if (n < cap) rows[n] = at;
        n++;
    }
    return n;
}

/* Bind everything that never moves, once. */
static slm_status bind_static(slm_runtime *rt, slm_program *p, int prog, slm_err *err) {
    const slm_model_config *cfg = &rt->comp->cfg;
    for (int i = 0; i < p->n_io; i++) {
        const slm_io_desc *d = &p->io[i];
        void *ptr = NULL;
        switch (d->role) {
        case SLM_IO_INPUT_IDS: ptr = rt->input_ids; break;
        case SLM_IO_POSITION_IDS: ptr = rt->position_ids; break;
        case SLM_IO_CACHE_POSITION:
            /* lm_head.1 reads one always-valid row; lm_head.T (verify) the verify rows */
            ptr = p->kind == SLM_PROG_LMHEAD && p->rows == 1 ? rt->head_cpos : rt->cache_position;
            break;
        case SLM_IO_ATTENTION_MASK: ptr = is_batch(p) ? rt->mask_all : rt->mask; break;
        case SLM_IO_LOGITS: ptr = rt->logits; break;
        case SLM_IO_HIDDEN: ptr = rt->hidden; break;
        case SLM_IO_PAST_KEY:
        case SLM_IO_PAST_VALUE:
            if (d->layer < 0 || d->layer >= cfg->n_layers)
                return slm_errf(err, SLM_ERR_INTERNAL, "%s: bad layer in %s", p->name, d->name);
            ptr = is_batch(p) ? kv_base(rt, d->layer, d->role == SLM_IO_PAST_VALUE)
                              : kv_layer(rt, d->layer, d->role == SLM_IO_PAST_VALUE);
            break;
        case SLM_IO_PRESENT_KEY:
        case SLM_IO_PRESENT_VALUE:
            if (d->layer < 0 || d->layer >= cfg->n_layers)
                return slm_errf(err, SLM_ERR_INTERNAL, "%s: bad layer in %s", p->name, d->name);
            rt->present_io[(prog * cfg->n_layers + d->layer) * 2 + (d->role == SLM_IO_PRESENT_VALUE)] = i;
            /* a batch program writes row cache_position[r] of the whole KV */
            ptr = is_batch(p) ? kv_base(rt, d->layer, d->role == SLM_IO_PRESENT_VALUE)
                              : kv_layer(rt, d->layer, d->role == SLM_IO_PRESENT_VALUE);
            break;
        case SLM_IO_CONV_STATE:
        case SLM_IO_RECUR_STATE: {
            const uint64_t want = d->role == SLM_IO_CONV_STATE ? (uint64_t)slm_conv_state_floats(cfg)
                                                               : (uint64_t)slm_delta_state_floats(cfg);
            if (!rt->rstate || d->layer < 0 || d->layer >= cfg->n_layers || rt->rstate_off[d->layer] < 0 ||
                d->dtype != SLM_F32 || (uint64_t)d->cols != want || d->rows != (is_batch(p) ? rt->n_seqs : 1))
                return slm_errf(err, SLM_ERR_INTERNAL, "%s: %s does not fit the recurrent state", p->name, d->name);
            ptr = state_of(rt, d->layer, d->role, is_batch(p) ? 0 : rt->cur_seq);
            break;
        }
        default:
            return slm_errf(err, SLM_ERR_INTERNAL, "%s: unknown I/O %s", p->name, d->name);
        }
        if ((d->role == SLM_IO_PAST_KEY || d->role == SLM_IO_PAST_VALUE) &&
            (d->rows > (is_batch(p) ? rt->n_seqs * rt->cap : rt->cap) || d->cols != slm_layer_kv_dim(cfg, d->layer) ||
             d->dtype != rt->kv_type))
            return slm_errf(err, SLM_ERR_INTERNAL, "%s: %s does not fit the KV buffer", p->name, d->name);
        slm_exec_bind(exec_of(rt, p), i, ptr);
    }
    return SLM_OK;
}

slm_status slm_rt_init(slm_runtime *rt, slm_compiled *c, const void *weights, int n_threads, slm_err *err) {
    return slm_rt_init_seqs(rt, c, weights, n_threads, 1, 0, err);
}

slm_status slm_rt_init_seqs(slm_runtime *rt, slm_compiled *c, const void *weights, int n_threads, int n_seqs,
                            int n_snaps, slm_err *err) {
    memset(rt, 0, sizeof *rt);
    n_snaps = slm_rt_snaps(n_snaps);
    rt->comp = c;
    const slm_model_config *cfg = &c->cfg;
    if (n_seqs < 1) n_seqs = 1;
    for (int i = 0; i < c->n_progs; i++)
        if (is_batch(&c->progs[i])) {
            if (c->progs[i].kv_capacity != n_seqs * c->kv_capacity)
                return slm_errf(err, SLM_ERR_ARG, "%s was compiled for %d sequences, not %d", c->progs[i].name,
                                c->progs[i].kv_capacity / c->kv_capacity, n_seqs);
            if (c->progs[i].rows > rt->batch_max) rt->batch_max = c->progs[i].rows;
        }
    rt->n_seqs = n_seqs;
    rt->cap = c->kv_capacity;
    rt->kv_type = c->opt.kv_type;
    rt->kv_rb = slm_calloc((size_t)cfg->n_layers, sizeof *rt->kv_rb);
    rt->kv_off = slm_calloc((size_t)cfg->n_layers, sizeof *rt->kv_off);
    if (!rt->kv_rb || !rt->kv_off) {
        slm_rt_free(rt);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory for the KV layout");
    }
    rt->kv_bytes = 0;
    for (int l = 0; l < cfg->n_layers; l++) { /* each layer's rows of its own width (gemma4: two widths, shared layers none) */
        const int kvd = slm_layer_kv_dim(cfg, l);
        rt->kv_rb[l] = kvd ? (size_t)slm_row_bytes((uint32_t)rt->kv_type, (uint64_t)kvd) : 0;
        if (!slm_kv_type_ok(rt->kv_type) || (kvd && !rt->kv_rb[l])) {
            slm_rt_free(rt);
            return slm_errf(err, SLM_ERR_ARG, "KV type %d with kv_dim %d: not f32, f16 or q8_0 of whole blocks",
                            c->opt.kv_type, kvd);
        }
        rt->kv_off[l] = rt->kv_bytes;
        rt->kv_bytes += 2 * (uint64_t)n_seqs * (uint64_t)rt->cap * (uint64_t)rt->kv_rb[l];
    }
    rt->arena_bytes = 0;
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].arena_bytes > rt->arena_bytes) rt->arena_bytes = c->progs[i].arena_bytes;
    const slm_program *big = slm_largest(c, SLM_PROG_PREFILL);
    const slm_program *emb = slm_largest(c, SLM_PROG_EMBED);
    if (cfg->encoder ? !emb : !big || !slm_largest(c, SLM_PROG_GENERATE))
        return slm_errf(err, SLM_ERR_INTERNAL, "compiled model lacks a %s program",
                        cfg->encoder ? "embedding" : "prefill or generate");
    int T = big ? big->rows : 1;
    if (emb && emb->rows > T) T = emb->rows; /* an encoder's (embed programs are prefill variants) */
    const slm_program *ver = slm_largest(c, SLM_PROG_VERIFY);
    if (ver && ver->rows > T) T = ver->rows;
    if (rt->batch_max > T) T = rt->batch_max;
    int logit_rows = ver ? ver->rows : 1;
    if (rt->batch_max > logit_rows) logit_rows = rt->batch_max;
    int hidden_rows = emb && emb->rows > logit_rows ? emb->rows : logit_rows; /* embed: every row's */
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_EMBED_BATCH) { /* embed.BxS: B x S rows, at most max_prompt_len */
            if (c->progs[i].rows > T) T = c->progs[i].rows;
            if (c->progs[i].rows > hidden_rows) hidden_rows = c->progs[i].rows;
        }
    rt->kv = slm_aligned_alloc((size_t)rt->kv_bytes);
    rt->arena = slm_aligned_alloc((size_t)rt->arena_bytes + 64);
    rt->input_ids = slm_calloc((size_t)T, sizeof(int32_t));
    rt->position_ids = slm_calloc((size_t)T, sizeof(int32_t));
    rt->cache_position = slm_calloc((size_t)T, sizeof(int32_t));
    rt->mask_all = slm_calloc((size_t)n_seqs * (size_t)rt->cap, sizeof(int32_t));
    rt->tokens_all = slm_calloc((size_t)n_seqs * (size_t)rt->cap, sizeof(int32_t));
    rt->seqs = slm_calloc((size_t)n_seqs, sizeof *rt->seqs);
    rt->mask = rt->mask_all;
    rt->tokens = rt->tokens_all;
    rt->hidden = slm_aligned_alloc((size_t)hidden_rows * (size_t)cfg->dim * sizeof(float));
    rt->head_cpos = slm_calloc(1, sizeof(int32_t));
    rt->logits = slm_aligned_alloc((size_t)logit_rows * (size_t)cfg->vocab_size * sizeof(float));
    rt->present_io = slm_calloc((size_t)2 * (size_t)c->n_progs * (size_t)cfg->n_layers, sizeof(int));
    rt->exec = slm_calloc((size_t)c->n_progs, sizeof *rt->exec);
    for (size_t i = 0; rt->present_io && i < (size_t)2 * (size_t)c->n_progs * (size_t)cfg->n_layers; i++)
        rt->present_io[i] = -1; /* none (a recurrent layer's, a gemma4 KV-shared layer's, the lm_head's) */
    rt->rstate_bytes = slm_rt_recur_floats(cfg) * (uint64_t)n_seqs * sizeof(float);
    if (rt->rstate_bytes) {
        rt->rstate = slm_aligned_alloc((size_t)rt->rstate_bytes);
        rt->n_snaps = n_snaps;
        rt->rsnap = slm_aligned_alloc((size_t)rt->rstate_bytes * (size_t)n_snaps);
        rt->snap_at = slm_calloc((size_t)n_seqs * (size_t)n_snaps, sizeof *rt->snap_at);
        for (int i = 0; rt->snap_at && i < n_seqs * n_snaps; i++) rt->snap_at[i] = -1;
        rt->rstate_off = slm_calloc((size_t)cfg->n_layers, sizeof *rt->rstate_off);
        int64_t off = 0;
        for (int l = 0; rt->rstate_off && l < cfg->n_layers; l++) {
            rt->rstate_off[l] = slm_layer_recurrent(cfg, l) ? off : -1;
            if (rt->rstate_off[l] >= 0) off += (slm_conv_state_floats(cfg) + slm_delta_state_floats(cfg)) * n_seqs;
        }
        if (!rt->rstate || !rt->rsnap || !rt->snap_at || !rt->rstate_off) {
            slm_rt_free(rt);
            return slm_errf(err, SLM_ERR_NOMEM, "out of memory allocating the recurrent state and its %d checkpoints (%d x %llu bytes)",
                            n_snaps, 1 + n_snaps, (unsigned long long)rt->rstate_bytes);
        }
    }
    if (!rt->exec || !rt->kv || !rt->arena || !rt->input_ids || !rt->position_ids || !rt->cache_position || !rt->mask_all || !rt->tokens_all || !rt->seqs || !rt->hidden || !rt->head_cpos ||
        !rt->logits || !rt->present_io) {
        slm_rt_free(rt);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory allocating the KV cache (%llu bytes) and arena",
                        (unsigned long long)rt->kv_bytes);
    }
    slm_status s;
    if ((s = slm_pool_create(&rt->pool, n_threads, err))) {
        slm_rt_free(rt);
        return s;
    }
    for (int i = 0; i < c->n_progs; i++) {
        slm_program *p = &c->progs[i];
        if ((s = slm_exec_init(&rt->exec[i], p, weights, c->consts.rope, rt->arena, err)) ||
            (s = slm_pool_reserve_scratch(rt->pool, rt->exec[i].scratch_bytes, err)) ||
            (s = bind_static(rt, p, i, err))) {
            slm_rt_free(rt);
            return s;
        }
    }
    rt->chunking = 1;
    for (int i = n_seqs - 1; i >= 0; i--) {
        slm_rt_select(rt, i);
        slm_rt_reset(rt);
    }
    return SLM_OK;
}

void slm_rt_free(slm_runtime *rt) {
    slm_pool_free(rt->pool);
    slm_pool_free(rt->head_pool);
    slm_aligned_free(rt->hidden);
    slm_xfree(rt->head_cpos);
    slm_aligned_free(rt->kv);
    slm_aligned_free(rt->arena);
    slm_xfree(rt->input_ids);
    slm_xfree(rt->position_ids);
    slm_xfree(rt->cache_position);
    slm_xfree(rt->mask_all);
    slm_xfree(rt->tokens_all);
    slm_xfree(rt->seqs);
    slm_aligned_free(rt->logits);
    slm_xfree(rt->present_io);
    slm_xfree(rt->kv_rb);
    slm_xfree(rt->kv_off);
    slm_aligned_free(rt->rstate);
    slm_aligned_free(rt->rsnap);
    slm_xfree(rt->snap_at);
    slm_xfree(rt->rstate_off);
    if (rt->exec)
        for (int i = 0; i < rt->comp->n_progs; i++) slm_exec_free(&rt->exec[i]);
    slm_xfree(rt->exec);
    memset(rt, 0, sizeof *rt);
}

void slm_rt_reset(slm_runtime *rt) {
    for (int l = 0; l < rt->comp->cfg.n_layers; l++) {
        const size_t region = (size_t)rt->cap * rt->kv_rb[l];
        memset(kv_layer(rt, l, 0), 0, region);
        memset(kv_layer(rt, l, 1), 0, region);
    }
    memset(rt->mask, 0, (size_t)rt->cap * sizeof(int32_t));
    state_reset(rt);
    rt->num_stored = 0;
    rt->gen = NULL;
    rt->variant_switches = 0;
    rt->switch_at = rt->switch_from = rt->switch_to = 0;
    rt->chunks = 0;
    rt->head_runs = 0;
}

/* The selected sequence's state lives in rt's fields; park saves it into
 * rt->seqs, unpark loads it back. */
static void park(slm_runtime *rt) {
    rt->seqs[rt->cur_seq] = (slm_seq_state){rt->num_stored, rt->gen, rt->variant_switches, rt->chunks,
                                            rt->head_runs, rt->switch_at, rt->switch_from, rt->switch_to};
}

static void unpark(slm_runtime *rt) {
    const slm_seq_state *n = &rt->seqs[rt->cur_seq];
    rt->num_stored = n->num_stored;
    rt->gen = n->gen;
    rt->variant_switches = n->variant_switches;
    rt->chunks = n->chunks;
    rt->head_runs = n->head_runs;
    rt->switch_at = n->switch_at;
    rt->switch_from = n->switch_from;
    rt->switch_to = n->switch_to;
}

void slm_rt_select(slm_runtime *rt, int seq) {
    if (seq < 0 || seq >= rt->n_seqs || seq == rt->cur_seq) return;
    park(rt);
    rt->cur_seq = seq;
    unpark(rt);
    rt->mask = rt->mask_all + (size_t)seq * rt->cap;
    rt->tokens = rt->tokens_all + (size_t)seq * rt->cap;
    /* the single-sequence programs see this sequence's region */
    const int L = rt->comp->cfg.n_layers;
    for (int i = 0; i < rt->comp->n_progs; i++) {
        const slm_program *p = &rt->comp->progs[i];
        if (is_batch(p)) continue;
        for (int k = 0; k < p->n_io; k++) {
            const slm_io_desc *d = &p->io[k];
            if (d->role == SLM_IO_ATTENTION_MASK) slm_exec_bind(&rt->exec[i], k, rt->mask);
            else if ((d->role == SLM_IO_CONV_STATE || d->role == SLM_IO_RECUR_STATE) && rt->rstate && d->layer >= 0 &&
                     d->layer < L && rt->rstate_off[d->layer] >= 0)
                slm_exec_bind(&rt->exec[i], k, state_of(rt, d->layer, d->role, seq));
            else if ((d->role == SLM_IO_PAST_KEY || d->role == SLM_IO_PAST_VALUE) && d->layer >= 0 && d->layer < L)
                slm_exec_bind(&rt->exec[i], k, kv_layer(rt, d->layer, d->role == SLM_IO_PAST_VALUE));
        }
    }
}

slm_status slm_rt_set_head_threads(slm_runtime *rt, int n_threads, slm_err *err) {
    slm_pool_free(rt->head_pool);
    rt->head_pool = NULL;
    slm_status s = slm_pool_create(&rt->head_pool, n_threads, err);
    if (s) return s;
    for (int i = 0; i < rt->comp->n_progs; i++)
        if (rt->comp->progs[i].kind == SLM_PROG_LMHEAD &&
            (s = slm_pool_reserve_scratch(rt->head_pool, rt->exec[i].scratch_bytes, err)))
            return s;
    return SLM_OK;
}

/* With the LM head separate: logits for `rows` hidden rows. */
static slm_status run_head(slm_runtime *rt, int rows, slm_err *err) {
    if (!rt->comp->opt.lm_head_separate) return SLM_OK;
    slm_program *h = slm_pick_lm_head(rt->comp, rows);
    if (!h) return slm_errf(err, SLM_ERR_INTERNAL, "no lm_head program for %d rows", rows);
    slm_status s = slm_exec_run(exec_of(rt, h), rt->head_pool ? rt->head_pool : rt->pool);
    if (s) return slm_errf(err, s, "%s program failed", h->name);
    rt->head_runs++;
    return SLM_OK;
}

/* The mutable command list: only present.L.* move between calls. */
static void bind_present(slm_runtime *rt, slm_program *p, int write_index) {
    int L = rt->comp->cfg.n_layers;
    int prog = (int)(p - rt->comp->progs);
    for (int l = 0; l < L; l++)
        for (int s = 0; s < 2; s++) {
            const int io = rt->present_io[(prog * L + l) * 2 + s];
            if (io >= 0) /* a recurrent or KV-shared layer has none */
                slm_exec_bind(exec_of(rt, p), io, kv_layer(rt, l, s) + (size_t)write_index * rt->kv_rb[l]);
        }
}

static slm_status check_ids(slm_runtime *rt, const int32_t *ids, int n, slm_err *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= rt->comp->cfg.vocab_size)
            return slm_errf(err, SLM_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", ids[i], i,
                            rt->comp->cfg.vocab_size);
    return SLM_OK;
}

/* Run one prefill-like program (prefill or verify) on n <= p->rows ids. */
static slm_status run_head(slm_runtime *rt, int rows, slm_err *err);

static slm_status run_rows(slm_runtime *rt, slm_program *p, const int32_t *ids, int n, int need_logits,
                           slm_err *err) {
    const int T = p->rows;
    /* right-aligned: padding rows first, the newest token in the last row */
    const int pad = T - n, w = rt->num_stored;
    for (int i = 0; i < T; i++) {
        int valid = i >= pad;
        rt->input_ids[i] = valid ? ids[i - pad] : 0;
        rt->cache_position[i] = valid ? w + i - pad : -1;
    }
    for (int i = 0; i < n; i++) {
        rt->mask[w + i] = 1;
        rt->tokens[w + i] = ids[i];
    }
    /* position = number of valid rows before it (sum(mask) - 1 for the newest) */
    int before = 0;
    for (int j = 0; j < w; j++) before += rt->mask[j] != 0;
    for (int i = 0; i < T; i++) rt->position_ids[i] = i >= pad ? before + i - pad : 0;
    bind_present(rt, p, w);
    slm_status s = slm_exec_run(exec_of(rt, p), rt->pool);
    if (s) {
        for (int i = 0; i < n; i++) rt->mask[w + i] = 0;
        return slm_errf(err, s, "%s program failed", p->name);
    }
    rt->num_stored += n;
    rt->gen = NULL; /* pick the generate variant again at the next step */
    /* the head runs only where logits are needed: not for inner chunks */
    return need_logits ? run_head(rt, p->kind == SLM_PROG_VERIFY ? p->rows : 1, err) : SLM_OK;
}

slm_status slm_rt_prefill(slm_runtime *rt, const int32_t *ids, int n, slm_err *err) {
    if (n < 1) return slm_errf(err, SLM_ERR_ARG, "prefill needs at least one token");
    slm_program *big = slm_largest(rt->comp, SLM_PROG_PREFILL);
    if (!big) return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s is an encoder: embeddings only, no text", rt->comp->cfg.arch);
    if (n > big->rows && !rt->chunking)
        return slm_errf(err, SLM_ERR_CAPACITY,
                        "prompt of %d tokens exceeds max_prompt_len %d (raise --max-prompt-len)", n, big->rows);
    if (rt->num_stored + n > rt->cap)
        return slm_errf(err, SLM_ERR_CAPACITY,
                        "KV cache full: %d stored + %d new tokens need %d rows, capacity is %d "
                        "(max_prompt_len + min_response_len)",
                        rt->num_stored, n, rt->num_stored + n, rt->cap);
    slm_status s = check_ids(rt, ids, n, err);
    if (s) return s;
    /* Chunked prefill: full chunks through the largest program, the rest
     * through the smallest variant that holds it. Each chunk appends its
     * rows where the next chunk (and generate) reads them. */
    while (n > 0) {
        int m = n > big->rows ? big->rows : n;
        slm_program *p = slm_pick_prefill(rt->comp, m);
        const uint64_t t0 = slm_trace_begin();
        if ((s = run_rows(rt, p, ids, m, n == m, err))) return s;
        slm_trace_end("runtime", "prefill_chunk", t0,
                      &(slm_trace_args){{"rows", "chunk", "stored"}, {m, rt->chunks, rt->num_stored}, "program", p->name});
        ids += m;
        n -= m;
        rt->chunks++;
    }
    return SLM_OK;
}

slm_status slm_rt_embed(slm_runtime *rt, const int32_t *ids, int n, slm_rt_rows_fn fn, void *ud, slm_err *err) {
    slm_program *big = slm_largest(rt->comp, SLM_PROG_EMBED);
    if (!big) return slm_errf(err, SLM_ERR_ARG, "no embedding programs: load the model with embeddings on");
    if (n < 1) return slm_errf(err, SLM_ERR_ARG, "an embedding needs at least one token");
    if (rt->comp->cfg.encoder && (n > big->rows || rt->num_stored))
        return slm_errf(err, SLM_ERR_CAPACITY, "input of %d tokens: an encoder attends both ways, so its input runs in "
                        "one call of at most max_prompt_len %d tokens (the model's context: %d); raise "
                        "--max-prompt-len or shorten the input", n, big->rows, rt->comp->cfg.context_len);
    if (rt->num_stored + n > rt->cap)
        return slm_errf(err, SLM_ERR_CAPACITY,
                        "input of %d tokens does not fit the KV cache: %d stored, capacity %d (max_prompt_len + "
                        "min_response_len; raise them)",
                        n, rt->num_stored, rt->cap);
    slm_status s = check_ids(rt, ids, n, err);
    if (s) return s;
    const int dim = rt->comp->cfg.dim;
    for (int done = 0; n > 0; rt->chunks++) {
        const int m = n > big->rows ? big->rows : n;
        slm_program *p = slm_pick_embed(rt->comp, m);
        const uint64_t t0 = slm_trace_begin();
        if ((s = run_rows(rt, p, ids, m, 0, err))) return s;
        slm_trace_end("runtime", "embed_chunk", t0,
                      &(slm_trace_args){{"rows", "chunk", "stored"}, {m, rt->chunks, rt->num_stored}, "program", p->name});
        fn(ud, rt->hidden + (size_t)(p->rows - m) * (size_t)dim, done, m, dim); /* right-aligned rows */
        ids += m;
        n -= m;
        done += m;
    }
    return SLM_OK;
}

int slm_rt_embed_region_max(const slm_runtime *rt) {
    int best = 0;
    for (int i = 0; i < rt->comp->n_progs; i++)
        if (rt->comp->progs[i].kind == SLM_PROG_EMBED_BATCH && rt->comp->progs[i].region > best)
            best = rt->comp->progs[i].region;
    return best;
}

/* One call of an embed.BxS program on texts [0, c) of ids / n (c <= B):
 * text q in region B - c + q (the empty regions first: the executor skips
 * rows before the first valid one), its rows from the region's first,
 * positions from 0, padding rows after them masked out (their K/V rows are
 * written in the region and never read). */
static slm_status run_embed_batch(slm_runtime *rt, slm_program *p, int first, int c, const int32_t *const *ids,
                                  const int *n, slm_rt_text_fn fn, void *ud, slm_err *err) {
    const int S = p->region, B = p->rows / S, dim = rt->comp->cfg.dim;
    for (int r = 0; r < p->rows; r++) {
        const int j = r / S, i = r % S, q = j - (B - c), valid = q >= 0 && i < n[first + q];
        rt->input_ids[r] = valid ? ids[first + q][i] : 0;
        rt->position_ids[r] = valid ? i : 0;
        rt->cache_position[r] = q >= 0 ? r : -1;
        rt->mask[r] = valid;
    }
    bind_present(rt, p, 0);
    const uint64_t t0 = slm_trace_begin();
    slm_status s = slm_exec_run(exec_of(rt, p), rt->pool);
    memset(rt->mask, 0, (size_t)p->rows * sizeof *rt->mask);
    if (s) return slm_errf(err, s, "%s program failed", p->name);
    slm_trace_end("runtime", "embed_batch", t0, &(slm_trace_args){{"texts", "first"}, {c, first}, "program", p->name});
    for (int q = 0; q < c; q++) fn(ud, first + q, rt->hidden + (size_t)(B - c + q) * (size_t)S * (size_t)dim, n[first + q], dim);
    return SLM_OK;
}

slm_status slm_rt_embed_batch(slm_runtime *rt, int k, const int32_t *const *ids, const int *n, slm_rt_text_fn fn,
                              void *ud, slm_err *err) {
    const int most = slm_rt_embed_region_max(rt);
    if (!most) return slm_errf(err, SLM_ERR_ARG, "no batch embedding programs (an encoder's, with embeddings on)");
    if (rt->num_stored) return slm_errf(err, SLM_ERR_ARG, "batch embeddings need an empty sequence (%d rows stored)", rt->num_stored);
    if (k < 0 || (k && (!ids || !n))) return slm_errf(err, SLM_ERR_ARG, "batch embeddings: %d texts", k);
    for (int t = 0; t < k; t++) {
        if (!ids[t] || n[t] < 1 || n[t] > most)
            return slm_errf(err, SLM_ERR_ARG, "text %d: %d tokens; a region holds 1 to %d", t, n[t], most);
        slm_status s = check_ids(rt, ids[t], n[t], err);
        if (s) return s;
    }
    /* greedy, in the given order: a call takes texts while the program of
     * their longest one's region still has a region for each */
    for (int t = 0; t < k;) {
        int longest = n[t], c = 1;
        slm_program *p = slm_pick_embed_batch(rt->comp, longest);
        while (t + c < k) {
            const int l = n[t + c] > longest ? n[t + c] : longest;
            slm_program *q = slm_pick_embed_batch(rt->comp, l);
            if (c + 1 > q->rows / q->region) break;
            longest = l;
            p = q;
            c++;
        }
        slm_status s = run_embed_batch(rt, p, t, c, ids, n, fn, ud, err);
        if (s) return s;
        t += c;
    }
    return SLM_OK;
}

slm_status slm_rt_verify(slm_runtime *rt, const int32_t *ids, int n, const float **logits, slm_err *err) {
    slm_program *p = slm_largest(rt->comp, SLM_PROG_VERIFY);
    if (!p) return slm_errf(err, SLM_ERR_ARG, "no verify program: compile with draft_n > 0");
    if (n < 1 || n > p->rows) return slm_errf(err, SLM_ERR_ARG, "verify takes 1..%d ids, got %d", p->rows, n);
    if (rt->num_stored + n > rt->cap)
        return slm_errf(err, SLM_ERR_CAPACITY, "KV cache full: %d stored + %d new tokens > capacity %d",
                        rt->num_stored, n, rt->cap);
    slm_status s = check_ids(rt, ids, n, err);
    if (s) return s;
    const uint64_t t0 = slm_trace_begin();
    if ((s = run_rows(rt, p, ids, n, 1, err))) return s;
    slm_trace_end("runtime", "verify", t0, &(slm_trace_args){{"rows", "stored"}, {n, rt->num_stored}, NULL, NULL});
    *logits = rt->logits + (size_t)(p->rows - n) * (size_t)rt->comp->cfg.vocab_size;
    return SLM_OK;
}

slm_status slm_rt_trim(slm_runtime *rt, int n_keep) {
    if (n_keep < 0) n_keep = 0;
    rt->trim_rebuilt = 0;
    if (rt->rstate && n_keep < rt->num_stored) {
        /* the state cannot be rewound: back to the checkpoint when it is at or
         * before n_keep (its rows untouched since), else to zero; the kept
         * tokens after it prefilled again */
        const int k = snap_best(rt, n_keep), at = k >= 0 ? rt->snap_at[rt->cur_seq * rt->n_snaps + k] : 0;
        slm_trace_instant("runtime", "trim_rebuild", &(slm_trace_args){{"keep", "from"}, {n_keep, at}, NULL, NULL});
        for (int j = at; j < rt->num_stored; j++) rt->mask[j] = 0;
        rt->num_stored = at;
        rt->gen = NULL;
        if (at > 0) {
            state_copy(rt, rt->rstate, snap_buf(rt, k));
            for (int i = 0; i < rt->n_snaps; i++) /* past the cut: their rows are about to change */
                if (rt->snap_at[rt->cur_seq * rt->n_snaps + i] > n_keep) rt->snap_at[rt->cur_seq * rt->n_snaps + i] = -1;
        } else {
            state_reset(rt);
        }
        if (n_keep == at) return SLM_OK;
        rt->trim_rebuilt = n_keep - at;
        slm_err err = {0};
        const int chunking = rt->chunking;
        rt->chunking = 1; /* however long the kept tokens are */
        /* run_rows writes each id back over itself: rt->tokens[w + i] = ids[i], the same row */
        const slm_status s = slm_rt_prefill(rt, rt->tokens + at, n_keep - at, &err);
        rt->chunking = chunking;
        if (s) slm_rt_reset(rt);
        return s;
    }
    for (int j = n_keep; j < rt->num_stored; j++) rt->mask[j] = 0;
    if (n_keep < rt->num_stored) {
        slm_trace_instant("runtime", "trim", &(slm_trace_args){{"keep", "dropped"}, {n_keep, rt->num_stored - n_keep}, NULL, NULL});
        rt->num_stored = n_keep;
    }
    rt->gen = NULL;
    return SLM_OK;
}

void slm_rt_full_message(const slm_runtime *rt, char *buf, size_t cap) {
    const int ctx = rt->comp->cfg.context_len;
    const slm_compile_options *o = &rt->comp->opt;
    if (ctx > rt->cap)
        snprintf(buf, cap,
                 "KV cache full: %d tokens stored, capacity %d (max_prompt_len %d + min_response_len %d); raise "
                 "--min-response-len (up to %d more rows fit the model's context length %d) or use --on-overflow "
                 "truncate",
                 rt->num_stored, rt->cap, o->max_prompt_len, o->min_response_len, ctx - rt->cap, ctx);
    else
        snprintf(buf, cap,
                 "KV cache full: %d tokens stored, capacity %d: the model's context length %d is reached and no "
                 "option raises it; use --on-overflow truncate (keeps the newest half and goes on) or generate "
                 "fewer tokens (-n)",
                 rt->num_stored, rt->cap, ctx > 0 ? ctx : rt->cap);
}

slm_status slm_rt_decode(slm_runtime *rt, int32_t id, slm_err *err) {
    if (!slm_largest(rt->comp, SLM_PROG_GENERATE))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s is an encoder: embeddings only, no text", rt->comp->cfg.arch);
    if (rt->num_stored + 1 > rt->cap) {
        char msg[400];
        slm_rt_full_message(rt, msg, sizeof msg);
        return slm_errf(err, SLM_ERR_CAPACITY, "%s", msg);
    }
    slm_status s = check_ids(rt, &id, 1, err);
    if (s) return s;
    const int w = rt->num_stored;
    if (!rt->gen) {
        int want = w + rt->comp->opt.min_response_len;
        rt->gen = slm_pick_generate(rt->comp, want < rt->cap ? want : rt->cap);
    } else if (rt->gen->kv_capacity < w + 1) {
        const int from = rt->gen->kv_capacity;
        rt->gen = slm_pick_generate(rt->comp, w + 1); /* a larger view of the same KV */
        rt->variant_switches++;
        rt->switch_at = w;
        rt->switch_from = from;
        rt->switch_to = rt->gen ? rt->gen->kv_capacity : 0;
        if (rt->gen)
            slm_trace_instant("runtime", "variant_switch",
                              &(slm_trace_args){{"from_capacity", "to_capacity", "stored"}, {from, rt->gen->kv_capacity, w},
                                                "program", rt->gen->name});
    }
    slm_program *p = rt->gen;
    if (!p || p->kv_capacity < w + 1) return slm_errf(err, SLM_ERR_INTERNAL, "no generate variant for %d rows", w + 1);
    rt->mask[w] = 1;
    rt->tokens[w] = id;
    int valid = 0;
    for (int j = 0; j < p->kv_capacity; j++) valid += rt->mask[j] != 0;
    rt->input_ids[0] = id;
    rt->position_ids[0] = valid - 1; /* sum(mask) - 1 */
    rt->cache_position[0] = w;
    bind_present(rt, p, w);
    const uint64_t t0 = slm_trace_begin();
    if ((s = slm_exec_run(exec_of(rt, p), rt->pool))) return slm_errf(err, s, "generate program failed");
    if ((s = run_head(rt, 1, err))) return s;
    rt->num_stored++;
    slm_trace_end("runtime", "decode", t0, &(slm_trace_args){{"position"}, {w}, "program", p->name});
    return SLM_OK;
}

slm_status slm_rt_decode_batch(slm_runtime *rt, const int *seqs, const int32_t *ids, int n, const float **logits,
                               slm_err *err) {
    slm_program *p = NULL;
    for (int i = 0; i < rt->comp->n_progs; i++)
        if (is_batch(&rt->comp->progs[i]) && rt->comp->progs[i].rows >= n &&
            (!p || rt->comp->progs[i].rows < p->rows))
            p = &rt->comp->progs[i];
    if (!p) return slm_errf(err, SLM_ERR_ARG, "no batch program for %d sequences (largest %d)", n, rt->batch_max);
    const int T = p->rows, pad = T - n;
    slm_status s = check_ids(rt, ids, n, err);
    if (s) return s;
    park(rt);
    for (int i = 0; i < n; i++) {
        if (seqs[i] < 0 || seqs[i] >= rt->n_seqs) return slm_errf(err, SLM_ERR_ARG, "sequence %d out of range", seqs[i]);
        for (int j = 0; j < i; j++)
            if (seqs[j] == seqs[i]) return slm_errf(err, SLM_ERR_ARG, "sequence %d twice in a batch", seqs[i]);
        const int w = rt->seqs[seqs[i]].num_stored;
        if (w + 1 > rt->cap)
            return slm_errf(err, SLM_ERR_CAPACITY, "KV cache full: sequence %d holds %d tokens, capacity %d", seqs[i], w,
                            rt->cap);
    }
    for (int r = 0; r < pad; r++) {
        rt->input_ids[r] = 0;
        rt->position_ids[r] = 0;
        rt->cache_position[r] = -1;
    }
    for (int i = 0; i < n; i++) {
        slm_seq_state *q = &rt->seqs[seqs[i]];
        const int base = seqs[i] * rt->cap, w = q->num_stored;
        int32_t *mask = rt->mask_all + base;
        mask[w] = 1;
        rt->tokens_all[base + w] = ids[i];
        int valid = 0;
        for (int j = 0; j <= w; j++) valid += mask[j] != 0;
        const int r = pad + i;
        rt->input_ids[r] = ids[i];
        rt->position_ids[r] = valid - 1; /* sum(mask) - 1 of its own sequence */
        rt->cache_position[r] = base + w;
    }
    const uint64_t t0 = slm_trace_begin();
    if ((s = slm_exec_run(exec_of(rt, p), rt->pool))) {
        for (int i = 0; i < n; i++) rt->mask_all[seqs[i] * rt->cap + rt->seqs[seqs[i]].num_stored] = 0;
        return slm_errf(err, s, "%s program failed", p->name);
    }
    for (int i = 0; i < n; i++) {
        slm_seq_state *q = &rt->seqs[seqs[i]];
        q->num_stored++;
        /* the single-sequence generate variant is picked again at its next step */
        q->gen = NULL;
    }
    unpark(rt);
    slm_trace_end("runtime", "decode_batch", t0, &(slm_trace_args){{"sequences"}, {n}, "program", p->name});
    *logits = rt->logits + (size_t)pad * (size_t)rt->comp->cfg.vocab_size;
    return SLM_OK;
}
