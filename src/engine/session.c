/* Sessions: one conversation's KV rows and generation state, and the one
 * generation loop of staticlm (run, chat and serve call it; see
 * include/staticlm.h). It stands on engine.c (the KV slots, the stop set,
 * tokenizing text feeds) and calls nothing above it.
 *
 * A session feeds tokens (prefill, continuing what its KV rows hold) and
 * then produces one token per slm_session_next: it samples from the logits
 * of the last fed or decoded row; the sampled token stays pending (not yet
 * in the KV) until the next call decodes it, or the next feed prefills it
 * together with the new tokens. So a reply that stops at its length limit
 * costs no decode step for its last token, and a stop token never enters the
 * KV. With a draft model, next() decodes speculatively: the draft proposes
 * draft_n tokens after the pending one, the verify program checks them in
 * one call, the accepted ones are queued (greedy: equal to the target's
 * argmax; sampling: the rejection rule, so the output distribution is the
 * target's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/trace.h"
#include "engine/engine_internal.h"

#define MAX_STOP_STR 8
#define MAX_DRAFT 64

struct slm_session {
    slm_engine *e;
    int slot;                 /* KV region of the runtime */
    slm_session_cfg cfg;
    char *stop_str[MAX_STOP_STR];
    int stop_of[MAX_STOP_STR];  /* each one's index in the caller's cfg.stop (empty ones are skipped) */
    int n_stop_str;
    int stop_hit;             /* SLM_STOP_STRING: the stop_str that ended the reply */
    uint64_t rng;
    float *logits;            /* [V] logits the next token is sampled from */
    float *q;                 /* [MAX_DRAFT][V] draft distributions (speculative sampling) */
    void *scratch;            /* slm_sample_scratch_size(V) */
    int have_logits;
    int pending;              /* sampled, not yet in the KV; -1 none */
    int prev;                 /* last token (piece decoding) */
    int32_t queue[MAX_DRAFT + 1]; /* tokens accepted by verification, to emit */
    int qn, qi;
    int use_draft;            /* this session drives the engine's draft */
    int produced;             /* tokens generated since the last feed */
    int stop;                 /* slm_stop_reason */
    char *out;                /* reply text since the last feed (printable pieces) */
    size_t out_len, out_cap, safe;
    slm_session_stats st;
    slm_err err;
    double t_feed;            /* when the last feed started (time to first token) */
    int first_pending;        /* 1 until the first token after a feed is sampled */
    int offer_pc;             /* the feed completes a prompt (set_prompt): offer it to the prefix cache */
    int no_pc_store;          /* a stepped prompt's piece before the last: offer nothing yet */
    int cut_tail, cut_pc;     /* recurrent layers: rows where the prompt being fed stops for a checkpoint
                                 (SNAP_TAIL before its end) and for one the prefix cache keeps too (its
                                 prefix shared with an earlier prompt); 0: none */
    int32_t *rest;            /* a stepped prompt (slm_session_begin_prompt): the ids still to prefill */
    slm_gsamp *gs;            /* the sampling's grammar (grammar.c), or NULL */
    float *lp_raw;            /* [V] cfg.logprobs: the raw logits of the last sampled token */
    slm_token_logprobs lp;    /* ... and its log-probabilities (lp_ok: for the last returned token) */
    int lp_ok;
    int rest_n, rest_i;       /* [rest_i, rest_n) of rest are left */
};

/* Models with recurrent layers keep a checkpoint this many rows before a
 * whole prompt's end besides the one at its end: the next prompt of a
 * conversation may render the last generation prompt otherwise (Qwen3.5's
 * template writes "<think>\n" after "<|im_start|>assistant\n" in the
 * generation prompt, not in the history), and so share fewer rows than the
 * last prompt held; it resumes from here instead of row 0. Four, as
 * llama.cpp's server does. */
#define SNAP_TAIL 4
/* The shortest prefix shared with an earlier prompt that a recurrent model's
 * prompt stops at to give the prefix cache (a state is megabytes). */
#define SHARED_MIN 32

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- life cycle ---------------------------------------------------------------- */

static void clear_stop_strings(slm_session *s) {
    for (int i = 0; i < s->n_stop_str; i++) slm_xfree(s->stop_str[i]);
    s->n_stop_str = 0;
}

static void note(slm_session *s, const char *msg) {
    if (s->cfg.on_note) s->cfg.on_note(s->cfg.note_ud, msg);
}

