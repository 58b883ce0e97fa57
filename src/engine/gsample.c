/* engine/gsample.c — grammar-constrained sampling at the token level, for
 * sessions (engine/session.c) whose sampling names a GBNF grammar.
 *
 * A token may be sampled when its text continues the grammar (its piece as
 * the reply would show it; the matcher is text/grammar.h's), a token of the
 * stop set only when the grammar may end there (and the stop set is on). A
 * token without printable text (control tokens, unknown, lone unprintable
 * bytes) never fits a grammar, but those the sampling's grammar_tokens
 * names, which count as their text.
 *
 * Sampling tries the cheap way first, as llama.cpp does: a token is drawn
 * from a copy of the logits without the grammar and kept when the grammar
 * takes it (for plain temperature sampling this is exactly the masked
 * distribution: rejection sampling; greedy takes the best allowed token
 * either way). Only when it is refused is the whole vocabulary masked (the
 * refused tokens' logits set to -inf; the tokens walked in byte order so
 * that a shared prefix is matched once) and the token drawn again. The
 * vocabulary's byte strings are prepared once per engine, at the first
 * grammar. Everything a session needs is allocated when it is configured:
 * sampling allocates nothing. */
#include <math.h>

#include "engine/engine_internal.h"
#include "text/grammar.h"

struct slm_gsamp {
    slm_grammar *g;
    slm_gmatch *m;
    uint8_t *allowed; /* [V] the mask */
    float *work;      /* [V] the logits of the first draw */
    int special[SLM_MAX_GRAMMAR_TOKENS]; /* [n_special] control tokens that count as their text */
    int n_special;
};

static int is_special(const slm_gsamp *gs, int id) {
    for (int k = 0; k < gs->n_special; k++)
        if (gs->special[k] == id) return 1;
    return 0;
}

/* The control tokens whose texts list names (space separated), every id of
 * each text. A text no token has is no error: the grammar may spell it
 * with other tokens. */
static slm_status find_specials(slm_gsamp *gs, const slm_engine *e, const char *list, slm_err *err) {
    const int V = e->cfg.vocab_size;
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        for (int id = 0; n && id < V; id++) {
            const char *s = slm_tok_str(e->tok, id);
            if (!s || slm_tok_type(e->tok, id) != 3 || strlen(s) != n || memcmp(s, p, n) || is_special(gs, id)) continue;
            if (gs->n_special == SLM_MAX_GRAMMAR_TOKENS)
                return slm_errf(err, SLM_ERR_ARG, "grammar: more than %d control tokens named", SLM_MAX_GRAMMAR_TOKENS);
            gs->special[gs->n_special++] = id;
        }
        p += n;
    }
    return SLM_OK;
}

static int neutral_prev(const slm_engine *e) { return slm_tok_bos(e->tok) == 0 ? 1 : 0; }

/* The bytes token id adds to the reply after prev; NULL when it has no
 * printable text (or is a stop token). */
static const char *token_text(const slm_engine *e, int prev, int id) {
    if (slm_is_stop_token(e, id)) return NULL;
    const int type = slm_tok_type(e->tok, id);
    if (type == 2 || type == 3) return NULL; /* unknown, control */
    const char *p = slm_tok_decode(e->tok, prev, id);
    return slm_piece_shown(e, p) ? p : NULL;
}

/* The engine's vocabulary as byte strings, sorted (once). */
static slm_status ensure_vocab(slm_engine *e, slm_err *err) {
    if (e->gvocab) return SLM_OK;
    const int V = e->cfg.vocab_size, prev = neutral_prev(e);
    const char **str = slm_malloc((size_t)V * sizeof *str + 1);
    uint32_t *len = slm_malloc((size_t)V * sizeof *len + 1);
    slm_status st = SLM_OK;
    if (!str || !len) {
        st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    } else {
        for (int i = 0; i < V; i++) {
            str[i] = token_text(e, prev, i);
            len[i] = str[i] ? (uint32_t)strlen(str[i]) : 0;
        }
        st = slm_gvocab_new(V, str, len, &e->gvocab, err);
    }
    slm_xfree(str);
    slm_xfree(len);
    return st;
}

