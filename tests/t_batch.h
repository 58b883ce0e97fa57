/* tests/t_batch.h — sessions decoded together on an engine's slots
 * (continuous batching), shared by the tests of batch programs. Include
 * after t.h. */
#ifndef SLM_TEST_T_BATCH_H
#define SLM_TEST_T_BATCH_H

#include <string.h>

#include "staticlm.h"

/* Greedy sessions of ntok tokens that do not stop at EOS. */
static inline slm_session_cfg t_greedy(int ntok) {
    slm_session_cfg c;
    memset(&c, 0, sizeof c);
    c.n_predict = ntok;
    c.ignore_eos = 1;
    return c;
}

/* Each of the np prompts alone (one session at a time) on e: want[p * ntok + i]. */
static inline void t_sessions_alone(slm_engine *e, const slm_session_cfg *cfg, const char *const *prompts, int np,
                                    int ntok, int *want) {
    for (int p = 0; p < np; p++) {
        slm_session *s = NULL;
        CHECK(slm_session_new(e, cfg, &s) == SLM_OK);
        CHECK(slm_session_feed_text(s, prompts[p], SLM_FEED_BOS) == SLM_OK);
        for (int i = 0; i < ntok; i++) {
            int32_t id = -1;
            CHECK(slm_session_next(s, &id, NULL) == SLM_OK);
            want[p * ntok + i] = id;
        }
        slm_session_free(s);
    }
}

/* The np prompts greedily through e's slots, one joining per step while a
 * slot is free, each for ntok tokens (cfg: its n_predict and ignore_eos);
 * a finished session frees its slot. got[p * ntok + i]: prompt p's tokens
 * (-1 where missing), n_got[p] their count; returns the tokens that came
 * from batch steps (slm_session_stats.n_batched). */
static inline int t_sessions_together(slm_engine *e, const slm_session_cfg *cfg, const char *const *prompts, int np,
                                      int ntok, int *got, int *n_got) {
    slm_info in;
    slm_get_info(e, &in);
    slm_session *live[8] = {0};
    int who[8], next_prompt = 0, n_live = 0, steps = 0, n_batched = 0;
    memset(got, 0xff, (size_t)np * (size_t)ntok * sizeof *got);
    memset(n_got, 0, (size_t)np * sizeof *n_got);
    while ((next_prompt < np || n_live > 0) && steps < 1000) {
        if (next_prompt < np && n_live < in.n_seqs && n_live < 8) {
            slm_session *s = NULL;
            CHECK(slm_session_new(e, cfg, &s) == SLM_OK);
            CHECK(slm_session_feed_text(s, prompts[next_prompt], SLM_FEED_BOS) == SLM_OK);
            live[n_live] = s;
            who[n_live++] = next_prompt++;
        }
        int32_t ids[8];
        CHECK(slm_session_next_batch(live, n_live, ids, NULL, NULL) == SLM_OK);
        for (int i = 0; i < n_live;) {
            const int p = who[i];
            if (ids[i] >= 0 && n_got[p] < ntok) got[p * ntok + n_got[p]++] = ids[i];
            if (ids[i] < 0) {
                slm_session_stats st;
                slm_session_get_stats(live[i], &st);
                n_batched += st.n_batched;
                slm_session_free(live[i]);
                live[i] = live[n_live - 1];
                who[i] = who[n_live - 1];
                ids[i] = ids[n_live - 1];
                n_live--;
            } else {
                i++;
            }
        }
        steps++;
    }
    return n_batched;
}

#endif