slm_status slm_session_configure(slm_session *s, const slm_session_cfg *cfg) {
    if (!s) return SLM_ERR_ARG;
    slm_session_cfg def;
    memset(&def, 0, sizeof def);
    if (!cfg) cfg = &def;
    if (cfg->n_stop < 0 || cfg->n_stop > MAX_STOP_STR)
        return slm_errf(&s->err, SLM_ERR_ARG, "stop strings: at most %d, got %d", MAX_STOP_STR, cfg->n_stop);
    if (cfg->top_logprobs < 0 || cfg->top_logprobs > SLM_MAX_TOP_LOGPROBS)
        return slm_errf(&s->err, SLM_ERR_ARG, "top_logprobs: 0 to %d, got %d", SLM_MAX_TOP_LOGPROBS, cfg->top_logprobs);
    if (cfg->logprobs && !s->lp_raw && !(s->lp_raw = slm_malloc((size_t)s->e->cfg.vocab_size * sizeof(float))))
        return slm_errf(&s->err, SLM_ERR_NOMEM, "out of memory");
    slm_gsamp *gs = NULL;
    if (cfg->samp.grammar) {
        slm_status st = slm_gsamp_new(s->e, cfg->samp.grammar, cfg->samp.grammar_tokens, &gs, &s->err);
        if (st) return st;
    }
    slm_gsamp_free(s->gs);
    s->gs = gs;
    clear_stop_strings(s);
    for (int i = 0; i < cfg->n_stop; i++) {
        if (!cfg->stop[i] || !cfg->stop[i][0]) continue;
        if (!(s->stop_str[s->n_stop_str] = slm_strdup(cfg->stop[i]))) {
            clear_stop_strings(s);
            return slm_errf(&s->err, SLM_ERR_NOMEM, "out of memory");
        }
        s->stop_of[s->n_stop_str++] = i;
    }
    s->cfg = *cfg;
    s->cfg.stop = NULL;
    s->cfg.n_stop = 0;
    s->cfg.samp.grammar = s->cfg.samp.grammar_tokens = NULL; /* compiled into s->gs */
    if (s->gs && s->use_draft) note(s, "[speculative decoding is off under a grammar: tokens are judged one at a time]");
    s->rng = cfg->samp.seed ? cfg->samp.seed : 0x5eed5eedull;
    return SLM_OK;
}

slm_status slm_session_new(slm_engine *e, const slm_session_cfg *cfg, slm_session **out) {
    *out = NULL;
    if (!e || !e->loaded) return SLM_ERR_ARG;
    int slot = slm_engine_claim_slot(e);
    if (slot < 0)
        return slm_errf(&e->err, SLM_ERR_CAPACITY, "all %d KV slots are in use (--parallel)", e->n_slots);
    slm_session *s = slm_calloc(1, sizeof *s);
    const int V = e->cfg.vocab_size;
    if (s) {
        s->logits = slm_aligned_alloc((size_t)V * sizeof(float));
        s->scratch = slm_malloc(slm_sample_scratch_size(V));
    }
    if (!s || !s->logits || !s->scratch) {
        if (s) {
            slm_aligned_free(s->logits);
            slm_xfree(s->scratch);
        }
        slm_xfree(s);
        slm_engine_release_slot(e, slot);
        return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    }
    s->e = e;
    s->slot = slot;
    if (e->draft && !e->draft_owner) {
        e->draft_owner = s;
        s->use_draft = 1;
    }
    s->pending = -1;
    s->prev = -1;
    slm_status st = slm_session_configure(s, cfg);
    if (st) {
        slm_errf(&e->err, st, "%s", s->err.msg);
        slm_session_free(s);
        return st;
    }
    slm_session_reset(s);
    *out = s;
    return SLM_OK;
}

static void rest_drop(slm_session *s) {
    slm_xfree(s->rest);
    s->rest = NULL;
    s->rest_n = s->rest_i = 0;
}

void slm_session_free(slm_session *s) {
    if (!s) return;
    rest_drop(s);
    if (s->e->draft_owner == s) s->e->draft_owner = NULL;
    slm_engine_release_slot(s->e, s->slot);
    clear_stop_strings(s);
    slm_gsamp_free(s->gs);
    slm_aligned_free(s->logits);
    slm_aligned_free(s->q);
    slm_xfree(s->scratch);
    slm_xfree(s->lp_raw);
    slm_xfree(s->out);
    slm_xfree(s);
}

static slm_runtime *rt_of(slm_session *s) {
    slm_rt_select(&s->e->rt, s->slot);
    return &s->e->rt;
}

slm_engine *slm_session_engine(slm_session *s) { return s->e; }
slm_err *slm_session_err(slm_session *s) { return &s->err; }
slm_runtime *slm_session_rt(slm_session *s) { return rt_of(s); }

static void reply_clear(slm_session *s) {
    s->out_len = s->safe = 0;
    if (s->out) s->out[0] = 0;
    s->produced = 0;
    s->stop = SLM_STOP_NONE;
    s->qn = s->qi = 0;
    slm_gsamp_reset(s->gs); /* each reply starts at the grammar's root */
}

void slm_session_reset(slm_session *s) {
    if (!s) return;
    rest_drop(s);
    slm_rt_reset(rt_of(s));
    if (s->use_draft) slm_rt_reset(&s->e->draft->rt);
    s->have_logits = 0;
    s->pending = -1;
    s->prev = -1;
    reply_clear(s);
}

const char *slm_session_error(const slm_session *s) {
    if (!s) return "no session";
    return s->err.msg[0] ? s->err.msg : slm_status_str(s->err.status);
}

int slm_session_n_past(const slm_session *s) {
    if (!s) return 0;
    slm_session *m = (slm_session *)s;
    return rt_of(m)->num_stored;
}

int slm_session_capacity(const slm_session *s) { return s ? s->e->rt.cap : 0; }

int slm_session_tokens(const slm_session *s, int32_t *ids, int cap) {
    if (!s) return 0;
    slm_runtime *rt = rt_of((slm_session *)s);
    int n = rt->num_stored;
    for (int i = 0; i < n && i < cap; i++) ids[i] = rt->tokens[i];
    if (s->pending >= 0) {
        if (n < cap) ids[n] = s->pending;
        n++;
    }
    return n;
}

void slm_session_get_stats(const slm_session *s, slm_session_stats *st) {
    if (!st) return;
    if (!s) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = s->st;
}

int slm_session_stop_reason(const slm_session *s) { return s ? s->stop : SLM_STOP_NONE; }

int slm_session_stop_index(const slm_session *s) {
    return s && s->stop == SLM_STOP_STRING && s->stop_hit >= 0 && s->stop_hit < s->n_stop_str ? s->stop_of[s->stop_hit] : -1;
}

