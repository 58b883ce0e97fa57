/* The compile driver: the stateful graph built once, then each program
 * (prefill and generate variants, verify, the LM head, batch decode)
 * cloned from it, passed and lowered (lower.c). */
#include <stdlib.h>
#include <unistd.h>

#include "compiler/compiler.h"

/* ---- the compile driver -------------------------------------------------- */

/* region > 0: an encoder's batch embedding program (kind EMBED_BATCH) of
 * rows_t / region texts, each in its region of `region` rows. */
static slm_status make_program(slm_compiled *c, slm_program *p, slm_prog_kind kind, int rows_t, int cap, int region,
                               const slm_model_file *m, slm_err *err) {
    slm_status s;
    p->kind = (uint8_t)(region > 0 ? SLM_PROG_EMBED_BATCH : kind);
    static const char *const names[] = {"", "prefill", "generate", "verify", "lm_head", "batch", "embed"};
    snprintf(p->name, sizeof p->name, "%s.%d", names[kind], kind == SLM_PROG_GENERATE ? cap : rows_t);
    if (region > 0) snprintf(p->name, sizeof p->name, "embed.%dx%d", rows_t / region, region);
    if (kind == SLM_PROG_LMHEAD) {
        slm_graph_init(&p->graph, p->name);
        if ((s = slm_build_lm_head(&p->graph, m, err))) return s;
        if ((s = slm_pass_specialize(&p->graph, rows_t, rows_t, err))) return s;
        return slm_lower(p, &p->graph, &c->opt, m->map.data, m->map.size, err);
    }
    if ((s = slm_graph_clone(&p->graph, &c->stateful, p->name))) return slm_errf(err, s, "out of memory");
    p->graph.rope_table_bytes = (uint64_t)c->consts.rope_pos * (uint64_t)c->consts.rope_pairs * 2 * sizeof(float);
    if ((s = slm_pass_state_to_io(&p->graph, err))) return s;
    if ((s = slm_pass_specialize(&p->graph, rows_t, cap, err))) return s;
    /* verify and embed keep every row; embed outputs the final norm's rows (no LM head) */
    if (kind != SLM_PROG_VERIFY && kind != SLM_PROG_EMBED && (s = slm_pass_last_row(&p->graph, err))) return s;
    /* an encoder's graph has no LM head: its output is already every row's hidden state */
    if ((c->opt.lm_head_separate || kind == SLM_PROG_EMBED) && !slm_encoder_graph(&m->cfg) &&
        (s = slm_pass_split_lm_head(&p->graph, err)))
        return s;
    if ((s = slm_pass_fuse_prologues(&p->graph, err))) return s;
    if ((s = slm_pass_fuse_rope(&p->graph, err))) return s;
    if ((s = slm_pass_fuse_residual(&p->graph, err))) return s;
    if (region > 0) { /* attention within each region, K/V rows at their cache positions */
        s = slm_lower_batch(p, &p->graph, &c->opt, region, m->map.data, m->map.size, err);
        p->region = region;
        return s;
    }
    return slm_lower(p, &p->graph, &c->opt, m->map.data, m->map.size, err);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sort, clamp to [lo, hi], drop duplicates, make sure hi is present. */
static int32_t normalize_variants(int32_t *v, int32_t n, int32_t lo, int32_t hi) {
    if (n < 0) n = 0;
    if (n > SLM_MAX_VARIANTS - 1) n = SLM_MAX_VARIANTS - 1;
    for (int i = 0; i < n; i++) v[i] = v[i] < lo ? lo : v[i] > hi ? hi : v[i];
    v[n++] = hi;
    qsort(v, (size_t)n, sizeof *v, cmp_i32);
    int32_t k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    for (int i = k; i < SLM_MAX_VARIANTS; i++) v[i] = 0;
    return k;
}

slm_status slm_compile(slm_compiled *out, const slm_model_file *m, const slm_compile_options *opt,
                       slm_err *err) {
    memset(out, 0, sizeof *out);
    out->n_seqs = 1;
    out->opt = *opt;
    out->cfg = m->cfg;
    int ctx = m->cfg.context_len > 0 ? m->cfg.context_len : INT32_MAX;
    int mpl = opt->max_prompt_len, mrl = opt->min_response_len;
    if (mpl < 1 || mrl < 0) return slm_errf(err, SLM_ERR_ARG, "max_prompt_len must be >= 1 and min_response_len >= 0");
    if (m->cfg.encoder) mrl = 0; /* an encoder generates nothing: the cache holds one input */
    if (!slm_kv_type_ok(opt->kv_type))
        return slm_errf(err, SLM_ERR_ARG, "kv_type %d: the KV cache holds f32, f16 or q8_0", opt->kv_type);
    const int hd_q8 = m->cfg.head_dim % SLM_QK8_0 ? m->cfg.head_dim : m->cfg.head_dim_swa; /* gemma4: both kinds */
    if (opt->kv_type == SLM_Q8_0 && hd_q8 % SLM_QK8_0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "--kv-type q8_0: head_dim %d is not a multiple of %d (q8_0 blocks "
                        "must not straddle heads); use --kv-type f16 or f32", hd_q8, SLM_QK8_0);
    if (opt->kv_type != SLM_F32 && slm_max_head_dim(&m->cfg) > 512)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "--kv-type %s: head_dim %d above 512; use --kv-type f32",
                        slm_dtype_name((uint32_t)opt->kv_type), slm_max_head_dim(&m->cfg));
    /* Clamp to the model's context length. The response room is kept when
     * the prompt room can give way; otherwise the response room shrinks. */
    if (mpl > ctx) mpl = ctx;
    if (mrl > ctx - mpl) {
        if (ctx - mrl >= 1) mpl = ctx - mrl;
        else mrl = ctx - mpl;
    }
    out->opt.max_prompt_len = mpl;
    out->opt.min_response_len = mrl;
    if (out->opt.tile_kb <= 0) { /* an eighth of this CPU's L2: the rest holds activations, scratch */
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        out->opt.tile_kb = l2 > 0 ? (int32_t)(l2 / 8 / 1024) : 256;
        if (out->opt.tile_kb < 32) out->opt.tile_kb = 32;
    }
    out->kv_capacity = mpl + mrl;
    slm_compile_options *o = &out->opt;
    o->n_prefill_variants = normalize_variants(o->prefill_variants, o->n_prefill_variants, 1, mpl);
    o->n_generate_variants = normalize_variants(o->generate_variants, o->n_generate_variants, 1, out->kv_capacity);
    slm_status s;
    slm_graph_init(&out->stateful, "stateful");
    if ((s = slm_encoder_graph(&m->cfg) ? slm_build_encoder(&out->stateful, m, err) : slm_build_decoder(&out->stateful, m, err)))
        goto fail;
    if ((s = slm_build_constants(out, m, err))) goto fail;
    if (m->cfg.encoder) { /* embedding programs only (slm_compile_embed) */
        if (o->draft_n > 0 || o->lm_head_separate) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s is an encoder (an embedding model): no speculative decoding, no "
                         "separate LM head", m->cfg.arch);
            goto fail;
        }
        o->draft_n = 0;
        return SLM_OK;
    }
    if (o->draft_n < 0 || o->draft_n + 1 > mpl) o->draft_n = 0;
    if (o->draft_n > 0 && m->cfg.recur_interval) {
        s = slm_errf(err, SLM_ERR_UNSUPPORTED, "speculative decoding: %s's recurrent layers keep a state that "
                     "rejected tokens cannot be taken back from; it is not supported for this model", m->cfg.arch);
        goto fail;
    }
    out->progs = slm_calloc((size_t)(o->n_prefill_variants + o->n_generate_variants + 3), sizeof(slm_program));
    if (!out->progs) {
        s = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < o->n_prefill_variants; i++, out->n_progs++)
        if ((s = make_program(out, &out->progs[out->n_progs], SLM_PROG_PREFILL, o->prefill_variants[i],
                              out->kv_capacity, 0, m, err)))
            goto fail;
    for (int i = 0; i < o->n_generate_variants; i++, out->n_progs++)
        if ((s = make_program(out, &out->progs[out->n_progs], SLM_PROG_GENERATE, 1, o->generate_variants[i], 0, m, err)))
            goto fail;
    if (o->draft_n > 0) {
        if ((s = make_program(out, &out->progs[out->n_progs], SLM_PROG_VERIFY, o->draft_n + 1, out->kv_capacity, 0, m, err)))
            goto fail;
        out->n_progs++;
    }
    if (o->lm_head_separate) {
        if ((s = make_program(out, &out->progs[out->n_progs], SLM_PROG_LMHEAD, 1, 1, 0, m, err))) goto fail;
        out->n_progs++;
        if (o->draft_n > 0) {
            if ((s = make_program(out, &out->progs[out->n_progs], SLM_PROG_LMHEAD, o->draft_n + 1, o->draft_n + 1, 0, m, err)))
                goto fail;
            out->n_progs++;
        }
    }
    return SLM_OK;