slm_status slm_gsamp_new(slm_engine *e, const char *text, const char *tokens, slm_gsamp **out, slm_err *err) {
    *out = NULL;
    slm_status st = ensure_vocab(e, err);
    if (st) return st;
    slm_gsamp *gs = slm_calloc(1, sizeof *gs);
    if (!gs) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    const int V = e->cfg.vocab_size;
    if ((st = find_specials(gs, e, tokens, err)) || (st = slm_grammar_compile(text, strlen(text), &gs->g, err)) ||
        (st = slm_gmatch_new(gs->g, &gs->m, err))) {
        slm_gsamp_free(gs);
        return st;
    }
    gs->allowed = slm_malloc((size_t)V + 1);
    gs->work = slm_aligned_alloc((size_t)V * sizeof(float));
    if (!gs->allowed || !gs->work) {
        slm_gsamp_free(gs);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    *out = gs;
    return SLM_OK;
}

void slm_gsamp_free(slm_gsamp *gs) {
    if (!gs) return;
    slm_gmatch_free(gs->m);
    slm_grammar_free(gs->g);
    slm_xfree(gs->allowed);
    slm_aligned_free(gs->work);
    slm_xfree(gs);
}

void slm_gsamp_reset(slm_gsamp *gs) {
    if (gs) slm_gmatch_reset(gs->m);
}

/* Whether token id may follow (1), not (0), or the work limits (-1). */
static int allows(slm_gsamp *gs, const slm_engine *e, int prev, int ignore_eos, int id) {
    if (id < 0) return 0;
    if (slm_is_stop_token(e, id)) return !ignore_eos && slm_gmatch_can_end(gs->m);
    const char *p = is_special(gs, id) ? slm_tok_decode(e->tok, prev, id) : token_text(e, prev, id);
    return p ? slm_gmatch_check(gs->m, p, strlen(p)) : 0;
}

/* The mask over the whole vocabulary into gs->allowed: the count allowed, -1. */
static int mask_vocab(slm_gsamp *gs, const slm_engine *e, int prev, int ignore_eos) {
    const int V = e->cfg.vocab_size;
    int n;
    if (prev < 0 || prev == slm_tok_bos(e->tok)) { /* pieces lose a leading space here: token by token */
        n = 0;
        for (int i = 0; i < V; i++) {
            const int a = slm_is_stop_token(e, i) ? 0 : allows(gs, e, prev, ignore_eos, i);
            if (a < 0) return -1;
            gs->allowed[i] = (uint8_t)a;
            n += a;
        }
    } else if ((n = slm_gmatch_mask(gs->m, e->gvocab, gs->allowed)) < 0) {
        return -1;
    } else {
        for (int k = 0; k < gs->n_special; k++) { /* not in the prepared vocabulary: one by one */
            const int id = gs->special[k], a = slm_is_stop_token(e, id) ? 0 : allows(gs, e, prev, ignore_eos, id);
            if (a < 0) return -1;
            n += a - gs->allowed[id];
            gs->allowed[id] = (uint8_t)a;
        }
    }
    if (!ignore_eos && slm_gmatch_can_end(gs->m))
        for (int k = 0; k < e->n_stop_ids; k++) {
            const int id = e->stop_ids[k];
            if (id >= 0 && id < V && !gs->allowed[id]) {
                gs->allowed[id] = 1;
                n++;
            }
        }
    return n;
}

slm_status slm_gsamp_sample(slm_gsamp *gs, const slm_engine *e, float *logits, const slm_sampling *s, uint64_t *rng,
                            void *scratch, int prev, int ignore_eos, int *tok, int *masked, slm_err *err) {
    const int V = e->cfg.vocab_size;
    memcpy(gs->work, logits, (size_t)V * sizeof(float));
    int t = slm_sample(gs->work, V, s, rng, scratch);
    int a = allows(gs, e, prev, ignore_eos, t);
    if (a == 1) {
        *tok = t;
        return SLM_OK;
    }
    ++*masked;
    int n = a < 0 ? -1 : mask_vocab(gs, e, prev, ignore_eos);
    if (n < 0) return slm_errf(err, SLM_ERR_CAPACITY, "%s", slm_gmatch_error(gs->m));
    if (n == 0) {
        if (slm_gmatch_can_end(gs->m)) { /* complete, and no stop token may end it (ignore_eos) */
            *tok = -1;
            return SLM_OK;
        }
        return slm_errf(err, SLM_ERR_ARG, "grammar: no token of the vocabulary can continue the text here");
    }
    int best = -1;
    for (int i = 0; i < V; i++) {
        if (!gs->allowed[i]) logits[i] = -INFINITY;
        else if (best < 0 || logits[i] > logits[best]) best = i;
    }
    t = slm_sample(logits, V, s, rng, scratch);
    *tok = t >= 0 && t < V && gs->allowed[t] ? t : best; /* rounding at the tail of a cumulative sum */
    return SLM_OK;
}

slm_status slm_gsamp_accept(slm_gsamp *gs, const slm_engine *e, int prev, int id, slm_err *err) {
    if (slm_is_stop_token(e, id)) return SLM_OK;
    const char *p = is_special(gs, id) ? slm_tok_decode(e->tok, prev, id) : token_text(e, prev, id);
    if (!p) return slm_errf(err, SLM_ERR_INTERNAL, "grammar: token %d has no text", id);
    return slm_gmatch_accept(gs->m, p, strlen(p), err);
}