const char *slm_session_text(const slm_session *s, size_t *len, size_t *safe) {
    if (len) *len = s ? s->out_len : 0;
    if (safe) *safe = s ? s->safe : 0;
    return s && s->out ? s->out : "";
}

/* ---- feeding --------------------------------------------------------------------- */


/* The first cut point in (from, to), else to. */
static int next_cut(const slm_session *s, int from, int to) {
    int c = to;
    if (s->cut_tail > from && s->cut_tail < c) c = s->cut_tail;
    if (s->cut_pc > from && s->cut_pc < c) c = s->cut_pc;
    return c;
}

/* At a cut point: the recurrent state checkpointed, and given to the
 * prefix cache at the shared prefix's end. */
static void at_cut(slm_session *s) {
    slm_runtime *rt = rt_of(s);
    const int at = rt->num_stored;
    if (!rt->rstate || at <= 0 || (at != s->cut_tail && at != s->cut_pc)) return;
    slm_rt_checkpoint(rt);
    if (at == s->cut_pc && s->e->pc.limit_bytes && slm_pc_store(&s->e->pc, rt, at))
        slm_trace_instant("engine", "prefix_cache_state", &(slm_trace_args){{"rows", NULL}, {at, 0}, NULL, NULL});
}

/* The cut points of a prompt of n rows in all (ids: all of it when whole,
 * else NULL) for a recurrent model: SNAP_TAIL rows before its end, and the
 * end of its prefix shared with an earlier prompt when the prefix cache
 * cannot restore that much. */
static void set_cuts(slm_session *s, const int32_t *ids, int n) {
    slm_runtime *rt = rt_of(s);
    s->cut_tail = s->cut_pc = 0;
    if (!rt->rstate) return;
    s->cut_tail = n - SNAP_TAIL > rt->num_stored ? n - SNAP_TAIL : 0;
    const slm_prefix_cache *pc = &s->e->pc;
    if (!ids || !pc->limit_bytes) return;
    const int c = slm_pc_shared(pc, ids, n - 1);
    if (c >= SHARED_MIN && c > rt->num_stored && c > slm_pc_match(pc, ids, n - 1)) s->cut_pc = c;
}

/* Prefill ids onto the rows the session holds (the engine's prefix cache
 * restores a shared prefix when the session is empty), and the draft's
 * mirror of them. Leaves the last row's logits in s->logits. */
static slm_status prefill(slm_session *s, const int32_t *ids, int n) {
    slm_engine *e = s->e;
    slm_runtime *rt = rt_of(s);
    double t0 = now_ms();
    int got = 0;
    slm_status st;
    if (e->pc.limit_bytes && rt->num_stored == 0 && n > 1) got = slm_pc_restore(&e->pc, rt, ids, n, n - 1);
    if (got > 0)
        slm_trace_instant("engine", "prefix_cache_hit", &(slm_trace_args){{"rows", "prompt"}, {got, n}, NULL, NULL});
    const int base = rt->num_stored - got;
    for (int done = got; done < n;) { /* recurrent layers: stopping at the cut points inside */
        const int to = rt->rstate ? next_cut(s, base + done, base + n) - base : n;
        if ((st = slm_rt_prefill(rt, ids + done, to - done, &s->err))) return st;
        done = to;
        at_cut(s);
    }
    if (e->pc.limit_bytes && !s->no_pc_store && (rt->num_stored == n || s->offer_pc)) {
        if (rt->rstate) slm_pc_seen(&e->pc, rt, rt->num_stored); /* its shared prefix: a later prompt's cut */
        else slm_pc_store(&e->pc, rt, rt->num_stored);
    }
    s->st.n_cached += got;
    s->st.n_reused += got;
    s->st.n_prefilled += n - got;
    memcpy(s->logits, rt->logits, (size_t)e->cfg.vocab_size * sizeof(float));
    s->have_logits = 1;
    if (s->use_draft) {
        slm_runtime *d = &e->draft->rt;
        if (d->num_stored + n > d->cap) {
            slm_rt_reset(d); /* out of step: resynchronize on the whole history */
            if ((st = slm_rt_prefill(d, rt->tokens, rt->num_stored, &e->draft->err)))
                return slm_errf(&s->err, st, "draft: %s", e->draft->err.msg);
        } else if ((st = slm_rt_prefill(d, ids, n, &e->draft->err))) {
            return slm_errf(&s->err, st, "draft: %s", e->draft->err.msg);
        }
    }
    s->st.prefill_ms += now_ms() - t0;
    return SLM_OK;
}

/* Whether n more tokens fit (chunking allowed or not, KV capacity). */
slm_status slm_session_check_fit(slm_session *s, int n) {
    slm_engine *e = s->e;
    slm_runtime *rt = rt_of(s);
    const int total = n + (s->pending >= 0);
    const slm_program *pp = slm_largest(&e->comp, SLM_PROG_PREFILL);
    if (!pp) return slm_errf(&s->err, SLM_ERR_UNSUPPORTED, "%s is an encoder: embeddings only, no text", e->cfg.arch);
    const int T = pp->rows;
    if (total > T && e->opt.no_chunking)
        return slm_errf(&s->err, SLM_ERR_CAPACITY,
                        "prompt is %d tokens but max_prompt_len is %d: raise --max-prompt-len (up to the "
                        "context length %d) or allow chunked prefill",
                        total, T, e->cfg.context_len);
    if (rt->num_stored + total > rt->cap) {
        if (rt->num_stored == 0)
            return slm_errf(&s->err, SLM_ERR_CAPACITY,
                            "prompt is %d tokens but the KV capacity is %d (max_prompt_len + min_response_len, "
                            "at most the context length %d)",
                            total, rt->cap, e->cfg.context_len);
        return slm_errf(&s->err, SLM_ERR_CAPACITY,
                        "%d tokens stored + %d new need %d rows, but the KV capacity is %d (max_prompt_len + "
                        "min_response_len, at most the context length %d)",
                        rt->num_stored, total, rt->num_stored + total, rt->cap, e->cfg.context_len);
    }
    return SLM_OK;
}

