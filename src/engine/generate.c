/* slm_generate: the one-shot API (run's, bench's) over a session: tokenize
 * the prompt with BOS, echo it, feed it, then call slm_session_next until a
 * stop or the length limit, handing each piece to the callback. It uses the
 * session's public calls only. */
#include <stdint.h>
#include <string.h>

#include "engine/engine_internal.h"

static void gen_note(void *ud, const char *msg) {
    void **p = ud;
    slm_piece_cb cb = (slm_piece_cb)(uintptr_t)p[0];
    if (cb) cb(p[1], -1, msg, 2);
}

slm_status slm_generate(slm_engine *e, const char *prompt, int n_generate, const slm_sampling *sp, int ignore_eos,
                        slm_piece_cb cb, void *ud, slm_gen_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!e || !e->loaded) return SLM_ERR_ARG;
    if (!prompt) prompt = "";
    void *note_ud[2] = {(void *)(uintptr_t)cb, ud};
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    if (sp) cfg.samp = *sp;
    cfg.ignore_eos = ignore_eos;
    cfg.n_predict = n_generate > 0 ? n_generate : 0;
    cfg.on_note = gen_note;
    cfg.note_ud = note_ud;
    slm_session *s;
    slm_status st = slm_session_new(e, &cfg, &s);
    if (st) return st;
    int32_t *ids = NULL;
    int n = slm_engine_tokenize(e, prompt, SLM_FEED_BOS, &ids);
    if (n == SLM_TOK_ETOOLONG)
        st = slm_errf(&e->err, SLM_ERR_CAPACITY, "prompt: %s (%zu bytes; raise max_prompt_bytes)",
                      slm_tok_encode_error(n), slm_tok_max_input(e->tok));
    else if (n < 0)
        st = slm_errf(&e->err, n == SLM_TOK_ENOMEM ? SLM_ERR_NOMEM : SLM_ERR_CAPACITY, "prompt: %s",
                      slm_tok_encode_error(n));
    else if (n == 0) st = slm_errf(&e->err, SLM_ERR_ARG, "the prompt encodes to no tokens and the vocabulary has no BOS");
    if (!st && (st = slm_session_check_fit(s, n))) slm_errf(&e->err, st, "%s", slm_session_error(s));
    int stop = 0;
    /* the echo skips BOS only: a vocabulary that adds none (GPT-2, Qwen) starts at the first token */
    const int first = n > 0 && ids[0] == slm_tok_bos(e->tok) ? 1 : 0;
    for (int i = first; !st && i < n && !stop; i++)
        if (cb) stop = cb(ud, ids[i], slm_tok_decode(e->tok, i > 0 ? ids[i - 1] : -1, ids[i]), 1);
    if (stats && n > 0) stats->n_prompt = n;
    if (!st && !stop) {
        st = slm_session_feed(s, ids, n);
        if (st) slm_errf(&e->err, st, "%s", slm_session_error(s));
    }
    slm_xfree(ids);
    if (!st && !stop && n_generate > 0) {
        for (;;) {
            int32_t id;
            const char *piece;
            if ((st = slm_session_next(s, &id, &piece))) {
                slm_errf(&e->err, st, "%s", slm_session_error(s));
                break;
            }
            if (id < 0) break;
            if (cb && cb(ud, id, piece, 0)) break;
        }
    }
    if (stats) {
        slm_session_stats ss;
        slm_session_get_stats(s, &ss);
        stats->n_generated = ss.n_generated;
        stats->prefill_ms = ss.prefill_ms;
        stats->decode_ms = ss.decode_ms;
        stats->n_cached = ss.n_cached;
        stats->n_drafted = ss.n_drafted;
        stats->n_accepted = ss.n_accepted;
        stats->n_truncations = ss.n_truncations;
    }
    slm_session_free(s);
    return st;
}