fail:
    out->n_progs++; /* free the half-built one too */
    slm_compiled_free(out);
    return s;
}

/* ---- batch programs (concurrent sequences) -------------------------------- */

static slm_status make_batch_program(slm_compiled *c, slm_program *p, int rows, int n_seqs, const slm_model_file *m,
                                     slm_err *err) {
    slm_status s;
    p->kind = SLM_PROG_BATCH;
    snprintf(p->name, sizeof p->name, "batch.%d", rows);
    if ((s = slm_graph_clone(&p->graph, &c->stateful, p->name))) return slm_errf(err, s, "out of memory");
    p->graph.rope_table_bytes = (uint64_t)c->consts.rope_pos * (uint64_t)c->consts.rope_pairs * 2 * sizeof(float);
    if ((s = slm_pass_state_to_io(&p->graph, err))) return s;
    if ((s = slm_pass_specialize(&p->graph, rows, n_seqs * c->kv_capacity, err))) return s;
    if ((s = slm_pass_fuse_prologues(&p->graph, err))) return s;
    if ((s = slm_pass_fuse_rope(&p->graph, err))) return s;
    if ((s = slm_pass_fuse_residual(&p->graph, err))) return s;
    return slm_lower_batch(p, &p->graph, &c->opt, c->kv_capacity, m->map.data, m->map.size, err);
}