/* cont: the next piece of a stepped prompt (its rows are not "reused", the
 * time to first token runs from the prompt's start). */
static slm_status feed_ids(slm_session *s, const int32_t *ids, int n, int cont) {
    slm_runtime *rt = rt_of(s);
    if (!cont) {
        rest_drop(s);
        s->t_feed = now_ms();
    }
    s->first_pending = 1;
    if (n < 0 || (n > 0 && !ids)) return slm_errf(&s->err, SLM_ERR_ARG, "feed: %d ids", n);
    s->qn = s->qi = 0;
    const int extra = s->pending >= 0; /* the last sampled token goes in first */
    const int total = n + extra;
    if (total == 0) return slm_errf(&s->err, SLM_ERR_ARG, "feed: nothing to prefill");
    slm_status cs = slm_session_check_fit(s, n);
    if (cs) return cs;
    int32_t *buf = NULL;
    const int32_t *run = ids;
    if (extra) {
        if (!(buf = slm_malloc((size_t)total * sizeof(int32_t)))) return slm_errf(&s->err, SLM_ERR_NOMEM, "out of memory");
        buf[0] = s->pending;
        if (n) memcpy(buf + 1, ids, (size_t)n * sizeof(int32_t));
        run = buf;
    }
    if (!cont) s->st.n_reused += rt->num_stored;
    slm_status st = prefill(s, run, total);
    slm_xfree(buf);
    if (st) {
        s->have_logits = 0;
        return st;
    }
    s->pending = -1;
    if (n > 0) s->prev = ids[n - 1];
    reply_clear(s);
    if (!s->no_pc_store) slm_rt_checkpoint(rt); /* a whole prompt in: recurrent layers keep its state */
    return SLM_OK;
}

slm_status slm_session_feed(slm_session *s, const int32_t *ids, int n) {
    if (!s) return SLM_ERR_ARG;
    set_cuts(s, NULL, rt_of(s)->num_stored + n + (s->pending >= 0));
    return feed_ids(s, ids, n, 0);
}

/* The rows a new prompt keeps: its common prefix with what the session holds
 * (at most n - 1), unless the prefix cache holds more of it; the session is
 * trimmed (or reset) to them. Returns the count. */
static int prompt_keep(slm_session *s, const int32_t *ids, int n) {
    slm_runtime *rt = rt_of(s);
    int keep = 0;
    while (keep < rt->num_stored && keep < n - 1 && rt->tokens[keep] == ids[keep]) keep++;
    /* the prefix cache may hold more of it than the session does */
    if (keep > 0 && s->e->pc.limit_bytes && slm_pc_match(&s->e->pc, ids, n - 1) > keep) keep = 0;
    /* recurrent layers (qwen35): their state holds every stored token; a shorter prefix means
     * prefilling it again from the checkpoint (the end of the last prompt), or from row 0, which
     * costs what starting over does */
    if (!slm_rt_can_trim(rt, keep)) keep = 0;
    if (keep == 0) {
        slm_session_reset(s);
    } else if (slm_rt_trim(rt, keep) != SLM_OK) { /* a recurrent model's prefill from its checkpoint */
        slm_session_reset(s);
        keep = 0;
    } else {
        /* rows a recurrent model prefilled again from its checkpoint count as prefilled, not reused
         * (the feed that follows counts the kept rows as reused) */
        s->st.n_prefilled += rt->trim_rebuilt;
        s->st.n_reused -= rt->trim_rebuilt;
        if (s->use_draft && s->e->draft->rt.num_stored > keep) slm_rt_trim(&s->e->draft->rt, keep);
        s->pending = -1;
        s->qn = s->qi = 0;
        s->have_logits = 0;
    }
    return keep;
}

slm_status slm_session_set_prompt(slm_session *s, const int32_t *ids, int n) {
    if (!s || n < 1 || !ids) return s ? slm_errf(&s->err, SLM_ERR_ARG, "set_prompt: %d ids", n) : SLM_ERR_ARG;
    const int keep = prompt_keep(s, ids, n);
    s->offer_pc = 1;
    set_cuts(s, ids, n);
    slm_status st = feed_ids(s, ids + keep, n - keep, 0);
    s->offer_pc = 0;
    return st;
}

slm_status slm_session_prompt_step(slm_session *s, int budget, int *left) {
    if (left) *left = 0;
    if (!s) return SLM_ERR_ARG;
    if (budget < 1) return slm_errf(&s->err, SLM_ERR_ARG, "prompt step: budget %d", budget);
    if (s->rest_i >= s->rest_n) return slm_errf(&s->err, SLM_ERR_ARG, "prompt step: no prompt is being prefilled");
    const int m = s->rest_n - s->rest_i < budget ? s->rest_n - s->rest_i : budget;
    const int last = s->rest_i + m == s->rest_n;
    s->offer_pc = last;
    s->no_pc_store = !last;
    slm_status st = feed_ids(s, s->rest + s->rest_i, m, 1);
    s->offer_pc = s->no_pc_store = 0;
    if (st) {
        rest_drop(s);
        return st;
    }
    s->rest_i += m;
    if (left) *left = s->rest_n - s->rest_i;
    if (last) rest_drop(s);
    return SLM_OK;
}

