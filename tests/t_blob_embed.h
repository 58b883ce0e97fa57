/* A model's embeddings from a blob against the same from its source file:
 * the source loaded with embeddings (options o), written as a blob
 * (slm_save_blob: the embedding programs, .slm.embed and the heads), the
 * blob loaded, and for ids[0..n) every pooling (rank with a classifier
 * head) equal bit for bit, the model's pooling and rank scores the same,
 * then the batch path from the blob (slm_session_embed_batch over texts of
 * the lengths in lens) against one text at a time from the source. The
 * blob is removed after. */
#ifndef SLM_T_BLOB_EMBED_H
#define SLM_T_BLOB_EMBED_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "staticlm.h"
#include "t.h"
#include "t_engine.h"

static inline void t_blob_embed_check(const char *src, const slm_options *o, const char *blob, const int32_t *ids, int n,
                                      const int *lens, int n_lens) {
    slm_engine *a = t_load(src, o);
    CHECKF(a != NULL, "%s", src);
    if (!a) return;
    CHECKF(slm_save_blob(a, blob) == SLM_OK, "%s: %s", blob, slm_last_error(a));
    slm_options ob = *o;
    ob.max_prompt_len = 0; /* the blob's own */
    ob.min_response_len = -1;
    ob.prefill_variants[0] = 0;
    ob.tokenizer_path = NULL;
    slm_engine *b = t_load(blob, &ob);
    CHECKF(b != NULL, "%s", blob);
    slm_session *sa = NULL, *sb = NULL;
    if (b) {
        CHECK(slm_session_new(a, NULL, &sa) == SLM_OK);
        CHECK(slm_session_new(b, NULL, &sb) == SLM_OK);
        CHECK(slm_model_pooling(a) == slm_model_pooling(b));
        CHECK(slm_model_rank_outputs(a) == slm_model_rank_outputs(b));
        CHECK(slm_model_is_encoder(a) == slm_model_is_encoder(b));
    }
    if (sa && sb) {
        slm_info ia;
        slm_get_info(a, &ia);
        const int dim = ia.dim, rank = slm_model_rank_outputs(a);
        const size_t cap = (size_t)n * (size_t)dim + 64;
        float *x = calloc(cap, sizeof *x), *y = calloc(cap, sizeof *y);
        const int pools[] = {SLM_POOLING_NONE, SLM_POOLING_MEAN, SLM_POOLING_CLS, SLM_POOLING_LAST, SLM_POOLING_RANK,
                             SLM_POOLING_DEFAULT};
        for (size_t k = 0; x && y && k < sizeof pools / sizeof pools[0]; k++) {
            if (pools[k] == SLM_POOLING_RANK && !rank) continue;
            const int pk = pools[k] == SLM_POOLING_DEFAULT ? slm_model_pooling(a) : pools[k];
            const size_t w = pk == SLM_POOLING_RANK ? (size_t)rank
                             : pk == SLM_POOLING_NONE ? (size_t)n * (size_t)dim : (size_t)dim;
            memset(x, 0, cap * sizeof *x);
            memset(y, 0xff, cap * sizeof *y);
            CHECKF(slm_session_embed(sa, ids, n, pools[k], x, cap) == SLM_OK, "%s: %s", src, slm_session_error(sa));
            CHECKF(slm_session_embed(sb, ids, n, pools[k], y, cap) == SLM_OK, "%s: %s", blob, slm_session_error(sb));
            CHECKF(!memcmp(x, y, w * sizeof *x), "%s: pooling %d: the blob's embedding differs from the source's", blob,
                   pools[k]);
        }
        if (rank && x && y) { /* a cross-encoder's pair */
            CHECK(slm_session_rerank(sa, "w5 w7", "w9 w11 w5", x, (size_t)rank, NULL) == SLM_OK);
            CHECK(slm_session_rerank(sb, "w5 w7", "w9 w11 w5", y, (size_t)rank, NULL) == SLM_OK);
            CHECKF(!memcmp(x, y, (size_t)rank * sizeof *x), "%s: rerank score differs from the source's", blob);
        }
        /* several texts at once from the blob (its embed.BxS programs where it has them) */
        const int32_t **pid = calloc((size_t)n_lens + 1, sizeof *pid);
        float **got = calloc((size_t)n_lens + 1, sizeof *got);
        size_t *caps = calloc((size_t)n_lens + 1, sizeof *caps);
        const int pool = rank ? SLM_POOLING_RANK : SLM_POOLING_MEAN, width = rank ? rank : dim;
        for (int t = 0; pid && got && caps && t < n_lens; t++) {
            pid[t] = ids + (t % 3);
            caps[t] = (size_t)width;
            got[t] = calloc((size_t)width, sizeof(float));
        }
        if (pid && got && caps && x) {
            CHECKF(slm_session_embed_batch(sb, n_lens, pid, lens, pool, got, caps) == SLM_OK, "%s: %s", blob,
                   slm_session_error(sb));
            double worst = 0, big = 1e-30;
            for (int t = 0; t < n_lens; t++) {
                CHECK(slm_session_embed(sa, pid[t], lens[t], pool, x, (size_t)width) == SLM_OK);
                for (int j = 0; j < width && got[t]; j++) {
                    big = big > fabs(x[j]) ? big : fabs(x[j]);
                    const double d = fabs(got[t][j] - x[j]);
                    worst = worst > d ? worst : d;
                }
            }
            CHECKF(worst / big <= 1e-5, "%s: batch from the blob vs one at a time from the source: %g", blob, worst / big);
        }
        for (int t = 0; got && t < n_lens; t++) free(got[t]);
        free(got);
        free(caps);
        free(pid);
        free(x);
        free(y);
    }
    slm_session_free(sa);
    slm_session_free(sb);
    slm_free(b);
    slm_free(a);
    unlink(blob);
}