slm_status slm_compile_batch(slm_compiled *c, const slm_model_file *m, int n_seqs, const int *batches, int n_batches,
                             slm_err *err) {
    if (n_seqs <= 1) return SLM_OK;
    if (c->opt.lm_head_separate)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "concurrent sequences (%d) with a separate LM head are not supported",
                        n_seqs);
    if ((int64_t)n_seqs * c->kv_capacity > (1 << 24))
        return slm_errf(err, SLM_ERR_ARG, "%d sequences of %d KV rows are too many", n_seqs, c->kv_capacity);
    int add = 0;
    for (int i = 0; i < n_batches; i++) add += batches[i] > 1 && batches[i] <= n_seqs;
    slm_program *np = slm_realloc(c->progs, (size_t)(c->n_progs + add) * sizeof *np);
    if (!np) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    c->progs = np;
    memset(c->progs + c->n_progs, 0, (size_t)add * sizeof *np);
    c->n_seqs = n_seqs;
    for (int i = 0; i < n_batches; i++) {
        if (batches[i] <= 1 || batches[i] > n_seqs) continue;
        slm_status s = make_batch_program(c, &c->progs[c->n_progs], batches[i], n_seqs, m, err);
        c->n_progs++; /* freed with the others, even half built */
        if (s) return s;
    }
    return SLM_OK;
}

/* ---- embedding programs -------------------------------------------------- */

/* The region sizes of an encoder's batch embedding programs (ascending). */
static const int embed_regions[] = {SLM_EMBED_REGIONS};

int slm_embed_batch_shape(int max_prompt_len, int i, int *regions, int *rows) {
    if (i < 0 || i >= (int)(sizeof embed_regions / sizeof embed_regions[0])) return 0;
    const int all = max_prompt_len < SLM_EMBED_BATCH_ROWS ? max_prompt_len : SLM_EMBED_BATCH_ROWS;
    const int s = embed_regions[i], b = all / s;
    if (b < 2) return 0;
    *regions = b;
    *rows = s;
    return 1;
}

int slm_embed_batchable(const slm_model_config *cfg) {
    /* a decoder's regions are causal like its prefill; recurrent layers carry
     * one state a sequence, which a region cannot have */
    return cfg->encoder || !cfg->recur_interval;
}

slm_status slm_compile_embed(slm_compiled *c, const slm_model_file *m, slm_err *err) {
    const int n = c->opt.n_prefill_variants;
    if (n < 1) return slm_errf(err, SLM_ERR_INTERNAL, "embedding programs: no prefill variants");
    int nb = 0, b, r;
    while (slm_embed_batchable(&c->cfg) && slm_embed_batch_shape(c->opt.max_prompt_len, nb, &b, &r)) nb++;
    slm_program *np = slm_realloc(c->progs, (size_t)(c->n_progs + n + nb) * sizeof *np);
    if (!np) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    c->progs = np;
    memset(c->progs + c->n_progs, 0, (size_t)(n + nb) * sizeof *np);
    for (int i = 0; i < n + nb; i++) {
        const int batch = i >= n && slm_embed_batch_shape(c->opt.max_prompt_len, i - n, &b, &r);
        slm_status s = make_program(c, &c->progs[c->n_progs], SLM_PROG_EMBED, batch ? b * r : c->opt.prefill_variants[i],
                                    c->kv_capacity, batch ? r : 0, m, err);
        c->n_progs++; /* freed with the others, even half built */
        if (s) return s;
    }
    return SLM_OK;
}

slm_program *slm_pick_embed_batch(slm_compiled *c, int region) {
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_EMBED_BATCH && c->progs[i].region >= region) return &c->progs[i];
    return NULL;
}

slm_program *slm_pick_embed(slm_compiled *c, int n) {
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_EMBED && c->progs[i].rows >= n) return &c->progs[i];
    return NULL;
}

slm_program *slm_pick_prefill(slm_compiled *c, int n) {
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_PREFILL && c->progs[i].rows >= n) return &c->progs[i];
    return NULL;
}

slm_program *slm_pick_generate(slm_compiled *c, int need) {
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_GENERATE && c->progs[i].kv_capacity >= need) return &c->progs[i];
    return NULL;
}

slm_program *slm_pick_lm_head(slm_compiled *c, int rows) {
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind == SLM_PROG_LMHEAD && c->progs[i].rows == rows) return &c->progs[i];
    return NULL;
}

slm_program *slm_largest(slm_compiled *c, slm_prog_kind kind) {
    slm_program *best = NULL;
    for (int i = 0; i < c->n_progs; i++) if (c->progs[i].kind == kind) best = &c->progs[i];
    return best;
}

void slm_compiled_free(slm_compiled *c) {
    slm_graph_free(&c->stateful);
    if (c->progs)
        for (int i = 0; i < c->n_progs; i++) slm_program_free(&c->progs[i]);
    slm_xfree(c->progs);
    slm_aligned_free(c->consts.rope);
    memset(c, 0, sizeof *c);
}