slm_status slm_session_begin_prompt(slm_session *s, const int32_t *ids, int n, int budget, int *left) {
    if (left) *left = 0;
    if (!s || n < 1 || !ids) return s ? slm_errf(&s->err, SLM_ERR_ARG, "begin_prompt: %d ids", n) : SLM_ERR_ARG;
    if (budget < 1) return slm_errf(&s->err, SLM_ERR_ARG, "begin_prompt: budget %d", budget);
    int keep = prompt_keep(s, ids, n);
    if (n - keep <= budget) return slm_session_set_prompt(s, ids, n); /* all of it now: set_prompt's path */
    slm_engine *e = s->e;
    slm_runtime *rt = rt_of(s);
    rest_drop(s);
    s->t_feed = now_ms();
    slm_status cs = slm_session_check_fit(s, n - keep);
    if (cs) return cs;
    s->st.n_reused += rt->num_stored;
    set_cuts(s, ids, n);
    if (e->pc.limit_bytes && rt->num_stored == 0) { /* as prefill() does, over the whole prompt */
        const int got = slm_pc_restore(&e->pc, rt, ids, n, n - 1);
        if (got > 0) {
            slm_trace_instant("engine", "prefix_cache_hit", &(slm_trace_args){{"rows", "prompt"}, {got, n}, NULL, NULL});
            s->st.n_cached += got;
            s->st.n_reused += got;
            keep = got;
        }
    }
    if (!(s->rest = slm_malloc((size_t)(n - keep) * sizeof(int32_t)))) return slm_errf(&s->err, SLM_ERR_NOMEM, "out of memory");
    memcpy(s->rest, ids + keep, (size_t)(n - keep) * sizeof(int32_t));
    s->rest_n = n - keep;
    s->rest_i = 0;
    const double t = s->t_feed;
    slm_status st = slm_session_prompt_step(s, budget, left);
    s->t_feed = t;
    return st;
}

slm_status slm_session_feed_text(slm_session *s, const char *text, int flags) {
    if (!s || !text) return SLM_ERR_ARG;
    int32_t *ids = NULL;
    int n = slm_engine_tokenize(s->e, text, flags, &ids);
    if (n < 0)
        return slm_errf(&s->err, n == SLM_TOK_ENOMEM ? SLM_ERR_NOMEM : SLM_ERR_CAPACITY, "prompt: %s",
                        slm_tok_encode_error(n));
    if (n == 0 && s->pending < 0) {
        slm_xfree(ids);
        return slm_errf(&s->err, SLM_ERR_ARG, "the prompt encodes to no tokens and the vocabulary has no BOS");
    }
    slm_status st = slm_session_feed(s, ids, n);
    slm_xfree(ids);
    return st;
}

/* ---- decoding ------------------------------------------------------------------------ */

/* The overflow policy "truncate": keep the first token (BOS) and the newest
 * half of the rows, reset, prefill them again. */
static slm_status truncate_context(slm_session *s) {
    slm_engine *e = s->e;
    slm_runtime *rt = rt_of(s);
    const int have = rt->num_stored;
    int keep = rt->cap / 2;
    if (e->opt.no_chunking) { /* the re-prefill is one program call then */
        const int rows = slm_largest(rt->comp, SLM_PROG_PREFILL)->rows;
        if (keep > rows) keep = rows;
    }
    if (have < 2 || keep < 2) return slm_errf(&s->err, SLM_ERR_CAPACITY, "KV capacity %d too small to truncate", rt->cap);
    int32_t *hist = slm_malloc((size_t)have * sizeof(int32_t));
    if (!hist) return slm_errf(&s->err, SLM_ERR_NOMEM, "out of memory");
    memcpy(hist, rt->tokens, sizeof(int32_t) * (size_t)have);
    hist[have - keep] = hist[0]; /* BOS, then the newest keep - 1 tokens */
    char msg[200];
    snprintf(msg, sizeof msg,
             "[context full at %d tokens (capacity %d): dropped the oldest %d and re-prefilled %d]", have, rt->cap,
             have - keep, keep);
    slm_rt_reset(rt);
    if (s->use_draft) slm_rt_reset(&e->draft->rt);
    slm_status st = prefill(s, hist + have - keep, keep);
    slm_xfree(hist);
    if (st) return st;
    note(s, msg);
    s->st.n_truncations++;
    return SLM_OK;
}

/* Decode the pending token (the overflow policy applied): its logits
 * replace s->logits. */
static slm_status decode_pending(slm_session *s) {
    slm_engine *e = s->e;
    slm_runtime *rt = rt_of(s);
    slm_status st;
    if (rt->num_stored + 1 > rt->cap) {
        if (e->opt.on_overflow != SLM_OVERFLOW_TRUNCATE) {
            s->stop = SLM_STOP_CAPACITY;
            char msg[400];
            slm_rt_full_message(rt, msg, sizeof msg);
            return slm_errf(&s->err, SLM_ERR_CAPACITY, "%s", msg);
        }
        if ((st = truncate_context(s))) return st;
        rt = rt_of(s);
    }
    double t0 = now_ms();
    if ((st = slm_rt_decode(rt, s->pending, &s->err))) return st;
    if (s->use_draft && e->draft->rt.num_stored < rt->num_stored &&
        (st = slm_rt_decode(&e->draft->rt, s->pending, &e->draft->err)))
        return slm_errf(&s->err, st, "draft: %s", e->draft->err.msg);
    memcpy(s->logits, rt->logits, (size_t)e->cfg.vocab_size * sizeof(float));
    s->pending = -1;
    s->st.decode_ms += now_ms() - t0;
    return SLM_OK;
}