/* Cache mode (o->cache_dir, a fresh folder): the first load compiles and
 * writes the blob (and runs from it), the second maps it; both give the
 * source's embeddings of ids[0..n) bit for bit (the default pooling and
 * none). */
static inline void t_blob_embed_cache_check(const char *src, const slm_options *o, const int32_t *ids, int n) {
    slm_options os = *o;
    os.cache_dir = NULL;
    slm_engine *a = t_load(src, &os);
    CHECKF(a != NULL, "%s", src);
    slm_session *sa = NULL;
    if (a) CHECK(slm_session_new(a, NULL, &sa) == SLM_OK);
    slm_info ia;
    if (a) slm_get_info(a, &ia);
    const size_t cap = a ? (size_t)n * (size_t)ia.dim + 64 : 1;
    float *x = calloc(cap, sizeof *x), *y = calloc(cap, sizeof *y);
    for (int k = 0; sa && x && y && k < 2; k++) {
        slm_engine *b = t_load(src, o);
        CHECKF(b != NULL, "%s (cache mode, load %d)", src, k + 1);
        if (!b) break;
        const char *note = slm_cache_note(b);
        CHECKF(note && !strstr(note, "failed") && (k == 0 || strstr(note, "loaded cached blob")),
               "%s: cache mode, load %d: %s", src, k + 1, note ? note : "(no note)");
        slm_session *sb = NULL;
        CHECK(slm_session_new(b, NULL, &sb) == SLM_OK);
        const int pools[2] = {SLM_POOLING_DEFAULT, SLM_POOLING_NONE};
        for (int p = 0; sb && p < 2; p++) {
            const int pk = pools[p] == SLM_POOLING_DEFAULT ? slm_model_pooling(a) : pools[p];
            const size_t w = pk == SLM_POOLING_RANK ? (size_t)slm_model_rank_outputs(a)
                             : pk == SLM_POOLING_NONE ? (size_t)n * (size_t)ia.dim : (size_t)ia.dim;
            memset(y, 0xff, cap * sizeof *y);
            CHECK(slm_session_embed(sa, ids, n, pools[p], x, cap) == SLM_OK);
            CHECKF(slm_session_embed(sb, ids, n, pools[p], y, cap) == SLM_OK, "%s", slm_session_error(sb));
            CHECKF(!memcmp(x, y, w * sizeof *x), "%s: cache mode, load %d, pooling %d: differs from the source's", src,
                   k + 1, pools[p]);
        }
        slm_session_free(sb);
        slm_free(b);
    }
    free(x);
    free(y);
    slm_session_free(sa);
    slm_free(a);
}

#endif