static int argmax_f(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The logits row lg with the sampling's biases and penalties, for a session
 * whose tokens are its first `base` stored rows then extra[0..n_extra), in
 * s->logits (lg may be s->logits). */
static float *adjusted(slm_session *s, const float *lg, int base, const int32_t *extra, int n_extra) {
    const int V = s->e->cfg.vocab_size;
    if (lg != s->logits) memcpy(s->logits, lg, (size_t)V * sizeof(float));
    slm_sample_adjust(s->logits, V, &s->cfg.samp, rt_of(s)->tokens, base, extra, n_extra, s->scratch);
    return s->logits;
}

/* The greedy pick from lg, after the biases and penalties when there are any. */
static int greedy_pick(slm_session *s, const float *lg, int base, const int32_t *extra, int n_extra) {
    const int V = s->e->cfg.vocab_size;
    return argmax_f(slm_sample_adjusts(&s->cfg.samp) ? adjusted(s, lg, base, extra, n_extra) : lg, V);
}

/* One speculative round after the pending token y: the draft proposes k
 * tokens, the verify program checks y and them in one call; the accepted
 * proposals and one more token (the correction, or a bonus after all were
 * accepted) are queued; the last queued one stays pending. */
static slm_status speculate(slm_session *s, int k) {
    slm_engine *e = s->e, *d = e->draft;
    slm_runtime *rt = rt_of(s);
    const int V = e->cfg.vocab_size;
    const int greedy = s->cfg.samp.temperature <= 0.0f;
    int32_t prop[MAX_DRAFT], ver[MAX_DRAFT + 1];
    slm_status st;
    double t0 = now_ms();
    const int y = s->pending, base = rt->num_stored, dbase = d->rt.num_stored;
    if (!greedy && !s->q && !(s->q = slm_aligned_alloc((size_t)MAX_DRAFT * V * sizeof(float))))
        return slm_errf(&s->err, SLM_ERR_NOMEM, "out of memory");
    int cur = y;
    ver[0] = y; /* the history after the stored rows: y, then the proposals so far */
    for (int i = 0; i < k; i++) {
        if ((st = slm_rt_decode(&d->rt, cur, &d->err))) return slm_errf(&s->err, st, "draft: %s", d->err.msg);
        if (greedy) {
            cur = greedy_pick(s, d->rt.logits, base, ver, i + 1);
        } else {
            float *q = s->q + (size_t)i * V;
            memcpy(q, adjusted(s, d->rt.logits, base, ver, i + 1), (size_t)V * sizeof(float));
            slm_sample_dist(q, V, &s->cfg.samp, s->scratch);
            cur = slm_sample_from(q, V, &s->rng);
        }
        prop[i] = cur;
        ver[i + 1] = cur;
    }
    const float *lg;
    if ((st = slm_rt_verify(rt, ver, k + 1, &lg, &s->err))) return st;
    int acc = 0, next;
    if (greedy) {
        while (acc < k && greedy_pick(s, lg + (size_t)acc * V, base, ver, acc + 1) == prop[acc]) acc++;
        next = greedy_pick(s, lg + (size_t)acc * V, base, ver, acc + 1);
    } else {
        /* accept proposal i with probability min(1, p(x)/q(x)); on the first
         * rejection sample from norm(max(0, p - q)); after k accepts, from p */
        next = -1;
        for (; acc < k; acc++) {
            float *p = adjusted(s, lg + (size_t)acc * V, base, ver, acc + 1);
            slm_sample_dist(p, V, &s->cfg.samp, s->scratch);
            const float *q = s->q + (size_t)acc * V;
            const int x = prop[acc];
            const float u = slm_random_f32(&s->rng);
            if (q[x] > 0.0f && u * q[x] < p[x]) continue; /* accepted */
            double sum = 0.0;
            for (int i = 0; i < V; i++) {
                float r = p[i] - q[i];
                p[i] = r > 0.0f ? r : 0.0f;
                sum += p[i];
            }
            if (sum <= 0.0) { /* p == q: any sample of p will do */
                p = adjusted(s, lg + (size_t)acc * V, base, ver, acc + 1);
                slm_sample_dist(p, V, &s->cfg.samp, s->scratch);
            }
            next = slm_sample_from(p, V, &s->rng);
            break;
        }
        if (next < 0) {
            float *p = adjusted(s, lg + (size_t)k * V, base, ver, k + 1);
            slm_sample_dist(p, V, &s->cfg.samp, s->scratch);
            next = slm_sample_from(p, V, &s->rng);
        }
    }
    slm_trace_instant("engine", acc == k ? "speculative_accept" : "speculative_reject",
                      &(slm_trace_args){{"drafted", "accepted", "position"}, {k, acc, base}, NULL, NULL});
    s->st.n_drafted += k;
    s->st.n_accepted += acc;
    /* keep y and the accepted rows; trim the rest from both caches */
    if ((st = slm_rt_trim(rt, base + 1 + acc)) || (st = slm_rt_trim(&d->rt, dbase + 1 + (acc < k ? acc : k - 1))))
        return slm_errf(&s->err, st, "speculative decoding: trimming the rejected tokens failed");
    if (acc == k && (st = slm_rt_decode(&d->rt, prop[k - 1], &d->err)))
        return slm_errf(&s->err, st, "draft: %s", d->err.msg);
    s->qn = s->qi = 0;
    for (int i = 0; i < acc; i++) s->queue[s->qn++] = prop[i];
    s->queue[s->qn++] = next;
    s->pending = -1; /* y is in the KV now; the queued tokens become pending one by one */
    s->st.decode_ms += now_ms() - t0;
    return SLM_OK;
}

/* Append piece to the reply text; find stop strings. 1 = a stop string ended it. */
static int add_text(slm_session *s, const char *piece) {
    if (!slm_piece_shown(s->e, piece)) return 0; /* as staticlm run prints */
    size_t pl = strlen(piece), from = s->out_len;
    if (s->out_len + pl + 1 > s->out_cap) {
        size_t nc = s->out_cap ? s->out_cap * 2 : 256;
        while (nc < s->out_len + pl + 1) nc *= 2;
        char *o = slm_realloc(s->out, nc);
        if (!o) return 0;
        s->out = o;
        s->out_cap = nc;
    }
    memcpy(s->out + s->out_len, piece, pl + 1);
    s->out_len += pl;
    size_t safe = s->out_len;
    int stopped = 0;
    for (int i = 0; i < s->n_stop_str; i++) { /* the earliest start; on a tie the first listed */
        size_t sl = strlen(s->stop_str[i]);
        size_t st = from > sl ? from - sl : 0;
        for (size_t p = st; p + sl <= s->out_len; p++)
            if (!memcmp(s->out + p, s->stop_str[i], sl)) {
                if (p < safe) {
                    safe = p;
                    s->stop_hit = i;
                }
                stopped = 1;
                break;
            }
    }
    if (stopped) {
        s->out_len = s->safe = safe;
        s->out[safe] = 0;
        return 1;
    }
    /* hold back a tail that could begin a stop string, and a split character */
    for (int i = 0; i < s->n_stop_str; i++) {
        size_t sl = strlen(s->stop_str[i]);
        for (size_t k = sl - 1; k > 0; k--)
            if (k <= s->out_len && !memcmp(s->out + s->out_len - k, s->stop_str[i], k)) {
                if (s->out_len - k < safe) safe = s->out_len - k;
                break;
            }
    }
    s->safe = slm_utf8_complete(s->out, safe);
    return 0;
}

/* The text held back as possibly the start of a stop string becomes final
 * at the end of the reply (not for a split UTF-8 character). */
static void finish_text(slm_session *s) { s->safe = s->out_len; }

/* Forget queued tokens from index `from` on: those verified into the KV
 * (all but the last queued) leave it again, in the draft's mirror too. */
static void drop_queue(slm_session *s, int from) {
    if (s->qn > 0 && from < s->qn) {
        int in_kv = s->qn - 1 - from;
        if (in_kv > 0) {
            slm_runtime *rt = rt_of(s);
            slm_rt_trim(rt, rt->num_stored - in_kv);
            if (s->use_draft) {
                slm_runtime *d = &s->e->draft->rt;
                if (d->num_stored > rt->num_stored) slm_rt_trim(d, rt->num_stored);
            }
        }
    }
    s->qn = s->qi = 0;
}

static slm_status stop_with(slm_session *s, int reason, int32_t *id) {
    if (s->qi < s->qn) drop_queue(s, s->qi);
    s->stop = reason;
    finish_text(s);
    *id = -1;
    return SLM_OK;
}

slm_status slm_session_next(slm_session *s, int32_t *id, const char **piece) {
    int32_t dummy_id;
    const char *dummy_piece;
    if (!id) id = &dummy_id;
    if (!piece) piece = &dummy_piece;
    *id = -1;
    *piece = "";
    if (!s) return SLM_ERR_ARG;
    s->lp_ok = 0;
    if (s->rest_i < s->rest_n)
        return slm_errf(&s->err, SLM_ERR_ARG, "the prompt is not all prefilled yet (%d ids left: slm_session_prompt_step)",
                        s->rest_n - s->rest_i);
    slm_engine *e = s->e;
    const int V = e->cfg.vocab_size;
    if (s->stop) return SLM_OK;
    if (s->cfg.n_predict > 0 && s->produced >= s->cfg.n_predict) return stop_with(s, SLM_STOP_LENGTH, id);
    slm_status st;
    int tok, want_lp = 0;
    if (s->qi < s->qn) {
        tok = s->queue[s->qi++];
    } else {
        if (!s->have_logits && s->pending < 0)
            return slm_errf(&s->err, SLM_ERR_ARG, "next: feed a prompt first");
        if (s->pending >= 0) {
            slm_runtime *rt = rt_of(s);
            int k = 0;
            if (s->use_draft && !s->gs && !s->cfg.logprobs) { /* a grammar judges one token at a time: no speculation */
                const slm_program *vp = slm_largest(&e->comp, SLM_PROG_VERIFY);
                k = vp ? vp->rows - 1 : 0;
                if (k > MAX_DRAFT) k = MAX_DRAFT;
                if (s->cfg.n_predict > 0 && k > s->cfg.n_predict - s->produced) k = s->cfg.n_predict - s->produced;
                if (rt->num_stored + k + 1 > rt->cap) k = rt->cap - rt->num_stored - 1;
                if (e->draft->rt.num_stored + k > e->draft->rt.cap) k = e->draft->rt.cap - e->draft->rt.num_stored;
                if (e->draft->rt.num_stored != rt->num_stored) k = 0; /* out of step: plain decode */
            }
            if (k >= 1) {
                if ((st = speculate(s, k))) return st;
                tok = s->queue[s->qi++];
                goto emit;
            }
            if ((st = decode_pending(s))) {
                if (s->stop == SLM_STOP_CAPACITY) finish_text(s);
                return st;
            }
        }
        slm_runtime *rt = rt_of(s);
        if ((want_lp = s->cfg.logprobs != 0)) memcpy(s->lp_raw, s->logits, (size_t)V * sizeof(float));
        slm_sample_adjust(s->logits, V, &s->cfg.samp, rt->tokens, rt->num_stored, NULL, 0, s->scratch);
        if (!s->gs) {
            tok = slm_sample(s->logits, V, &s->cfg.samp, &s->rng, s->scratch);
        } else {
            if ((st = slm_gsamp_sample(s->gs, e, s->logits, &s->cfg.samp, &s->rng, s->scratch, s->prev,
                                       s->cfg.ignore_eos, &tok, &s->st.n_masked, &s->err)))
                return st;
            if (tok < 0) return stop_with(s, SLM_STOP_TOKEN, id); /* the grammar is complete */
        }
    }
emit:
    if (s->first_pending) {
        s->first_pending = 0;
        s->st.ttft_ms = now_ms() - s->t_feed;
    }
    if (!s->cfg.ignore_eos && slm_is_stop_token(e, tok)) {
        /* a stop token never enters the KV; a verified one already did: drop it */
        if (s->qn > 0) drop_queue(s, s->qi - 1);
        s->pending = -1;
        return stop_with(s, SLM_STOP_TOKEN, id);
    }
    if (s->gs && (st = slm_gsamp_accept(s->gs, e, s->prev, tok, &s->err))) return st;
    if (want_lp) { /* tokens queued by speculation have none (it is off under logprobs) */
        s->lp.n_top = s->cfg.top_logprobs < V ? s->cfg.top_logprobs : V;
        const double lse = slm_logprobs_top(s->lp_raw, V, s->lp.n_top, s->lp.top);
        s->lp.token.id = tok;
        s->lp.token.logprob = s->lp_raw[tok] == s->lp_raw[tok] ? (float)((double)s->lp_raw[tok] - lse) : -INFINITY;
        s->lp.prev = s->prev;
        s->lp.text_offset = s->out_len;
        s->lp_ok = 1;
    }
    s->pending = tok;
    s->produced++;
    s->st.n_generated++;
    *piece = slm_tok_decode(e->tok, s->prev, tok);
    s->prev = tok;
    *id = tok;
    if (s->qi < s->qn) s->pending = -1; /* queued tokens are in the KV already (verified rows) */
    if (s->qi == s->qn && s->qn > 0) {
        /* the last queued token is the one not yet in the KV */
        s->qn = s->qi = 0;
        s->pending = tok;
    }
    if (add_text(s, *piece)) s->stop = SLM_STOP_STRING;
    return SLM_OK;
}

slm_status slm_session_logprobs(const slm_session *s, slm_token_logprobs *out) {
    if (!s || !out || !s->lp_ok) return SLM_ERR_ARG;
    *out = s->lp;
    return SLM_OK;
}

/* Whether next() would decode s's pending token with a plain step. */
static int wants_plain_decode(slm_session *s) {
    if (s->stop || s->qi < s->qn || s->pending < 0) return 0;
    if (s->cfg.n_predict > 0 && s->produced >= s->cfg.n_predict) return 0;
    if (s->use_draft) return 0;
    slm_runtime *rt = rt_of(s);
    return rt->num_stored + 1 <= rt->cap;
}

slm_status slm_session_next_batch(slm_session *const *ss, int n, int32_t *ids, const char **pieces,
                                  slm_status *statuses) {
    if (n <= 0) return SLM_OK;
    if (!ss || !ids) return SLM_ERR_ARG;
    slm_engine *e = ss[0]->e;
    slm_runtime *rt = &e->rt;
    const int V = e->cfg.vocab_size;
    slm_status first = SLM_OK;
    if (statuses)
        for (int i = 0; i < n; i++) statuses[i] = SLM_OK;
    if (rt->batch_max >= 2) {
        int seqs[64], idx[64], k = 0;
        int32_t toks[64];
        for (int i = 0; i <= n; i++) {
            if (i < n && ss[i]->e == e && wants_plain_decode(ss[i])) {
                idx[k] = i;
                seqs[k] = ss[i]->slot;
                toks[k] = ss[i]->pending;
                k++;
            }
            /* a full batch, or the end with at least two */
            if (k == rt->batch_max || k == 64 || (i == n && k >= 2)) {
                const float *lg;
                double t0 = now_ms();
                slm_status st = slm_rt_decode_batch(rt, seqs, toks, k, &lg, &e->err);
                for (int j = 0; j < k; j++) {
                    slm_session *s = ss[idx[j]];
                    if (st) {
                        slm_errf(&s->err, st, "%s", e->err.msg);
                        if (statuses) statuses[idx[j]] = st;
                        continue;
                    }
                    memcpy(s->logits, lg + (size_t)j * V, (size_t)V * sizeof(float));
                    s->pending = -1;
                    s->st.n_batched++;
                    s->st.decode_ms += (now_ms() - t0) / k;
                }
                if (st && !first) first = st;
                k = 0;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const char *piece = NULL;
        slm_status st = slm_session_next(ss[i], &ids[i], &piece);
        if (pieces) pieces[i] = piece;
        if (st) {
            if (statuses) statuses[i] = st;
            if (!first) first = st;
        }
    }
    return first;
}
